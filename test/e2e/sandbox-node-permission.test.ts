/**
 * The fallback where bubblewrap is missing (docs/sandbox.md, ADR 030 "Fallback"): forced with
 * BARBICAN_SANDBOX_MECHANISM=node-permission, as on a laptop without bwrap. The embedded demo's
 * real servers start and answer under the Node.js permission model; a hostile Node server cannot
 * read or write outside its grants nor start a process; a non-Node command is still refused.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { homedir, tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { BarbicanError } from '../../src/common/errors.ts'
import { demoConfig } from '../../src/config/demo.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { DEFAULT_JSON_LIMITS } from '../../src/protocol/json-limits.ts'
import { describeConfinement, describeConfinementInFull } from '../../src/sandbox/confine.ts'
import { DEFAULT_SANDBOX_LIMITS, MECHANISM_ENV } from '../../src/sandbox/sandbox.ts'
import { jsonLogger, silentLogger } from '../../src/telemetry/log.ts'
import { StdioOutboundTransport } from '../../src/transports/stdio-outbound.ts'
import { textOf } from '../support/content.ts'

process.env[MECHANISM_ENV] = 'node-permission'

const root = fileURLToPath(new URL('../../', import.meta.url))
const hostile = join(root, 'test/fixtures/upstream-hostile.ts')

async function connect(server: RunningServer): Promise<Client> {
  const client = new Client({ name: 'node-permission-test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  return client
}

describe('without bubblewrap, the embedded demo', () => {
  let server: RunningServer
  let client: Client
  let dataDir: string
  const lines: string[] = []
  /** The confinement the upstream process started under, from the log. */
  const startedUnder = (upstream: string) =>
    lines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .find((r) => r.msg === 'upstream process started' && r.upstream === upstream)?.sandbox

  before(async () => {
    dataDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-nodeperm-demo-')))
    const { config } = demoConfig({ listen: '127.0.0.1:0', dataDir })
    server = await startServer(config, jsonLogger({ write: (line) => lines.push(line) }))
    await server.started
    client = await connect(server)
  })

  after(async () => {
    await client?.close()
    await server?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  test('names node-permission and what it does not cover for each server', () => {
    const { config } = demoConfig({ listen: '127.0.0.1:0', dataDir })
    for (const u of config.upstreams) {
      assert.equal(u.transport, 'stdio')
      if (u.transport !== 'stdio') continue
      // Short in the log and check (ADR 109), in full in check --verbose.
      assert.match(
        describeConfinement(u.name, u.sandbox, u.command),
        /^node-permission \(network not confined; writes: state/,
        u.name,
      )
      const line = describeConfinementInFull(u.name, u.sandbox, u.command)
      assert.match(line, /^node-permission /, u.name)
      assert.match(line, /not covered: network.*memory, process and CPU limits/, u.name)
    }
  })

  test('server-everything answers a tools/call', async () => {
    const echo = await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } })
    assert.match(textOf(echo), /hi/)
    assert.equal(startedUnder('everything'), 'node-permission')
  })

  test('server-memory writes its graph in its state folder and reads it back', async () => {
    const created = await client.callTool({
      name: 'memory__create_entities',
      arguments: {
        entities: [{ name: 'Barbican', entityType: 'gateway', observations: ['confined'] }],
      },
    })
    assert.notEqual(created.isError, true, textOf(created))
    const graph = await client.callTool({ name: 'memory__read_graph', arguments: {} })
    assert.match(textOf(graph), /Barbican/)
    assert.ok(existsSync(join(dataDir, 'state/memory/memory.jsonl')))
    assert.equal(startedUnder('memory'), 'node-permission')
  })
})

describe('without bubblewrap, a hostile Node server', () => {
  let server: RunningServer
  let client: Client
  let configDir: string
  let homeSecret: string

  before(async () => {
    configDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-nodeperm-')))
    writeFileSync(join(configDir, 'secret.txt'), 'config-dir-secret')
    homeSecret = join(homedir(), `.barbican-nodeperm-test-${process.pid}`)
    writeFileSync(homeSecret, 'home-secret')
    const file = join(configDir, 'barbican.json')
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { hostile: { command: process.execPath, args: [hostile] } },
    })
    writeFileSync(file, text)
    const { config } = parseConfigText(text, { file })
    server = await startServer(config, silentLogger)
    await server.started
    client = await connect(server)
  })

  after(async () => {
    await client?.close()
    await server?.stop()
    rmSync(homeSecret, { force: true })
    rmSync(configDir, { recursive: true, force: true })
  })

  // The only upstream: its tool is not namespaced.
  const attempt = async (what: string, arg: string) =>
    textOf(await client.callTool({ name: 'attempt', arguments: { what, arg } }))

  test('cannot read a planted secret, the config or the gateway environment', async () => {
    for (const path of [
      homeSecret,
      join(configDir, 'secret.txt'),
      join(configDir, 'barbican.json'),
      `/proc/${process.pid}/environ`,
    ]) {
      assert.equal(await attempt('read', path), 'refused: ERR_ACCESS_DENIED', path)
    }
  })

  test('cannot write outside its state folder, and can inside it', async () => {
    for (const path of [join(configDir, 'pwned'), join(root, 'pwned'), join(homedir(), 'pwned')]) {
      assert.equal(await attempt('write', path), 'refused: ERR_ACCESS_DENIED', path)
      assert.equal(existsSync(path), false, path)
    }
    const kept = join(configDir, '.barbican/state/hostile/kept')
    assert.equal(await attempt('write', kept), `escaped: wrote ${kept}`)
  })

  test('cannot start a process', async () => {
    assert.match(await attempt('fork', '1'), /--allow-child-process/)
  })
})

describe('without bubblewrap, a program that is not Node', () => {
  test('is refused, naming the missing facility and sandbox: none', async () => {
    const stateDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-nodeperm-sh-')))
    const transport = new StdioOutboundTransport({
      name: 'shell',
      command: '/bin/sh',
      args: ['-c', 'cat'],
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
      sandbox: { stateDir, read: [], write: [], protect: [], limits: DEFAULT_SANDBOX_LIMITS },
    })
    await assert.rejects(
      transport.start(),
      (err: unknown) =>
        err instanceof BarbicanError &&
        err.code === 'ERR_LAUNCH_REFUSED' &&
        /lacks bubblewrap/.test(err.message) &&
        /not a Node program/.test(err.message) &&
        /sandbox: none/.test(err.message),
    )
    rmSync(stateDir, { recursive: true, force: true })
  })
})
