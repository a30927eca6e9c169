/**
 * Hot reload as an operator meets it (docs/configuration.md#reload): `barbican serve` runs, an
 * official SDK client is connected, the config file is edited under it. The client is told its
 * list changed and sees the new one on the same session; a broken edit is refused with an error
 * in the log while the old config keeps serving; `barbican status` and the admin API show it.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ToolListChangedNotificationSchema } from '@modelcontextprotocol/sdk/types.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const pkg = (name: string) =>
  join(root, 'node_modules/@modelcontextprotocol', name, 'dist/index.js')
const run = promisify(execFile)

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-reload-')))
const file = join(dir, 'barbican.yaml')

function upstream(name: string, args: string[]): string {
  return `  ${name}:\n    command: ${process.execPath}\n    args: [${args.map((a) => JSON.stringify(a)).join(', ')}]\n`
}
const memory = upstream('memory', [pkg('server-memory')])
const everything = upstream('everything', [pkg('server-everything')])
const files = upstream('files', [pkg('server-filesystem'), dir])

async function barbican(args: string[], env: NodeJS.ProcessEnv = process.env) {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      timeout: 60_000,
      env,
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined) {
  const deadline = Date.now() + 30_000
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe('hot reload of barbican serve', () => {
  let gateway: ChildProcess
  let url: string
  let logs = ''
  let client: Client
  let transport: StreamableHTTPClientTransport
  let listChanged = 0

  before(async () => {
    writeFileSync(file, `upstreams:\n${memory}${everything}`)
    gateway = spawn(process.execPath, [bin, 'serve', '--config', file, '--listen', '127.0.0.1:0'], {
      cwd: dir,
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    gateway.stderr?.on('data', (chunk: Buffer) => {
      logs += chunk.toString()
    })
    url = await until(
      'the gateway URL',
      () => /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(logs)?.[1],
    )
    client = new Client({ name: 'reload-test', version: '1.0.0' })
    client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
      listChanged++
    })
    transport = new StreamableHTTPClientTransport(new URL(`${url}/mcp`))
    await client.connect(transport)
  })
  after(async () => {
    await client?.close().catch(() => {})
    gateway?.kill('SIGTERM')
  })

  async function toolNames(): Promise<string[]> {
    return (await client.listTools()).tools.map((t) => t.name)
  }

  test('an edit applies under a live client: list_changed, then the new list, same session', async () => {
    const names = await until('both upstreams listed', async () => {
      const n = await toolNames()
      return n.includes('everything__echo') && n.includes('memory__read_graph') ? n : undefined
    })
    assert.ok(names.includes('memory__delete_entities'))
    const session = transport.sessionId
    assert.ok(session)
    const seen = listChanged
    // everything removed, files added, a filter on the virtual server.
    writeFileSync(
      file,
      `upstreams:\n${memory}${files}servers:\n  default:\n    tools:\n      exclude: ["*delete*"]\n`,
    )
    await until('list_changed', () => (listChanged > seen ? true : undefined))
    const after = await until('the new list', async () => {
      const n = await toolNames()
      return n.some((t) => t.startsWith('files__')) ? n : undefined
    })
    assert.ok(!after.some((t) => t.startsWith('everything__')), after.join(', '))
    assert.ok(!after.some((t) => t.includes('delete')), after.join(', '))
    assert.ok(after.includes('memory__read_graph'))
    assert.equal(transport.sessionId, session, 'the client kept its session')
    const graph = await client.callTool({ name: 'memory__read_graph', arguments: {} })
    assert.ok(!graph.isError)
    assert.match(logs, /config reloaded: upstreams added: files; upstreams removed: everything/)
  })

  test('an invalid edit is refused with the error in the log; the old config keeps serving', async () => {
    const before = await toolNames()
    writeFileSync(file, `upstreams:\n  memory:\n    command: 42\n    args: nope\n`)
    await until('the refusal in the log', () =>
      /config reload refused; the running configuration keeps serving: .*upstreams\.memory/.test(
        logs,
      )
        ? true
        : undefined,
    )
    assert.deepEqual(await toolNames(), before)
    const graph = await client.callTool({ name: 'memory__read_graph', arguments: {} })
    assert.ok(!graph.isError)
  })

  test('POST /admin/api/reload applies the file and names what needs a restart', async () => {
    writeFileSync(file, `limits:\n  maxBodyBytes: 123456\nupstreams:\n${memory}${files}`)
    const refused = await fetch(`${url}/admin/api/reload`, { method: 'POST' })
    assert.equal(refused.status, 415)
    const res = await fetch(`${url}/admin/api/reload`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    assert.equal(res.status, 200)
    const outcome = (await res.json()) as { ok: boolean; needsRestart: string[]; trigger: string }
    assert.equal(outcome.ok, true)
    assert.deepEqual(outcome.needsRestart, ['limits'])
    assert.equal(outcome.trigger, 'admin (loopback)')
    // The filter is gone again.
    await until('delete tools back', async () =>
      (await toolNames()).includes('memory__delete_entities') ? true : undefined,
    )
  })

  test('SIGHUP reloads the file at once', async () => {
    const seen = listChanged
    writeFileSync(file, `limits:\n  maxBodyBytes: 123456\nupstreams:\n${files}${memory}`)
    gateway.kill('SIGHUP')
    await until('the SIGHUP reload', () =>
      /config reloaded: virtual servers updated: default.*"trigger":"SIGHUP"/.test(logs)
        ? true
        : undefined,
    )
    await until('list_changed', () => (listChanged > seen ? true : undefined))
    const names = await toolNames()
    assert.ok(names.indexOf('files__read_text_file') < names.indexOf('memory__read_graph'))
  })

  test('barbican status prints the overview from the running gateway', async () => {
    const { code, stdout, stderr } = await barbican(['status', '--url', url])
    assert.equal(code, 0, stderr)
    assert.match(stdout, new RegExp(`^barbican \\S+ at ${url.replace(/\./g, '\\.')}, config: `))
    assert.match(stdout, /\n {2}memory +ready \(stdio, MCP \d{4}-\d{2}-\d{2}\), 0 restarts\n/)
    assert.match(stdout, /\n {2}files +ready \(stdio, MCP \d{4}-\d{2}-\d{2}\), 0 restarts\n/)
    assert.doesNotMatch(stdout, /everything/)
    assert.match(stdout, /\n {2}default at \/mcp: files, memory; \d+ tools, \d+ prompts/)
    assert.match(stdout, /\nsessions: 1\n/)
    assert.match(stdout, /\nlast reload: \S+ \(SIGHUP\) applied; needs restart: limits\n/)
    const json = await barbican(['status', '--url', url, '--json'])
    assert.equal(json.code, 0, json.stderr)
    const overview = JSON.parse(json.stdout) as { upstreams: { name: string }[] }
    assert.deepEqual(
      overview.upstreams.map((u) => u.name),
      ['memory', 'files'],
    )
  })

  test('barbican check --diff previews a reload against the running gateway', async () => {
    const next = join(dir, 'next.yaml')
    writeFileSync(
      next,
      `upstreams:\n${memory}${everything}servers:\n  default:\n    tools:\n      rename:\n        memory__read_graph: graph\n`,
    )
    const { code, stdout, stderr } = await barbican([
      'check',
      '--config',
      next,
      '--diff',
      '--url',
      url,
    ])
    assert.equal(code, 0, stderr)
    assert.match(
      stdout,
      new RegExp(`reload preview against the gateway at ${url.replace(/\./g, '\\.')}:`),
    )
    assert.match(stdout, /\ndiff {2}upstreams added: everything\n/)
    assert.match(stdout, /\ndiff {2}upstreams removed: files\n/)
    assert.match(stdout, /\ndiff {2}server default: tools added: [^\n]*everything__echo/)
    assert.match(stdout, /\ndiff {2}server default: tools removed: [^\n]*files__read_text_file/)
    assert.match(
      stdout,
      /\ndiff {2}server default: tools renamed: memory__read_graph → memory__graph\n/,
    )
    assert.match(stdout, /\ndiff {2}pins: \d+ tool\(s\) not served now[^\n]*everything__echo/)
    assert.doesNotMatch(stdout, /pinned at first sight[^\n]*memory__graph/)
    assert.match(stdout, /\ndiff {2}pins: files's pins stay in the store/)
    // A preview changes nothing.
    assert.ok((await toolNames()).includes('memory__read_graph'))
  })

  test('every reload is in the audit log as config.reload', async () => {
    const { code, stdout, stderr } = await barbican(['audit', 'query', '--config', file])
    assert.equal(code, 0, stderr)
    const acts = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action?: string; outcome?: string; actor?: string })
      .filter((r) => r.action === 'config.reload')
      .map((a) => `${a.actor} ${a.outcome}`)
    // In order, once each: the watch does not reload again a text the POST or SIGHUP read.
    assert.deepEqual(acts, ['file ok', 'file error', 'admin (loopback) ok', 'SIGHUP ok'])
  })
})

describe('barbican status without a gateway', () => {
  test('says no gateway answers and exits 1', async () => {
    const { code, stderr } = await barbican(['status', '--url', 'http://127.0.0.1:9'])
    assert.equal(code, 1)
    assert.match(
      stderr,
      /no gateway answers at http:\/\/127\.0\.0\.1:9 .*is barbican serve running\?/,
    )
  })
})

/**
 * The policies reload live (ADR 037 "Amended (policies, live)"): a legacy Streamable HTTP
 * session and a 2026-07-28 client stay connected while the quota is lowered, a Cedar file
 * forbids a tool, and a broken Cedar file is refused. Each next call runs the new chain.
 */
describe('policy reload under live legacy and 2026-07-28 clients', () => {
  const pdir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-reload-policy-')))
  const pfile = join(pdir, 'barbican.yaml')
  const cedarFile = join(pdir, 'team.cedar')
  const only = upstream('everything', [pkg('server-everything')])
  const configWith = (limit: number) =>
    `rateLimits:\n  echoes:\n    limit: ${limit}\n    windowMs: 600000\n    tools: ["echo"]\n` +
    `cedar:\n  policies: [team.cedar]\nupstreams:\n${only}`
  const PERMIT = 'permit (principal, action, resource);\n'
  let gateway: ChildProcess
  let url: string
  let logs = ''
  let legacy: Client
  let modern: ClientV2

  before(async () => {
    writeFileSync(cedarFile, PERMIT)
    writeFileSync(pfile, configWith(100))
    gateway = spawn(
      process.execPath,
      [bin, 'serve', '--config', pfile, '--listen', '127.0.0.1:0'],
      { cwd: pdir, stdio: ['ignore', 'ignore', 'pipe'] },
    )
    gateway.stderr?.on('data', (chunk: Buffer) => {
      logs += chunk.toString()
    })
    url = await until(
      'the gateway URL',
      () => /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(logs)?.[1],
    )
    legacy = new Client({ name: 'reload-legacy', version: '1.0.0' })
    await legacy.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
    modern = new ClientV2(
      { name: 'reload-modern', version: '1.0.0' },
      { versionNegotiation: { mode: { pin: '2026-07-28' } } },
    )
    await modern.connect(new StreamableHTTPClientTransportV2(new URL(`${url}/mcp`)))
    assert.equal(modern.getNegotiatedProtocolVersion(), '2026-07-28')
    await until('the tools listed', async () =>
      (await legacy.listTools()).tools.some((t) => t.name === 'echo') ? true : undefined,
    )
  })
  after(async () => {
    await legacy?.close().catch(() => {})
    await modern?.close().catch(() => {})
    gateway?.kill('SIGTERM')
  })

  const echoLegacy = () => legacy.callTool({ name: 'echo', arguments: { message: 'hi' } })
  const echoModern = () => modern.callTool({ name: 'echo', arguments: { message: 'hi' } })
  const sum = (client: { callTool: Client['callTool'] }) =>
    client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })

  async function reload(): Promise<{ ok: boolean; error?: string; diff?: { policies: string[] } }> {
    const res = await fetch(`${url}/admin/api/reload`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    const outcome = (await res.json()) as {
      ok: boolean
      error?: string
      diff?: { policies: string[] }
    }
    // A refused reload is 422 with the reason.
    assert.equal(res.status, outcome.ok ? 200 : 422)
    return outcome
  }

  test('a lowered quota holds at once, counting the calls already made', async () => {
    const session = legacy.transport?.sessionId
    for (let i = 0; i < 3; i++) assert.ok(!(await echoLegacy()).isError)
    for (let i = 0; i < 2; i++) assert.ok(!(await echoModern()).isError)
    // Five counted under a limit of 100; lowered to 6, one call is left.
    writeFileSync(pfile, configWith(6))
    await until('the file reload', () =>
      /config reloaded: policies updated: rateLimits/.test(logs) ? true : undefined,
    )
    assert.ok(!(await echoLegacy()).isError, 'the sixth call')
    await assert.rejects(echoModern(), /echoes/)
    await assert.rejects(
      echoLegacy(),
      (err: { code?: number; message?: string }) =>
        err.code === -32029 && /Rate limit "echoes" exceeded/.test(err.message ?? ''),
    )
    assert.equal(legacy.transport?.sessionId, session, 'the same legacy session')
  })

  test('a Cedar file that forbids a tool refuses its next call in both eras', async () => {
    assert.ok(!(await sum(legacy)).isError)
    assert.ok(!(await sum(modern as unknown as Client)).isError)
    writeFileSync(
      cedarFile,
      `${PERMIT}forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"get-sum");\n`,
    )
    const outcome = await reload()
    assert.equal(outcome.ok, true, outcome.error)
    assert.deepEqual(outcome.diff?.policies, ['cedar (policy files)'])
    await assert.rejects(
      sum(legacy),
      (err: { code?: number; message?: string }) => err.code === -32001,
    )
    await assert.rejects(sum(modern as unknown as Client), /denied|forbid|policy/i)
  })

  test('a Cedar file that does not validate is refused; the running chain keeps serving', async () => {
    writeFileSync(
      cedarFile,
      `${PERMIT}permit (principal, action == Barbican::Action::"fly", resource);\n`,
    )
    const outcome = await reload()
    assert.equal(outcome.ok, false)
    assert.match(outcome.error ?? '', /Cedar/)
    assert.match(logs, /config reload failed: .*Cedar/)
    // The forbid of get-sum still holds; the quota still counts.
    await assert.rejects(sum(legacy), (err: { code?: number }) => err.code === -32001)
    await assert.rejects(sum(modern as unknown as Client), /denied|forbid|policy/i)
    await assert.rejects(echoLegacy(), (err: { code?: number }) => err.code === -32029)
  })

  test('an edited Cedar file reloads by itself, like an edited config file', async () => {
    const before = (logs.match(/policies updated: cedar \(policy files\)/g) ?? []).length
    writeFileSync(cedarFile, PERMIT)
    await until('the Cedar file reload', () =>
      (logs.match(/policies updated: cedar \(policy files\)/g) ?? []).length > before
        ? true
        : undefined,
    )
    assert.ok(!(await sum(legacy)).isError)
    assert.ok(!(await sum(modern as unknown as Client)).isError)
  })

  test('the reload records name the policy sections that changed', async () => {
    const { code, stdout, stderr } = await barbican(['audit', 'query', '--config', pfile])
    assert.equal(code, 0, stderr)
    const reloads = stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { action?: string; outcome?: string; detail?: string })
      .filter((r) => r.action === 'config.reload')
      .map((r) => `${r.outcome}: ${r.detail}`)
      // The watcher also sees each edit the tests then reload by API: whichever runs second
      // finds nothing to apply, or (for the Cedar file that does not validate) fails the same way
      // again. Either is a repeat of the edit's own record, not another reload to check.
      .filter((r, i, all) => r !== 'ok: nothing to apply' && r !== all[i - 1])
    assert.equal(reloads.length, 4, reloads.join('\n'))
    assert.match(reloads[0]!, /^ok: policies updated: rateLimits$/)
    assert.match(reloads[1]!, /^ok: policies updated: cedar \(policy files\)$/)
    assert.match(reloads[2]!, /^error: .*Cedar/)
    assert.match(reloads[3]!, /^ok: policies updated: cedar \(policy files\)$/)
  })
})
