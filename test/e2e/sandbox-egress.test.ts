/**
 * The egress proxy of a confined upstream (issue 16 point 1, ADR 040, docs/sandbox.md) and the
 * accounting of sandbox refusals (issue 18 point 1, ADR 041): the hostile fixture, confined with
 * `sandbox.network.allow` naming one local HTTP server, reaches that server through the proxy
 * with Node's fetch and node:http, and is refused everything else: an unlisted host, a loopback
 * port that is not listed, a direct connection that bypasses the proxy. Every attempt is logged
 * with the upstream's name; every refusal is an audit record and a step of
 * `barbican_sandbox_refusals_total`, as is a launch the sandbox refuses.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http'
import { createServer, type Server } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { ephemeralAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import { type MemoryAuditState, memoryAuditStore } from '../../src/audit/memory.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { MECHANISM_ENV } from '../../src/sandbox/sandbox.ts'
import { jsonLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'
import { parseExposition } from '../support/prometheus.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const hostile = join(root, 'test/fixtures/upstream-hostile.ts')

interface Line {
  readonly msg: string
  readonly upstream?: string
  readonly host?: string
  readonly port?: number
  readonly reason?: string
}

interface Gateway {
  readonly server: RunningServer
  readonly lines: Line[]
  readonly audit: MemoryAuditState
  readonly close: () => Promise<void>
}

/** A gateway with a memory audit log and a logger that keeps its lines. */
async function gatewayWith(upstreams: Record<string, unknown>): Promise<Gateway> {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-egress-')))
  const file = join(dir, 'barbican.json')
  const text = JSON.stringify({ listen: '127.0.0.1:0', upstreams })
  writeFileSync(file, text)
  const { config } = parseConfigText(text, { file })
  const lines: Line[] = []
  const log = jsonLogger({
    level: 'debug',
    write: (line) => {
      if (process.env.EGRESS_DEBUG) process.stderr.write(line)
      lines.push(JSON.parse(line) as Line)
    },
  })
  const audit: MemoryAuditState = { records: [], checkpoints: [] }
  const auditLog = new AuditLog({ store: memoryAuditStore(audit), key: ephemeralAuditKey() })
  const server = await startServer(config, log, undefined, auditLog)
  return {
    server,
    lines,
    audit,
    close: async () => {
      await server.stop()
      await auditLog.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

async function refusalsCounted(url: string, upstream: string): Promise<number> {
  const exposition = parseExposition(await (await fetch(`${url}/metrics`)).text())
  const sample = exposition.samples.find(
    (s) => s.name === 'barbican_sandbox_refusals_total' && s.labels.upstream === upstream,
  )
  return sample?.value ?? 0
}

const sandboxRecords = (audit: MemoryAuditState, action: string) =>
  audit.records
    .map((r) => JSON.parse(r.body) as Record<string, unknown>)
    .filter((e) => e.type === 'admin' && e.action === action)

describe('a confined upstream with sandbox.network.allow', () => {
  let gateway: Gateway
  let client: Client
  let site: HttpServer
  let sitePort: number
  let listener: Server
  let listenerPort: number
  let connections = 0

  before(async () => {
    site = createHttpServer((req, res) => res.end(`hello ${req.method} ${req.url}`))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    sitePort = (site.address() as { port: number }).port
    listener = createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    listenerPort = (listener.address() as { port: number }).port
    gateway = await gatewayWith({
      hostile: {
        command: process.execPath,
        args: [hostile],
        sandbox: { network: { allow: [`127.0.0.1:${sitePort}`, 'registry.example.org'] } },
      },
    })
    // On a loaded machine the confined upstream may still be starting: tools/list would miss it.
    await gateway.server.started
    client = new Client({ name: 'egress-test', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.server.url}/mcp`)))
  })

  after(async () => {
    await client?.close()
    await gateway?.close()
    site?.close()
    listener?.close()
  })

  const attempt = async (what: string, arg: string) =>
    textOf(await client.callTool({ name: 'attempt', arguments: { what, arg } }))

  test('reaches the listed host through the proxy, with fetch and with node:http', async () => {
    const url = `http://127.0.0.1:${sitePort}/allowed`
    assert.equal(await attempt('fetch', url), 'escaped: 200 hello GET /allowed')
    assert.equal(await attempt('http', url), 'escaped: 200 hello GET /allowed')
    const allowed = gateway.lines.filter((l) => l.msg === 'egress allowed')
    assert.ok(allowed.length >= 2)
    assert.ok(allowed.every((l) => l.upstream === 'hostile' && l.port === sitePort))
  })

  test('is refused an unlisted host, an unlisted loopback port and a direct connection', async () => {
    assert.match(await attempt('fetch', 'https://example.com/'), /^refused: /)
    assert.match(
      await attempt('http', `http://127.0.0.1:${listenerPort}/`),
      /^refused: 403 Barbican egress proxy: 127\.0\.0\.1:\d+ is not in sandbox\.network\.allow/,
    )
    // fetch tunnels even plain http with CONNECT; undici reports the 403 without its body.
    assert.match(await attempt('fetch', `http://127.0.0.1:${listenerPort}/`), /^refused: /)
    // Around the proxy: the sandbox's loopback is its own, with nothing but the forwarder on it.
    assert.match(await attempt('connect', String(sitePort)), /^refused: /)
    assert.equal(connections, 0, 'the unlisted listener saw no connection')
    const refused = gateway.lines.filter((l) => l.msg === 'egress refused')
    assert.ok(refused.some((l) => l.host === 'example.com' && l.port === 443))
    assert.ok(refused.some((l) => l.host === '127.0.0.1' && l.port === listenerPort))
    assert.ok(refused.every((l) => l.upstream === 'hostile' && typeof l.reason === 'string'))
  })

  test('a listed name is still judged by its DNS answer; an unlisted name is not looked up', async () => {
    // registry.example.org is listed, so it is looked up at connect time; this machine has no
    // DNS, and an unresolvable name is refused as any address outside the policy would be.
    assert.match(
      await attempt('http', 'http://registry.example.org/'),
      /^refused: 403 Barbican egress proxy: cannot resolve registry\.example\.org/,
    )
    assert.match(await attempt('http', 'http://localhost:80/'), /^refused: 403 .*not in sandbox/)
  })

  test('every refusal is audited and counted', async () => {
    const records = sandboxRecords(gateway.audit, 'sandbox.egress')
    assert.ok(records.length >= 3, `${records.length} egress records`)
    for (const r of records) {
      assert.equal(r.actor, 'sandbox')
      assert.equal(r.upstream, 'hostile')
      assert.equal(r.outcome, 'denied')
      assert.equal(typeof r.detail, 'string')
    }
    assert.ok(records.some((r) => r.target === `127.0.0.1:${listenerPort}`))
    assert.ok(records.some((r) => r.target === 'example.com:443'))
    const refused = gateway.lines.filter((l) => l.msg === 'egress refused').length
    assert.equal(await refusalsCounted(gateway.server.url, 'hostile'), refused)
  })
})

describe('a launch the sandbox refuses', () => {
  let previous: string | undefined
  before(() => {
    previous = process.env[MECHANISM_ENV]
    // As on a host without bubblewrap: a program that is not Node cannot be confined.
    process.env[MECHANISM_ENV] = 'node-permission'
  })
  after(() => {
    if (previous === undefined) delete process.env[MECHANISM_ENV]
    else process.env[MECHANISM_ENV] = previous
  })

  test('is audited and counted', async () => {
    const gateway = await gatewayWith({ shell: { command: '/bin/cat' } })
    try {
      await gateway.server.started
      const deadline = Date.now() + 5000
      while (sandboxRecords(gateway.audit, 'sandbox.launch').length === 0) {
        assert.ok(Date.now() < deadline, 'no audit record of the refused launch')
        await new Promise((resolve) => setTimeout(resolve, 50))
      }
      const [record] = sandboxRecords(gateway.audit, 'sandbox.launch')
      assert.equal(record?.upstream, 'shell')
      assert.equal(record?.outcome, 'denied')
      assert.match(String(record?.detail), /runs confined by default/)
      assert.ok((await refusalsCounted(gateway.server.url, 'shell')) >= 1)
    } finally {
      await gateway.close()
    }
  })
})
