/**
 * `tools.mode: search` through a real gateway, with the official SDK clients (v1 in a legacy
 * session, v2) and 2026-07-28 stateless POSTs, in front of the official everything and memory
 * servers (and a fixture whose poisoned tool trust quarantines): the listing (meta-tools and
 * pins), searches that see only what the caller may call,
 * `call_tool` answering exactly as the direct call does, its refusals and its audit records.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError, ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import type { AuditLog } from '../../src/audit/audit-log.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { loadConfig } from '../../src/config/load.ts'
import { openAuditLog } from '../../src/gateway/audit-setup.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { EVERYTHING } from '../fixtures/upstream-helpers.ts'
import { finalReply, postStatelessToolCall } from '../support/stateless.ts'

/** Its `add` hides an instruction in its description: the trust scan quarantines it. */
const POISONED = fileURLToPath(new URL('../fixtures/trust-poisoned-server.ts', import.meta.url))
const MEMORY = fileURLToPath(
  new URL('../../node_modules/@modelcontextprotocol/server-memory/dist/index.js', import.meta.url),
)

type Json = Record<string, unknown>
type ToolResult = { content: Json[]; structuredContent?: Json; isError?: boolean }

const alice = generateApiKey()
const bob = generateApiKey()

/** Tool names of a search_tools result, best first. */
function found(result: ToolResult): string[] {
  const tools = (result.structuredContent?.tools ?? []) as Json[]
  return tools.map((t) => String(t.name))
}

async function legacyClient(url: string, key: string): Promise<Client> {
  const client = new Client({ name: 'tool-search-e2e', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  return client
}

/** What the names-in-view tests need of a client, whatever its era. */
interface EraClient {
  listTools(): Promise<{ tools: Json[] }>
  callTool(name: string, args: Json): Promise<ToolResult>
  close(): Promise<void>
}

function sdkClient(client: {
  listTools(): Promise<unknown>
  callTool(params: { name: string; arguments?: Json }): Promise<unknown>
  close(): Promise<void>
}): EraClient {
  return {
    listTools: async () => (await client.listTools()) as { tools: Json[] },
    callTool: async (name, args) =>
      (await client.callTool({ name, arguments: args })) as ToolResult,
    close: () => client.close(),
  }
}

/** An SDK v2 client: pinned to `pin` (a 2026 revision), else in a 2025-era session. */
async function v2Client(url: string, key: string, pin?: string): Promise<ClientV2> {
  const client = new ClientV2(
    { name: 'tool-search-e2e-v2', version: '1.0.0' },
    pin === undefined ? {} : { versionNegotiation: { mode: { pin } } },
  )
  await client.connect(
    new StreamableHTTPClientTransportV2(new URL(`${url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  assert.equal(client.getNegotiatedProtocolVersion(), pin ?? '2025-11-25')
  return client
}

/** A 2026-07-28 client without a session: one POST per request. */
function statelessClient(endpoint: string, key: string): EraClient {
  const headers = { authorization: `Bearer ${key}` }
  return {
    async listTools() {
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': '2026-07-28',
          'mcp-method': 'tools/list',
          ...headers,
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
      const { final, text } = await finalReply(res)
      assert.ok(final?.result, text)
      return final.result as { tools: Json[] }
    },
    async callTool(name, args) {
      const reply = await postStatelessToolCall(endpoint, { name, arguments: args, headers })
      assert.ok(reply.final?.result, reply.text)
      return reply.final.result as ToolResult
    },
    close: async () => {},
  }
}

/**
 * search_tools' description once `ready` matches it: on a loaded machine an upstream may miss
 * the first listing's deadline and join a later one (docs/configuration.md, listing deadline).
 */
async function namesOnceListed(client: EraClient, ready: RegExp): Promise<string> {
  const end = Date.now() + 15_000
  for (;;) {
    const { tools } = await client.listTools()
    const description = String(tools[0]?.description)
    if (ready.test(description) || Date.now() > end) return description
    await sleep(200)
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function until(done: () => boolean, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!done()) {
    if (Date.now() > end) assert.fail('timed out waiting')
    await sleep(20)
  }
}

async function refusal(call: Promise<unknown>): Promise<McpError> {
  try {
    await call
  } catch (err) {
    if (err instanceof McpError) return err
    throw err
  }
  assert.fail('the call was not refused')
}

describe('tools.mode: search', () => {
  let server: RunningServer
  let url: string
  let auditFile: string
  let audit: AuditLog | undefined
  let configFile: string

  before(async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-tool-search-')))
    auditFile = join(dir, 'audit.jsonl')
    const file = join(dir, 'barbican.json')
    configFile = file
    writeFileSync(
      file,
      JSON.stringify({
        listen: '127.0.0.1:0',
        store: { memory: {} },
        audit: { export: { file: 'audit.jsonl' } },
        upstreams: {
          everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] },
          memory: {
            command: process.execPath,
            args: [MEMORY],
            env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
          },
          poisoned: { command: process.execPath, args: [POISONED], trust: { scan: 'quarantine' } },
        },
        servers: { default: { tools: { mode: 'search', pinned: ['memory__read_graph'] } } },
        // The ranking's time budget is amplifiers.test.ts's subject; here a first search on a
        // loaded machine (cold code, other processes) must not be cut short after 25 ms.
        limits: { searchBudgetMs: 2000 },
        auth: {
          apiKeys: {
            keys: [
              { id: 'a', hash: alice.hash, subject: 'alice' },
              { id: 'b', hash: bob.hash, subject: 'bob' },
            ],
          },
          permissions: [
            { subjects: ['alice'], servers: ['*'] },
            { subjects: ['bob'], servers: ['*'], tools: ['everything__*'] },
          ],
        },
      }),
    )
    const { config } = (await loadConfig({ path: file }))!
    audit = await openAuditLog(config, file, { log: silentLogger, running: true, stdoutFree: true })
    server = await startServer(config, silentLogger, undefined, audit)
    url = server.url
  })
  after(async () => {
    await server?.stop()
    await audit?.close()
  })

  test('tools/list shows the meta-tools and the pinned tool, not the catalogue', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const { tools } = await client.listTools()
      assert.deepEqual(
        tools.map((t) => t.name),
        ['search_tools', 'call_tool', 'memory__read_graph'],
      )
      const search = tools[0]!
      // A query, several queries, or exact names: none is required alone.
      assert.deepEqual(Object.keys(search.inputSchema.properties ?? {}), [
        'query',
        'queries',
        'select',
        'server',
        'limit',
      ])
    } finally {
      await client.close()
    }
  })

  test('search_tools finds tools by paraphrase and returns full definitions (SDK v1)', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const result = (await client.callTool({
        name: 'search_tools',
        arguments: { query: 'add up two numbers', limit: 5 },
      })) as ToolResult
      const names = found(result)
      assert.ok(names.includes('everything__get-sum'), names.join(', '))
      assert.ok(names.length <= 5)
      const sum = ((result.structuredContent?.tools ?? []) as Json[]).find(
        (t) => t.name === 'everything__get-sum',
      )
      assert.equal((sum?.inputSchema as Json | undefined)?.type, 'object')
      assert.match(String((result.content[0] as Json).text), /everything__get-sum/)

      const memory = found(
        (await client.callTool({
          name: 'search_tools',
          arguments: { query: 'remember facts about people in the knowledge graph' },
        })) as ToolResult,
      )
      assert.ok(
        memory.some((n) => n.startsWith('memory__')),
        memory.join(', '),
      )
    } finally {
      await client.close()
    }
  })

  test('call_tool answers exactly as the direct tools/call does', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const viaMeta = await client.callTool({
        name: 'call_tool',
        arguments: { name: 'everything__get-sum', arguments: { a: 2, b: 40 } },
      })
      const direct = await client.callTool({
        name: 'everything__get-sum',
        arguments: { a: 2, b: 40 },
      })
      assert.deepEqual(viaMeta, direct)
      assert.match(JSON.stringify(viaMeta), /42/)
    } finally {
      await client.close()
    }
  })

  test('a caller searches and calls only what policy lets it call', async () => {
    const client = await legacyClient(url, bob.key)
    try {
      const { tools } = await client.listTools()
      // The pinned memory tool is not bob's to call, so it is not listed either.
      assert.deepEqual(
        tools.map((t) => t.name),
        ['search_tools', 'call_tool'],
      )
      const names = found(
        (await client.callTool({
          name: 'search_tools',
          arguments: { query: 'read the whole knowledge graph of entities', limit: 50 },
        })) as ToolResult,
      )
      assert.ok(names.length > 0)
      assert.ok(
        names.every((n) => n.startsWith('everything__')),
        `bob saw ${names.join(', ')}`,
      )
      const viaMeta = await refusal(
        client.callTool({ name: 'call_tool', arguments: { name: 'memory__read_graph' } }),
      )
      const direct = await refusal(client.callTool({ name: 'memory__read_graph', arguments: {} }))
      assert.equal(viaMeta.code, -32001)
      assert.equal(viaMeta.code, direct.code)
      assert.equal(viaMeta.message, direct.message)
    } finally {
      await client.close()
    }
  })

  test('a quarantined tool is never found, and call_tool refuses it as a direct call does', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const names = found(
        (await client.callTool({
          name: 'search_tools',
          arguments: { query: 'add two numbers', limit: 50 },
        })) as ToolResult,
      )
      assert.ok(names.includes('everything__get-sum'), names.join(', '))
      assert.ok(!names.includes('poisoned__add'), names.join(', '))
      const viaMeta = await refusal(
        client.callTool({ name: 'call_tool', arguments: { name: 'poisoned__add' } }),
      )
      const direct = await refusal(client.callTool({ name: 'poisoned__add', arguments: {} }))
      assert.equal(viaMeta.code, -32004)
      assert.equal(viaMeta.message, direct.message)
    } finally {
      await client.close()
    }
  })

  test('bad meta-tool arguments are refused with their own codes', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const noQuery = await refusal(client.callTool({ name: 'search_tools', arguments: {} }))
      assert.equal(noQuery.code, -32027)
      assert.match(noQuery.message, /query/)
      const tooMany = await refusal(
        client.callTool({ name: 'search_tools', arguments: { query: 'x', limit: 500 } }),
      )
      assert.equal(tooMany.code, -32027)
      const nested = await refusal(
        client.callTool({ name: 'call_tool', arguments: { name: 'call_tool' } }),
      )
      assert.equal(nested.code, -32028)
      const unknown = await refusal(
        client.callTool({ name: 'call_tool', arguments: { name: 'everything__nope' } }),
      )
      assert.match(unknown.message, /Unknown tool: everything__nope/)
    } finally {
      await client.close()
    }
  })

  test('SDK v2 client: list, search and call', async () => {
    const client = new ClientV2({ name: 'tool-search-e2e-v2', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransportV2(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${alice.key}` } },
      }),
    )
    try {
      const { tools } = await client.listTools()
      assert.deepEqual(
        tools.map((t) => t.name),
        ['search_tools', 'call_tool', 'memory__read_graph'],
      )
      const search = (await client.callTool({
        name: 'search_tools',
        arguments: { query: 'echo my message back' },
      })) as unknown as ToolResult
      assert.equal(found(search)[0], 'everything__echo')
      const echoed = (await client.callTool({
        name: 'call_tool',
        arguments: { name: 'everything__echo', arguments: { message: 'through search' } },
      })) as unknown as ToolResult
      assert.match(JSON.stringify(echoed.content), /through search/)
    } finally {
      await client.close()
    }
  })

  test('2026-07-28 stateless requests: search and call in one POST each', async () => {
    const headers = { authorization: `Bearer ${alice.key}` }
    const search = await postStatelessToolCall(`${url}/mcp`, {
      name: 'search_tools',
      arguments: { query: 'add up two numbers' },
      headers,
    })
    assert.equal(search.status, 200, search.text)
    const result = search.final?.result as ToolResult
    assert.ok(found(result).includes('everything__get-sum'), search.text)
    const call = await postStatelessToolCall(`${url}/mcp`, {
      name: 'call_tool',
      arguments: { name: 'everything__get-sum', arguments: { a: 1, b: 2 } },
      headers,
    })
    assert.equal(call.status, 200, call.text)
    assert.match(JSON.stringify(call.final?.result), /3/)
    const refused = await postStatelessToolCall(`${url}/mcp`, {
      name: 'call_tool',
      arguments: { name: 'memory__read_graph' },
      headers: { authorization: `Bearer ${bob.key}` },
    })
    assert.equal((refused.final?.error as Json | undefined)?.code, -32001, refused.text)
  })

  /** Each era's client, as the names-in-view tests drive it. */
  const ERAS: Record<string, (key: string) => Promise<EraClient>> = {
    'SDK v1, 2025-11-25': async (key) => sdkClient(await legacyClient(url, key)),
    'SDK v2, 2025-11-25': async (key) => sdkClient(await v2Client(url, key)),
    'SDK v2, 2026-07-28': async (key) => sdkClient(await v2Client(url, key, '2026-07-28')),
    'stateless 2026-07-28 POSTs': async (key) => statelessClient(`${url}/mcp`, key),
  }

  for (const [era, connect] of Object.entries(ERAS)) {
    test(`names in view, select, server filter and several queries (${era})`, async () => {
      const client = await connect(alice.key)
      try {
        const description = await namesOnceListed(client, /memory \(/)
        assert.match(description, /verb object/)
        // Every tool alice may call is named, under its server's prefix.
        assert.match(description, /everything \(everything__…\): .*\bget-sum\b/)
        assert.match(description, /memory \(memory__…\): .*\bread_graph\b/)
        // The quarantined tool is no tool of hers: never named.
        assert.doesNotMatch(description, /poisoned/)

        const selected = await client.callTool('search_tools', {
          select: ['everything__get-sum', 'poisoned__add', 'nope__nothing'],
        })
        assert.deepEqual(found(selected), ['everything__get-sum'])
        const sum = ((selected.structuredContent?.tools ?? []) as Json[])[0]!
        assert.equal((sum.inputSchema as Json).type, 'object')
        // A quarantined name is answered exactly as a name that does not exist.
        const note = String(selected.structuredContent?.note)
        assert.match(note, /No tool of yours is named "poisoned__add", "nope__nothing"/)

        const several = await client.callTool('search_tools', {
          queries: ['echo message', 'read graph'],
          limit: 4,
        })
        const names = found(several)
        assert.ok(names.length <= 4)
        assert.ok(names.includes('everything__echo'), names.join(', '))
        assert.ok(names.includes('memory__read_graph'), names.join(', '))
        const answered = several.structuredContent?.answered as string[]
        assert.equal(answered[names.indexOf('everything__echo')], 'echo message')
        assert.equal(answered[names.indexOf('memory__read_graph')], 'read graph')

        const filtered = found(
          await client.callTool('search_tools', { query: 'read graph', server: 'everything' }),
        )
        assert.ok(filtered.length > 0)
        assert.ok(
          filtered.every((n) => n.startsWith('everything__')),
          filtered.join(', '),
        )

        // An exact name is called without any search first.
        const called = await client.callTool('call_tool', {
          name: 'everything__get-sum',
          arguments: { a: 20, b: 22 },
        })
        assert.match(JSON.stringify(called.content), /42/)
      } finally {
        await client.close()
      }
    })

    test(`a tool hidden by policy never appears among the names (${era})`, async () => {
      const client = await connect(bob.key)
      try {
        const description = await namesOnceListed(client, /everything \(/)
        assert.match(description, /everything \(everything__…\): /)
        assert.doesNotMatch(description, /memory|poisoned/)
        const selected = await client.callTool('search_tools', {
          select: ['memory__read_graph', 'memory__nothing'],
        })
        assert.deepEqual(found(selected), [])
        const note = String(selected.structuredContent?.note)
        assert.match(note, /named "memory__read_graph", "memory__nothing"\./)
        const byServer = await client.callTool('search_tools', {
          query: 'read graph',
          server: 'memory',
        })
        assert.deepEqual(found(byServer), [])
        assert.match(String(byServer.structuredContent?.note), /servers: everything\./)
      } finally {
        await client.close()
      }
    })
  }

  test('past namesBudget only servers and counts are shown; a policy reload sends list_changed', async () => {
    const client = new Client({ name: 'tool-search-e2e-listener', version: '1.0.0' })
    let heard = 0
    client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
      heard++
    })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${bob.key}` } },
      }),
    )
    const original = readFileSync(configFile, 'utf8')
    try {
      const before = await namesOnceListed(sdkClient(client), /everything \(/)
      assert.doesNotMatch(before, /memory/)
      await sleep(300) // the SDK opens its GET stream after initialize
      // Bob may now call memory's tools too, and the names get a budget they do not fit.
      const changed = JSON.parse(original)
      changed.auth.permissions[1].tools.push('memory__*')
      changed.servers.default.tools.search = { namesBudget: 10 }
      writeFileSync(configFile, JSON.stringify(changed))
      await server.apply((await loadConfig({ path: configFile }))!.config)
      await until(() => heard > 0)
      const after = String((await client.listTools()).tools[0]?.description)
      assert.match(after, /too many to name here: everything \(\d+\), memory \(9\)/)
      assert.doesNotMatch(after, /get-sum|read_graph|poisoned/)
      // The budget back to its default: bob's wider view is named.
      heard = 0
      const widened = JSON.parse(original)
      widened.auth.permissions[1].tools.push('memory__*')
      writeFileSync(configFile, JSON.stringify(widened))
      await server.apply((await loadConfig({ path: configFile }))!.config)
      await until(() => heard > 0)
      assert.match(
        String((await client.listTools()).tools[0]?.description),
        /memory \(memory__…\): .*\bread_graph\b/,
      )
      // Only the permissions change (a policy swap, no catalogue change): still list_changed,
      // and the names follow bob's view back.
      heard = 0
      writeFileSync(configFile, original)
      await server.apply((await loadConfig({ path: configFile }))!.config)
      await until(() => heard > 0)
      const back = String((await client.listTools()).tools[0]?.description)
      assert.match(back, /everything \(everything__…\): /)
      assert.doesNotMatch(back, /memory/)
    } finally {
      writeFileSync(configFile, original)
      await client.close()
    }
  })

  test('the index follows the catalogue: a reload that hides a tool hides it from search', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      const search = async () =>
        found(
          (await client.callTool({
            name: 'search_tools',
            arguments: { query: 'add up two numbers', limit: 50 },
          })) as ToolResult,
        )
      assert.ok((await search()).includes('everything__get-sum'))
      const text = readFileSync(configFile, 'utf8')
      const hidden = JSON.parse(text)
      hidden.servers.default.tools.exclude = ['everything__get-sum']
      writeFileSync(configFile, JSON.stringify(hidden))
      await server.apply((await loadConfig({ path: configFile }))!.config)
      assert.ok(!(await search()).includes('everything__get-sum'))
      const refused = await refusal(
        client.callTool({
          name: 'call_tool',
          arguments: { name: 'everything__get-sum', arguments: { a: 1, b: 1 } },
        }),
      )
      assert.match(refused.message, /Unknown tool/)
    } finally {
      await client.close()
    }
  })

  test('audit records a call_tool as the direct call it made, a search as a listing', async () => {
    const client = await legacyClient(url, alice.key)
    try {
      await client.callTool({
        name: 'call_tool',
        arguments: { name: 'everything__echo', arguments: { message: 'audited' } },
      })
      await client.callTool({ name: 'search_tools', arguments: { query: 'audit me' } })
    } finally {
      await client.close()
    }
    await server.stop()
    await audit?.close()
    const records = readFileSync(auditFile, 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Json)
    const calls = records.filter((r) => r.method === 'tools/call' && r.subject === 'alice')
    assert.ok(
      calls.some((r) => r.target === 'everything__echo' && r.upstream === 'everything'),
      JSON.stringify(calls),
    )
    // Only a call_tool that named no callable tool is recorded under its own name, refused.
    const underMeta = calls.filter((r) => r.target === 'call_tool')
    assert.ok(
      underMeta.length > 0 && underMeta.every((r) => r.outcome !== 'ok'),
      JSON.stringify(underMeta),
    )
    const bobDenied = records.filter((r) => r.subject === 'bob' && r.outcome !== 'ok')
    assert.ok(bobDenied.some((r) => r.target === 'memory__read_graph'))
    const lists = records.filter((r) => r.method === 'tools/list' && r.subject === 'alice')
    assert.ok(lists.length >= 2)
  })
})
