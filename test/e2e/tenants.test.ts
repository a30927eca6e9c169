/**
 * Isolated tenants (ADR 060, docs/tenants.md), tested as an attacker of tenant globex would try
 * to reach tenant acme, in both eras: a legacy session through the official SDK client and
 * stateless 2026-07-28 requests. Both tenants name their upstream `main` and their server
 * `default`. Every refusal must read exactly like the answer for something that does not exist.
 */
import assert from 'node:assert/strict'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import type { AuditLog } from '../../src/audit/audit-log.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { openAuditLog } from '../../src/gateway/audit-setup.ts'
import { memoryStore } from '../../src/store/memory.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { finalReply, postStatelessToolCall } from '../support/stateless.ts'

type Json = Record<string, unknown>

const root = fileURLToPath(new URL('../../', import.meta.url))
const pkg = (name: string) =>
  join(root, 'node_modules/@modelcontextprotocol', name, 'dist/index.js')
const everything = { command: process.execPath, args: [pkg('server-everything'), 'stdio'] }

const acme = generateApiKey()
const globex = generateApiKey()
const rogue = generateApiKey()
const acmeAdmin = generateApiKey()
const globexAdmin = generateApiKey()
const rootAdmin = generateApiKey()

let server: RunningServer
const store = memoryStore()
let issuer: TestIssuer

before(async () => {
  issuer = await startIssuer({ clients: [] })
  const state = mkdtempSync(join(tmpdir(), 'barbican-tenants-'))
  const text = JSON.stringify({
    listen: '127.0.0.1:0',
    // Small pages, so that lists have cursors to steal.
    limits: { listPageSize: 2 },
    upstreams: {
      main: {
        command: process.execPath,
        args: [pkg('server-memory')],
        env: { MEMORY_FILE_PATH: join(state, 'memory.jsonl') },
        sandbox: { stateDir: state },
      },
    },
    tenants: {
      // acme's own guards (ADR 060): globex keeps the top-level ones (none).
      acme: { upstreams: { main: everything }, guards: { arguments: 'enforce' } },
      globex: {
        upstreams: { main: everything },
        servers: {
          default: {
            upstreams: ['main'],
            tools: { include: ['trigger-long-running-operation', 'get-sum'] },
            resources: { exclude: ['**'] },
          },
        },
      },
    },
    auth: {
      // Tokens name their tenant in `org_id`.
      jwt: { issuer: issuer.issuer, algorithms: ['ES256'], tenantClaim: 'org_id' },
      network: { allow: ['127.0.0.1'] },
      apiKeys: {
        keys: [
          { id: 'acme', hash: acme.hash, subject: 'alice', tenant: 'acme' },
          { id: 'globex', hash: globex.hash, subject: 'mallory', tenant: 'globex' },
          { id: 'rogue', hash: rogue.hash, subject: 'eve', tenant: 'initech' },
          {
            id: 'acme-admin',
            hash: acmeAdmin.hash,
            subject: 'ops-a',
            tenant: 'acme',
            scopes: ['barbican:admin'],
          },
          {
            id: 'globex-admin',
            hash: globexAdmin.hash,
            subject: 'ops-g',
            tenant: 'globex',
            scopes: ['barbican:admin'],
          },
          { id: 'root', hash: rootAdmin.hash, subject: 'root', scopes: ['barbican:admin'] },
        ],
      },
    },
  })
  server = await startServer(
    parseConfigText(text, { cwd: root }).config,
    silentLogger,
    { store },
    await openAudit(join(state, 'audit.db')),
  )
  await server.started
})

after(async () => {
  await server?.stop()
  await audit?.close()
  await issuer?.close()
})

let audit: AuditLog | undefined
async function openAudit(path: string): Promise<AuditLog | undefined> {
  const config = normalizeConfig({
    upstreams: { x: { url: 'http://127.0.0.1:1/mcp' } },
    audit: { enabled: true, path },
  })
  audit = await openAuditLog(config, undefined, {
    log: silentLogger,
    running: false,
    stdoutFree: true,
  })
  return audit
}

/** A message with the names an attacker tried replaced, to compare two refusals. */
const neutral = (value: unknown, ...names: string[]) =>
  names.reduce((text, name) => text.split(name).join('NAME'), JSON.stringify(value))

describe("a caller's tenant", () => {
  const token = (claims: Json) => {
    const now = Math.floor(Date.now() / 1000)
    return issuer.sign({
      iss: issuer.issuer,
      aud: `${server.url}/mcp`,
      sub: 'someone',
      iat: now,
      exp: now + 300,
      ...claims,
    })
  }
  const postList = async (bearer: string) => {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${bearer}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': 'tools/list',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/list',
        params: {
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
          },
        },
      }),
    })
    return { status: res.status, ...(await finalReply(res)) }
  }
  const names = (final: Json | undefined) => {
    const result = final?.result as { tools: { name: string }[] } | undefined
    assert.ok(result, JSON.stringify(final))
    return result.tools.map((t) => t.name)
  }

  test('comes from the configured token claim', async () => {
    const reply = await postList(await token({ org_id: 'globex' }))
    assert.deepEqual(names(reply.final).sort(), ['get-sum', 'trigger-long-running-operation'])
  })

  test('is the default tenant when the token names none', async () => {
    const reply = await postList(await token({}))
    // The top-level upstream `main` is server-memory.
    assert.ok(names(reply.final).includes('create_entities'), JSON.stringify(reply.final))
  })

  test('is refused when the token names a tenant that is not configured', async () => {
    const reply = await postList(await token({ org_id: 'initech' }))
    assert.equal(reply.status, 403)
    assert.equal((reply.final!.error as Json).code, -32023)
  })
})

describe('a credential naming no configured tenant', () => {
  test('is refused with 403 and a precise reason, before any session', async () => {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${rogue.key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    })
    assert.equal(res.status, 403)
    const body = (await res.json()) as { error: { code: number; message: string } }
    assert.equal(body.error.code, -32023)
    assert.match(body.error.message, /tenant "initech", which this gateway does not serve/)
  })
})

describe('legacy sessions (SDK client)', () => {
  async function connect(
    key: string,
  ): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const client = new Client({ name: 'tenants', version: '1.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    })
    await client.connect(transport)
    return { client, transport }
  }

  test('each tenant lists only its own tools under the same server and upstream names', async () => {
    const a = await connect(acme.key)
    const g = await connect(globex.key)
    try {
      const all = async (client: Client) => {
        const names: string[] = []
        let cursor: string | undefined
        do {
          const page = await client.listTools(cursor ? { cursor } : {})
          names.push(...page.tools.map((t) => t.name))
          cursor = page.nextCursor
        } while (cursor)
        return names
      }
      const acmeTools = await all(a.client)
      const globexTools = await all(g.client)
      assert.ok(acmeTools.includes('echo'))
      assert.deepEqual(globexTools.sort(), ['get-sum', 'trigger-long-running-operation'])
    } finally {
      await a.client.close()
      await g.client.close()
    }
  })

  test("calling another tenant's tool reads like calling a tool that does not exist", async () => {
    const g = await connect(globex.key)
    try {
      const refusal = async (name: string) => {
        try {
          const result = await g.client.callTool({ name, arguments: { message: 'x' } })
          return result
        } catch (err) {
          return { code: (err as { code?: number }).code, message: (err as Error).message }
        }
      }
      const stolen = await refusal('echo')
      const missing = await refusal('no-such-tool')
      assert.equal(neutral(stolen, 'echo'), neutral(missing, 'no-such-tool'))
      assert.notEqual((stolen as { code?: number }).code, undefined, 'the call was refused')
    } finally {
      await g.client.close()
    }
  })

  test("reading another tenant's resource by its URI reads like a URI that does not exist", async () => {
    const a = await connect(acme.key)
    const g = await connect(globex.key)
    try {
      const { resources } = await a.client.listResources()
      const uri = resources[0]?.uri
      assert.ok(uri, 'acme has a resource')
      await a.client.readResource({ uri })
      const read = async (u: string) =>
        g.client.readResource({ uri: u }).then(
          (r) => r,
          (err: unknown) => ({
            code: (err as { code?: number }).code,
            message: (err as Error).message,
          }),
        )
      const missingUri = 'test://static/resource/no-such-resource'
      const stolen = await read(uri)
      assert.ok('code' in stolen, 'the read was refused')
      assert.equal(neutral(stolen, uri), neutral(await read(missingUri), missingUri))
    } finally {
      await a.client.close()
      await g.client.close()
    }
  })

  test('a cursor minted for another tenant reads like a made-up cursor', async () => {
    const a = await connect(acme.key)
    const g = await connect(globex.key)
    try {
      const page = await a.client.listTools()
      assert.ok(page.nextCursor, 'acme has a second page')
      const list = (cursor: string) =>
        g.client.listTools({ cursor }).then(
          () => 'accepted',
          (err: unknown) => ({
            code: (err as { code?: number }).code,
            message: (err as Error).message,
          }),
        )
      const made = Buffer.from(JSON.stringify({ l: 'tools/list', o: 2, v: 'x' })).toString(
        'base64url',
      )
      const stolen = await list(page.nextCursor)
      assert.notEqual(stolen, 'accepted')
      assert.deepEqual(stolen, await list(made))
    } finally {
      await a.client.close()
      await g.client.close()
    }
  })

  test('the same progress token in two tenants reaches only its own caller', async () => {
    const a = await connect(acme.key)
    const g = await connect(globex.key)
    try {
      const seen = { acme: [] as number[], globex: [] as number[] }
      const run = (client: Client, steps: number, into: number[]) =>
        client.callTool(
          { name: 'trigger-long-running-operation', arguments: { duration: 1, steps } },
          undefined,
          { onprogress: (p) => into.push(p.total ?? -1) },
        )
      await Promise.all([run(a.client, 2, seen.acme), run(g.client, 4, seen.globex)])
      assert.ok(seen.acme.length >= 1 && seen.globex.length >= 1)
      assert.deepEqual([...new Set(seen.acme)], [2], 'acme got only its own progress')
      assert.deepEqual([...new Set(seen.globex)], [4], 'globex got only its own progress')
    } finally {
      await a.client.close()
      await g.client.close()
    }
  })

  test("another tenant's session id reads like a session id that does not exist", async () => {
    const a = await connect(acme.key)
    try {
      const sessionId = a.transport.sessionId
      assert.ok(sessionId)
      const post = async (id: string) => {
        const res = await fetch(`${server.url}/mcp`, {
          method: 'POST',
          headers: {
            authorization: `Bearer ${globex.key}`,
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-session-id': id,
            'mcp-protocol-version': '2025-06-18',
          },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
        })
        return { status: res.status, body: await res.text() }
      }
      const stolen = await post(sessionId)
      assert.equal(stolen.status, 404)
      assert.deepEqual(stolen, await post('0123456789abcdef0123456789abcdef'))
    } finally {
      await a.client.close()
    }
  })
})

describe('stateless 2026-07-28 requests', () => {
  async function request(
    key: string,
    method: string,
    params: Json,
    name?: string,
  ): Promise<{ status: number; final?: Json }> {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': method,
        ...(name === undefined ? {} : { 'mcp-name': name }),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': { elicitation: {} },
          },
        },
      }),
    })
    const { final } = await finalReply(res)
    return final === undefined ? { status: res.status } : { status: res.status, final }
  }

  test('listing shows each tenant its own tools', async () => {
    const tools = async (key: string) => {
      const names: string[] = []
      let cursor: string | undefined
      do {
        const { final } = await request(key, 'tools/list', cursor ? { cursor } : {})
        const result = final?.result as { tools: { name: string }[]; nextCursor?: string }
        names.push(...result.tools.map((t) => t.name))
        cursor = result.nextCursor
      } while (cursor)
      return names
    }
    assert.ok((await tools(acme.key)).includes('echo'))
    assert.deepEqual((await tools(globex.key)).sort(), [
      'get-sum',
      'trigger-long-running-operation',
    ])
  })

  test("a tenant's own guards govern its calls only", async () => {
    const badSum = async (key: string) =>
      (
        await request(
          key,
          'tools/call',
          { name: 'get-sum', arguments: { a: 'x', b: 1 } },
          'get-sum',
        )
      ).final
    const refused = (await badSum(acme.key))?.error as { code: number; data?: Json } | undefined
    assert.equal(refused?.code, -32602)
    assert.equal((refused?.data?.details as Json | undefined)?.guard, 'arguments')
    const passed = await badSum(globex.key)
    assert.ok(passed !== undefined, 'globex got an answer')
    const details = ((passed?.error as { data?: Json } | undefined)?.data?.details ?? {}) as Json
    assert.notEqual(details.guard, 'arguments', "globex's call reached its upstream unguarded")
  })

  test("calling another tenant's tool reads like calling a tool that does not exist", async () => {
    const call = (name: string) =>
      postStatelessToolCall(`${server.url}/mcp`, {
        name,
        arguments: { message: 'x' },
        headers: { authorization: `Bearer ${globex.key}` },
      })
    const stolen = await call('echo')
    const missing = await call('no-such-tool')
    assert.ok(stolen.final?.error, 'refused')
    assert.equal(stolen.status, missing.status)
    assert.equal(neutral(stolen.final, 'echo'), neutral(missing.final, 'no-such-tool'))
  })

  test("reading another tenant's resource by its URI reads like a URI that does not exist", async () => {
    const listed = await request(acme.key, 'resources/list', {})
    const uri = (listed.final!.result as { resources: { uri: string }[] }).resources[0]!.uri
    const read = (u: string) => request(globex.key, 'resources/read', { uri: u }, u)
    const missingUri = 'test://static/resource/no-such-resource'
    const stolen = await read(uri)
    const missing = await read(missingUri)
    assert.ok(stolen.final?.error, 'refused')
    assert.equal(stolen.status, missing.status)
    assert.equal(neutral(stolen.final, uri), neutral(missing.final, missingUri))
  })

  test('a cursor minted for another tenant reads like a made-up cursor', async () => {
    const page = await request(acme.key, 'tools/list', {})
    const cursor = (page.final!.result as { nextCursor?: string }).nextCursor
    assert.ok(cursor)
    const made = Buffer.from(JSON.stringify({ l: 'tools/list', o: 2, v: 'x' })).toString(
      'base64url',
    )
    const stolen = await request(globex.key, 'tools/list', { cursor })
    assert.ok(stolen.final?.error, 'refused')
    assert.deepEqual(stolen, await request(globex.key, 'tools/list', { cursor: made }))
  })

  test('a requestState minted for another tenant reads like a forged one', async () => {
    const name = 'trigger-elicitation-request'
    const first = await postStatelessToolCall(`${server.url}/mcp`, {
      name,
      capabilities: { elicitation: {} },
      headers: { authorization: `Bearer ${acme.key}` },
    })
    const result = first.final?.result as Json
    assert.equal(result?.resultType, 'input_required', JSON.stringify(first.final))
    const state = String(result.requestState)
    const input = Object.keys(result.inputRequests as Json)[0]!
    const resume = (requestState: string, tool: string) =>
      postStatelessToolCall(`${server.url}/mcp`, {
        name: tool,
        capabilities: { elicitation: {} },
        params: { requestState, inputResponses: { [input]: { action: 'decline' } } },
        headers: { authorization: `Bearer ${globex.key}` },
      })
    const forged = `${state.slice(0, 3)}AAAA${state.slice(7)}`
    for (const tool of [name, 'get-sum']) {
      const stolen = await resume(state, tool)
      assert.ok(stolen.final?.error, `refused on ${tool}`)
      const made = await resume(forged, tool)
      assert.equal(stolen.status, made.status)
      assert.deepEqual(stolen.final, made.final)
    }
  })

  test('the same progress token in two tenants reaches only its own caller', async () => {
    const run = async (key: string, steps: number) => {
      const res = await fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/call',
          'mcp-name': 'trigger-long-running-operation',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: {
            name: 'trigger-long-running-operation',
            arguments: { duration: 1, steps },
            _meta: {
              progressToken: 'shared',
              'io.modelcontextprotocol/protocolVersion': '2026-07-28',
              'io.modelcontextprotocol/clientCapabilities': {},
            },
          },
        }),
      })
      const text = await res.text()
      return text
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => JSON.parse(l.slice(5)) as Json)
        .filter((f) => f.method === 'notifications/progress')
        .map((f) => f.params as { total?: number; progressToken: unknown })
    }
    const [a, g] = await Promise.all([run(acme.key, 2), run(globex.key, 4)])
    assert.ok(a.length >= 1 && g.length >= 1)
    assert.deepEqual([...new Set(a.map((p) => p.total))], [2])
    assert.deepEqual([...new Set(g.map((p) => p.total))], [4])
    assert.ok([...a, ...g].every((p) => p.progressToken === 'shared'))
  })
})

describe('the admin API', () => {
  const get = async (key: string, path: string) => {
    const res = await fetch(`${server.url}${path}`, {
      headers: { authorization: `Bearer ${key}` },
    })
    return { status: res.status, body: (await res.json()) as Json }
  }

  test("a tenant admin reads its tenant's audit only, and another tenant's reads as none", async () => {
    // Calls of both tenants are on record by now (the tests above).
    const own = await get(acmeAdmin.key, '/admin/api/audit?limit=500')
    const records = own.body.records as { tenant?: string; type: string }[]
    assert.ok(records.length > 0)
    assert.ok(records.every((r) => r.tenant === 'acme'))
    const other = await get(acmeAdmin.key, '/admin/api/audit?tenant=globex')
    assert.deepEqual(other, await get(acmeAdmin.key, '/admin/api/audit?tenant=nobody'))
    assert.deepEqual(other.body, { records: [] })
    const everyone = await get(rootAdmin.key, '/admin/api/audit?limit=500')
    const tenants = new Set((everyone.body.records as { tenant?: string }[]).map((r) => r.tenant))
    assert.ok(tenants.has('acme') && tenants.has('globex'))
  })

  test("a tenant admin reads its tenant's pins only, under its own names", async () => {
    const own = await get(globexAdmin.key, '/admin/api/pins')
    const pinned = own.body.pinned as { upstream: string; key: string }[]
    assert.ok(pinned.length > 0)
    assert.ok(pinned.every((p) => p.upstream === 'main'))
    const all = (await get(rootAdmin.key, '/admin/api/pins')).body.pinned as {
      upstream: string
      key: string
    }[]
    const upstreams = new Set(all.map((p) => p.upstream))
    assert.ok(upstreams.has('acme.main') && upstreams.has('globex.main'))
    assert.deepEqual(
      pinned.map((p) => p.key),
      all.filter((p) => p.upstream === 'globex.main').map((p) => p.key),
      "globex's own pins, and none of acme's or the default tenant's",
    )
    // Naming acme's upstream by its qualified name reads like naming one that does not exist.
    const stolen = await get(globexAdmin.key, '/admin/api/pins?upstream=acme.main')
    assert.deepEqual(stolen, await get(globexAdmin.key, '/admin/api/pins?upstream=nothing'))
    assert.deepEqual(stolen.body, { pinned: [], pending: [] })
  })

  test('a tenant admin sees only its tenant in the status and may not reload', async () => {
    const status = await get(acmeAdmin.key, '/admin/api/status')
    assert.equal(status.status, 200)
    const text = JSON.stringify(status.body)
    assert.ok(!text.includes('globex'))
    const reload = await fetch(`${server.url}/admin/api/reload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${acmeAdmin.key}`, 'content-type': 'application/json' },
    })
    assert.equal(reload.status, 403)
  })

  test("a tenant admin is refused the console, which shows every tenant's data", async () => {
    for (const path of ['/admin', '/admin/quarantine', '/admin/audit']) {
      const page = await fetch(`${server.url}${path}`, {
        headers: { authorization: `Bearer ${acmeAdmin.key}` },
      })
      assert.equal(page.status, 403, path)
      const text = await page.text()
      assert.ok(text.includes('tenant'), text)
      assert.ok(!text.includes('globex'), path)
    }
    const root = await fetch(`${server.url}/admin`, {
      headers: { authorization: `Bearer ${rootAdmin.key}` },
    })
    assert.equal(root.status, 200)
  })

  test("a tenant admin decides its own tenant's pending pins, and another's reads as unknown", async () => {
    const propose = (upstream: string, key: string) =>
      store.pins.propose({
        upstream,
        key,
        kind: 'tool',
        name: key.slice('tool:'.length),
        hash: `hash-${upstream}-${key}`,
        definition: { name: key.slice('tool:'.length), inputSchema: { type: 'object' } },
        previousHash: null,
        reason: 'new',
        findings: [],
        status: 'pending',
        seenAt: new Date().toISOString(),
      })
    await propose('acme.main', 'tool:acme-new')
    await propose('acme.main', 'tool:acme-bad')
    await propose('globex.main', 'tool:globex-new')
    const post = async (key: string, decision: string, body: Json) => {
      const res = await fetch(`${server.url}/admin/api/pins/${decision}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      return { status: res.status, body: (await res.json()) as Json }
    }
    const approved = await post(acmeAdmin.key, 'approve', {
      upstream: 'main',
      key: 'tool:acme-new',
    })
    assert.equal(approved.status, 200)
    const rejected = await post(acmeAdmin.key, 'reject', { upstream: 'main', key: 'tool:acme-bad' })
    assert.equal(rejected.status, 200)
    const pinned = await store.pins.pinned('acme.main')
    assert.ok(pinned.some((p) => p.key === 'tool:acme-new' && p.approvedBy === 'admin (ops-a)'))
    const pending = await store.pins.pending('acme.main')
    assert.equal(pending.find((p) => p.key === 'tool:acme-bad')?.status, 'rejected')
    assert.ok(!pending.some((p) => p.key === 'tool:acme-new'))

    // globex's change, named the way acme's admin would name it or by its qualified name.
    const stolen = await post(acmeAdmin.key, 'approve', {
      upstream: 'main',
      key: 'tool:globex-new',
    })
    const missing = await post(acmeAdmin.key, 'approve', { upstream: 'main', key: 'tool:nothing' })
    assert.equal(stolen.status, 404)
    assert.equal(
      JSON.stringify(stolen.body).replace('globex-new', 'X'),
      JSON.stringify(missing.body).replace('nothing', 'X'),
    )
    const qualified = await post(acmeAdmin.key, 'approve', {
      upstream: 'globex.main',
      key: 'tool:globex-new',
    })
    assert.equal(qualified.status, 404)
    assert.equal((await store.pins.pending('globex.main'))[0]?.status, 'pending', 'untouched')
    assert.equal((await post(acmeAdmin.key, 'approve', { upstream: 'main' })).status, 400)

    const records = (await get(acmeAdmin.key, '/admin/api/audit?limit=500')).body.records as Json[]
    const acts = records
      .filter((r) => r.type === 'admin')
      .map((r) => [r.action, r.target, r.tenant])
    assert.deepEqual(acts, [
      ['pin.reject', 'tool:acme-bad', 'acme'],
      ['pin.approve', 'tool:acme-new', 'acme'],
    ])
  })
})
