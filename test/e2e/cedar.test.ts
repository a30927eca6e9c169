/**
 * Cedar policies through a real gateway, with the official SDK client and the official
 * "everything" server: a denial, per-user lists (and cursors that belong to one view), a hidden
 * tool that stays uncallable by its guessed name, shadow mode, `policy explain` and `check`.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { main } from '../../src/cli/main.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { memoryStore } from '../../src/store/memory.ts'
import { jsonLogger, silentLogger } from '../../src/telemetry/log.ts'
import { itemKey } from '../../src/trust/surface.ts'
import { EVERYTHING } from '../fixtures/upstream-helpers.ts'
import { finalReply } from '../support/stateless.ts'

const POLICIES = `// alice may do anything, except echo a secret.
permit (principal == Barbican::User::"alice", action, resource);

// bob sees the server and may call echo only.
permit (principal == Barbican::User::"bob", action == Barbican::Action::"list", resource);
permit (
  principal == Barbican::User::"bob",
  action == Barbican::Action::"call",
  resource == Barbican::Tool::"echo"
);

forbid (principal, action == Barbican::Action::"call", resource)
when { context.arguments.hasTag("message") && context.arguments.getTag("message") like "*secret*" };
`

const alice = generateApiKey()
const bob = generateApiKey()

function configDir(mode: 'enforce' | 'shadow', policies = POLICIES): { dir: string; text: string } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-cedar-')))
  writeFileSync(join(dir, 'team.cedar'), policies)
  const text = JSON.stringify({
    listen: '127.0.0.1:0',
    limits: { listPageSize: 2 },
    store: { memory: {} },
    audit: { enabled: false },
    upstreams: { everything: { command: process.execPath, args: [EVERYTHING, 'stdio'] } },
    auth: {
      apiKeys: {
        keys: [
          { id: 'a', hash: alice.hash, subject: 'alice' },
          { id: 'b', hash: bob.hash, subject: 'bob' },
        ],
      },
    },
    cedar: { policies: ['team.cedar'], mode },
  })
  writeFileSync(join(dir, 'barbican.json'), text)
  return { dir, text }
}

async function connect(server: RunningServer, key: string): Promise<Client> {
  const client = new Client({ name: 'cedar-e2e', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
      requestInit: { headers: { authorization: `Bearer ${key}` } },
    }),
  )
  return client
}

async function allTools(client: Client): Promise<string[]> {
  const names: string[] = []
  let cursor: string | undefined
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor })
    names.push(...page.tools.map((t) => t.name))
    cursor = page.nextCursor
  } while (cursor !== undefined)
  return names
}

/** One stateless 2026-07-28 request over HTTP; the final JSON-RPC frame of the answer. */
async function modern(
  server: RunningServer,
  key: string,
  method: string,
  params: Record<string, unknown>,
): Promise<{ result?: Record<string, unknown>; error?: { code: number; message: string } }> {
  const res = await fetch(`${server.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
      ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
      authorization: `Bearer ${key}`,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method,
      params: {
        ...params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': {},
          'io.modelcontextprotocol/clientInfo': { name: 'cedar-e2e', version: '1.0.0' },
        },
      },
    }),
  })
  const { text, final } = await finalReply(res)
  assert.ok(final, `no response: ${res.status} ${text}`)
  return final
}

async function run(argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = ''
  let err = ''
  const code = await main(argv, { stdout: (t) => (out += t), stderr: (t) => (err += t) })
  return { code, out, err }
}

describe('cedar policies, enforced', () => {
  let server: RunningServer
  let dir: string
  before(async () => {
    const made = configDir('enforce')
    dir = made.dir
    server = await startServer(
      parseConfigText(made.text, { file: join(dir, 'barbican.json') }).config,
      silentLogger,
    )
  })
  after(async () => {
    await server?.stop()
  })

  test('each caller lists only what policy lets it call', async () => {
    const a = await connect(server, alice.key)
    const b = await connect(server, bob.key)
    try {
      const aliceTools = await allTools(a)
      assert.ok(aliceTools.includes('echo') && aliceTools.includes('get-sum'), aliceTools.join())
      assert.ok(aliceTools.length > 2)
      assert.deepEqual(await allTools(b), ['echo'])
    } finally {
      await a.close()
      await b.close()
    }
  })

  test('a hidden tool is refused by its guessed name, a permitted one is called', async () => {
    const b = await connect(server, bob.key)
    try {
      const echoed = await b.callTool({ name: 'echo', arguments: { message: 'hi' } })
      assert.match(JSON.stringify(echoed.content), /hi/)
      await assert.rejects(b.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }), (err) => {
        assert.equal((err as { code?: number }).code, -32001)
        assert.match((err as Error).message, /Cedar policy: bob may not call "get-sum"/)
        return true
      })
    } finally {
      await b.close()
    }
  })

  test('a 2026-07-28 stateless caller gets the same per-user list and denial', async () => {
    const listed = await modern(server, bob.key, 'tools/list', {})
    assert.equal(listed.error, undefined, JSON.stringify(listed.error))
    const tools = listed.result?.tools as { name: string }[]
    assert.deepEqual(
      tools.map((t) => t.name),
      ['echo'],
    )
    const refused = await modern(server, bob.key, 'tools/call', {
      name: 'get-sum',
      arguments: { a: 1, b: 2 },
    })
    assert.equal(refused.error?.code, -32001)
    assert.match(refused.error?.message ?? '', /Cedar policy: bob may not call "get-sum"/)
  })

  test('a forbid on the arguments denies even a caller permitted everything', async () => {
    const a = await connect(server, alice.key)
    try {
      await assert.rejects(
        a.callTool({ name: 'echo', arguments: { message: 'my secret' } }),
        /Cedar policy: alice may not call "echo"/,
      )
      await a.callTool({ name: 'echo', arguments: { message: 'public' } })
    } finally {
      await a.close()
    }
  })

  test("a cursor minted for one caller's view does not page another's", async () => {
    const a = await connect(server, alice.key)
    const b = await connect(server, bob.key)
    try {
      const first = await a.listTools()
      assert.ok(first.nextCursor, 'alice has more than one page')
      await assert.rejects(b.listTools({ cursor: first.nextCursor }), /Invalid cursor/)
      const second = await a.listTools({ cursor: first.nextCursor })
      assert.ok(second.tools.length > 0)
    } finally {
      await a.close()
      await b.close()
    }
  })

  test('policy explain prints the decision and the policies that decided it', async () => {
    const config = join(dir, 'barbican.json')
    const denied = await run([
      'policy',
      'explain',
      '--config',
      config,
      '--as',
      'alice',
      '--call',
      'echo',
      '--args',
      '{"message":"top secret"}',
    ])
    assert.equal(denied.code, 3, denied.err)
    assert.match(denied.out, /^decision: DENY$/m)
    assert.match(denied.out, /team\.cedar#4\n {4}forbid \(principal/)
    const allowed = await run([
      'policy',
      'explain',
      '--config',
      config,
      '--as',
      'bob',
      '--call',
      'echo',
    ])
    assert.equal(allowed.code, 0, allowed.err)
    assert.match(allowed.out, /^decision: ALLOW$/m)
    assert.match(allowed.out, /team\.cedar#3\n/)
    const none = await run([
      'policy',
      'explain',
      '--config',
      config,
      '--as',
      'bob',
      '--call',
      'get-sum',
    ])
    assert.equal(none.code, 3)
    assert.match(none.out, /no policy permits this request/)
  })

  test('policy explain names the permission rule beside the Cedar policies', async () => {
    const { dir: withRules } = configDir('enforce')
    const path = join(withRules, 'barbican.json')
    const config = JSON.parse(readFileSync(path, 'utf8'))
    config.auth.permissions = [
      { subjects: ['alice'], servers: ['default'], tools: ['get-*'] },
      { subjects: ['bob'], servers: ['default'] },
    ]
    writeFileSync(path, JSON.stringify(config))
    const explain = (as: string, tool: string) =>
      run(['policy', 'explain', '--config', path, '--as', as, '--call', tool])
    const granted = await explain('bob', 'echo')
    assert.equal(granted.code, 0, granted.out)
    assert.match(granted.out, /^permissions: ALLOW by auth\.permissions\[1\]$/m)
    assert.match(granted.out, /^cedar: ALLOW$/m)
    // Cedar permits alice everything, but no permission grants her echo: both must allow.
    const refused = await explain('alice', 'echo')
    assert.equal(refused.code, 3, refused.out)
    assert.match(refused.out, /^permissions: DENY/m)
    assert.match(refused.out, /^cedar: ALLOW$/m)
    assert.match(refused.out, /^decision: DENY$/m)
  })
})

describe('cedar policies on pin state, operator labels and the context', () => {
  // echo is pinned with another definition beforehand and let through with a warning
  // (onChange: warn): its pin state is `changed`. get-sum is labelled `egress`, get-env
  // `untrusted`.
  const LABEL_POLICIES = `permit (principal, action == Barbican::Action::"list", resource);
permit (principal, action == Barbican::Action::"call", resource) when { resource.pinState == "pinned" };
forbid (principal, action == Barbican::Action::"call", resource)
when { resource.labels.contains("egress") && context.labels.contains("untrusted") };
`
  let server: RunningServer
  before(async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-cedar-pins-')))
    writeFileSync(join(dir, 'team.cedar'), LABEL_POLICIES)
    const store = memoryStore()
    await store.pins.pin({
      upstream: 'everything',
      key: itemKey('tool', 'echo'),
      kind: 'tool',
      name: 'echo',
      hash: '0'.repeat(64),
      definition: { name: 'echo', description: 'an older echo' },
      approvedAt: new Date().toISOString(),
      approvedBy: 'test',
    })
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      audit: { enabled: false },
      upstreams: {
        everything: {
          command: process.execPath,
          args: [EVERYTHING, 'stdio'],
          trust: { onChange: 'warn' },
        },
      },
      auth: { apiKeys: { keys: [{ id: 'a', hash: alice.hash, subject: 'alice' }] } },
      contexts: {
        labels: { egress: { tools: ['get-sum'] }, untrusted: { tools: ['get-env'] } },
      },
      cedar: { policies: ['team.cedar'], mode: 'enforce' },
    })
    writeFileSync(join(dir, 'barbican.json'), text)
    server = await startServer(
      parseConfigText(text, { file: join(dir, 'barbican.json') }).config,
      silentLogger,
      { store },
    )
  })
  after(async () => {
    await server?.stop()
  })

  test('a tool that differs from its pin is refused by a policy on pin state', async () => {
    const client = await connect(server, alice.key)
    const tools = await allTools(client)
    assert.ok(tools.includes('get-sum') && !tools.includes('echo'), tools.join(', '))
    await assert.rejects(client.callTool({ name: 'echo', arguments: { message: 'hi' } }), /-32001/)
    await client.close()
    // The same decision for a 2026-07-28 stateless caller.
    const refused = await modern(server, alice.key, 'tools/call', {
      name: 'echo',
      arguments: { message: 'hi' },
    })
    assert.equal(refused.error?.code, -32001)
    const allowed = await modern(server, alice.key, 'tools/call', {
      name: 'get-sum',
      arguments: { a: 1, b: 2 },
    })
    assert.ok(allowed.result, JSON.stringify(allowed))
  })

  test('an egress tool is refused once untrusted content entered the session', async () => {
    const client = await connect(server, alice.key)
    const sum = await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })
    assert.notEqual(sum.isError, true)
    const env = await client.callTool({ name: 'get-env', arguments: {} })
    assert.notEqual(env.isError, true)
    await assert.rejects(
      client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } }),
      /may not call "get-sum"/,
    )
    // Another session starts clean.
    const fresh = await connect(server, alice.key)
    const again = await fresh.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })
    assert.notEqual(again.isError, true)
    await client.close()
    await fresh.close()
  })
})

describe('cedar policies, shadow mode', () => {
  let server: RunningServer
  const lines: string[] = []
  before(async () => {
    const { dir, text } = configDir('shadow')
    const log = jsonLogger({ level: 'warn', write: (line) => lines.push(line) })
    server = await startServer(
      parseConfigText(text, { file: join(dir, 'barbican.json') }).config,
      log,
    )
  })
  after(async () => {
    await server?.stop()
  })

  test('a would-be denial is logged and the call goes through', async () => {
    const b = await connect(server, bob.key)
    try {
      const sum = await b.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })
      assert.match(JSON.stringify(sum.content), /3/)
      // Nothing is hidden in shadow mode either.
      assert.ok((await allTools(b)).includes('get-sum'))
    } finally {
      await b.close()
    }
    const warned = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
    const shadow = warned.find(
      (l) => l.msg === 'cedar shadow mode: would deny' && l.item === 'get-sum',
    )
    assert.ok(shadow, lines.join(''))
    assert.equal(shadow.subject, 'bob')
    assert.equal(shadow.action, 'call')
  })
})

describe('barbican check and Cedar policies', () => {
  test('a policy that breaks the schema is refused with the policy and the reason', async () => {
    const { dir } = configDir(
      'enforce',
      'permit (principal, action == Barbican::Action::"call", resource) when { resource.nme == "x" };\n',
    )
    const { code, out } = await run(['check', '--config', join(dir, 'barbican.json')])
    assert.equal(code, 1)
    assert.match(
      out,
      /FAIL {2}cedar: .*team\.cedar#1: .*attribute `nme` on entity type `Barbican::Tool` not found/,
    )
  })

  test('valid policies pass', async () => {
    const { dir } = configDir('enforce')
    const { out } = await run(['check', '--config', join(dir, 'barbican.json')])
    assert.match(out, /ok {4}cedar: 4 policies valid/)
  })
})
