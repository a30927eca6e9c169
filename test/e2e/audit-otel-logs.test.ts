/**
 * Audit records as OpenTelemetry logs: a real `barbican serve`, switched on by the standard
 * OTEL_EXPORTER_OTLP_LOGS_ENDPOINT, exports every committed record over OTLP/HTTP (JSON) to a
 * receiver this test starts, with the SIEM field set of docs/audit.md: a legacy session's call, a
 * stateless 2026-07-28 call, and the same records in the chain (`audit tail`).
 */
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  type OtlpReceiver,
  type ReceivedLog,
  startOtlpReceiver,
} from '../fixtures/otlp-receiver.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

async function waitForLogs(
  receiver: OtlpReceiver,
  predicate: (logs: readonly ReceivedLog[]) => boolean,
): Promise<void> {
  const deadline = Date.now() + 15_000
  while (!predicate(receiver.logs)) {
    if (Date.now() > deadline) {
      throw new Error(`logs never matched: ${JSON.stringify(receiver.logs, null, 1)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const echoOf = (message: string) => (l: ReceivedLog) =>
  l.attributes['gen_ai.tool.name'] === 'echo' &&
  typeof l.attributes['barbican.audit.argsDigest'] === 'string' &&
  l.attributes['barbican.audit.transport'] ===
    (message === 'legacy' ? 'streamable-http' : 'streamable-http-stateless')

describe('audit records exported as OTel logs', () => {
  let receiver: OtlpReceiver
  let gateway: ReturnType<typeof spawn>
  let url: string
  let config: string

  before(async () => {
    receiver = await startOtlpReceiver()
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-otel-logs-')))
    config = join(dir, 'barbican.yaml')
    writeFileSync(
      config,
      `upstreams:\n  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n`,
    )
    const env = { ...process.env }
    for (const key of Object.keys(env)) if (key.startsWith('OTEL_')) delete env[key]
    gateway = spawn(
      process.execPath,
      [bin, 'serve', '--config', config, '--listen', '127.0.0.1:0'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
        env: {
          ...env,
          OTEL_EXPORTER_OTLP_LOGS_ENDPOINT: `${receiver.url}/v1/logs`,
          OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
          OTEL_BLRP_SCHEDULE_DELAY: '100',
          OTEL_SERVICE_NAME: 'barbican-e2e',
        },
      },
    )
    url = await new Promise<string>((resolve, reject) => {
      let seen = ''
      const timer = setTimeout(() => reject(new Error(`no URL announced: ${seen}`)), 30_000)
      gateway.stderr?.on('data', (chunk: Buffer) => {
        seen += chunk.toString()
        const match = /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(seen)
        if (match?.[1]) {
          clearTimeout(timer)
          resolve(match[1])
        }
      })
    })
  })

  after(async () => {
    if (gateway.exitCode === null) {
      gateway.kill('SIGTERM')
      await new Promise((resolve) => gateway.once('exit', resolve))
    }
    await receiver.close()
  })

  test('a legacy and a stateless call each arrive as a log record with the SIEM fields', async () => {
    const client = new Client({ name: 'otel-logs-e2e', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
    await client.callTool({ name: 'echo', arguments: { message: 'legacy' } })
    await client.close()
    const stateless = await postStatelessToolCall(`${url}/mcp`, {
      name: 'echo',
      arguments: { message: 'modern' },
    })
    assert.equal(stateless.status, 200, stateless.text)

    await waitForLogs(
      receiver,
      (logs) => logs.some(echoOf('legacy')) && logs.some(echoOf('modern')),
    )
    const legacy = receiver.logs.find(echoOf('legacy'))!
    assert.equal(legacy.service, 'barbican-e2e')
    assert.equal(legacy.eventName, 'barbican.audit.call')
    assert.equal(legacy.severityText, 'INFO')
    assert.match(legacy.body ?? '', /^anonymous tools\/call echo: ok$/)
    const a = legacy.attributes
    assert.equal(a['user.id'], 'anonymous')
    assert.equal(a['mcp.method.name'], 'tools/call')
    assert.equal(a['barbican.audit.outcome'], 'ok')
    assert.equal(a['barbican.audit.upstream'], 'everything')
    assert.equal(a['barbican.audit.server'], 'default')
    assert.equal(typeof a['barbican.audit.seq'], 'number')
    assert.match(String(a['barbican.audit.hash']), /^[0-9a-f]{64}$/)
    assert.match(String(a['barbican.audit.prevHash']), /^[0-9a-f]{64}$/)
    assert.ok(legacy.timeUnixNano && BigInt(legacy.timeUnixNano) > 0n)
    // The raw arguments never leave without the opt-in: only their digest does.
    assert.equal(a['barbican.audit.args'], undefined)
  })

  test('the exported records are the chain’s own records, hash for hash', async () => {
    await waitForLogs(receiver, (logs) => logs.some(echoOf('modern')))
    gateway.kill('SIGTERM')
    await new Promise((resolve) => gateway.once('exit', resolve))
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [bin, 'audit', 'tail', '--config', config, '--limit', '50'],
      { timeout: 60_000 },
    )
    const chained = new Set(
      stdout
        .trim()
        .split('\n')
        .map((line) => (JSON.parse(line) as { hash: string }).hash),
    )
    const exported = receiver.logs.filter((l) => l.attributes['barbican.audit.type'] === 'call')
    assert.ok(exported.length >= 2)
    for (const l of exported) assert.ok(chained.has(String(l.attributes['barbican.audit.hash'])))
  })
})
