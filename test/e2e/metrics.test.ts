/**
 * `/metrics` after real calls: the official SDK client calls server-everything through
 * Barbican, and the scrape, parsed as Prometheus text, shows the calls counted and timed by
 * virtual server, upstream, tool and outcome, the policy denial, the upstream, the session and
 * the process. Then who may read `/metrics` (docs/observability.md).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { type Exposition, parseExposition, sampleSum, samplesOf } from '../support/prometheus.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')

async function scrape(url: string, headers: Record<string, string> = {}): Promise<Exposition> {
  const res = await fetch(`${url}/metrics`, { headers })
  assert.equal(res.status, 200)
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/)
  return parseExposition(await res.text())
}

describe('/metrics after real calls through the gateway', () => {
  let server: RunningServer
  let client: Client
  const caller = generateApiKey()

  before(async () => {
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      metrics: { maxTools: 2 },
      auth: {
        apiKeys: { keys: [{ id: 'caller', hash: caller.hash, subject: 'ada' }] },
        permissions: [
          {
            subjects: ['ada'],
            tools: ['echo', 'get-sum', 'get-tiny-image', 'trigger-long-running-operation'],
          },
        ],
      },
      upstreams: { everything: { command: process.execPath, args: [everything, 'stdio'] } },
    })
    server = await startServer(parseConfigText(text, { cwd: root }).config, silentLogger)
    await server.started
    client = new Client({ name: 'metrics-test', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
        requestInit: { headers: { authorization: `Bearer ${caller.key}` } },
      }),
    )
  })

  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('calls are counted and timed by server, upstream, tool and outcome', async () => {
    const before = await scrape(server.url)
    const echo = {
      server: 'default',
      upstream: 'everything',
      method: 'tools/call',
      tool: 'echo',
      outcome: 'ok',
    }
    const count = (e: Exposition) => sampleSum(e, 'barbican_calls_total', echo)
    for (let i = 0; i < 3; i++) {
      const result = await client.callTool({ name: 'echo', arguments: { message: `hi ${i}` } })
      assert.notEqual(result.isError, true)
    }
    await client.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })
    // Past metrics.maxTools (2): counted, but under tool="other".
    await client.callTool({ name: 'get-tiny-image', arguments: {} })
    // Not granted to ada: the authorize policy refuses it.
    await assert.rejects(client.callTool({ name: 'get-env', arguments: {} }), /may not call/)
    const e = await scrape(server.url)

    assert.equal(e.types.get('barbican_calls_total'), 'counter')
    assert.equal(count(e) - count(before), 3)
    const durations = { ...echo }
    const bucket = (x: Exposition, le: string) =>
      sampleSum(x, 'barbican_call_duration_seconds_bucket', { ...durations, le })
    assert.equal(bucket(e, '+Inf') - bucket(before, '+Inf'), 3, 'every call in the +Inf bucket')
    assert.equal(sampleSum(e, 'barbican_call_duration_seconds_count', durations), count(e))
    assert.ok(sampleSum(e, 'barbican_call_duration_seconds_sum', durations) > 0)
    // Buckets are cumulative and end at the count.
    const buckets = samplesOf(e, 'barbican_call_duration_seconds_bucket', durations)
    assert.equal(buckets.length, 17)
    for (let i = 1; i < buckets.length; i++) {
      assert.ok(buckets[i]!.value >= buckets[i - 1]!.value, 'cumulative buckets')
    }
    assert.ok(
      buckets.some((b) => b.labels.le !== '+Inf' && b.value > 0),
      'a finite bucket moved',
    )

    assert.equal(sampleSum(e, 'barbican_calls_total', { tool: 'get-sum', outcome: 'ok' }), 1)
    assert.equal(sampleSum(e, 'barbican_calls_total', { tool: 'other', outcome: 'ok' }), 1)
    assert.equal(samplesOf(e, 'barbican_calls_total', { tool: 'get-tiny-image' }).length, 0)
    assert.equal(sampleSum(e, 'barbican_calls_total', { tool: 'other', outcome: 'denied' }), 1)
    assert.equal(
      sampleSum(e, 'barbican_policy_denials_total', { server: 'default', policy: 'authorize' }),
      1,
    )
    // What the client did besides calling tools is counted too, by method.
    assert.ok(sampleSum(e, 'barbican_calls_total', { method: 'initialize', upstream: '' }) >= 1)
  })

  test('upstream, session and process state', async () => {
    const e = await scrape(server.url)
    assert.equal(sampleSum(e, 'barbican_upstream_up', { upstream: 'everything' }), 1)
    assert.equal(
      sampleSum(e, 'barbican_upstream_state', { upstream: 'everything', state: 'ready' }),
      1,
    )
    assert.equal(sampleSum(e, 'barbican_upstream_restarts_total', { upstream: 'everything' }), 0)
    assert.equal(sampleSum(e, 'barbican_sandbox_refusals_total', { upstream: 'everything' }), 0)
    assert.equal(
      sampleSum(e, 'barbican_sessions', { server: 'default', transport: 'streamable-http' }),
      1,
    )
    assert.equal(sampleSum(e, 'barbican_inflight_requests', { server: 'default' }), 0)
    assert.ok(e.types.has('barbican_quarantined_items'))
    assert.ok(sampleSum(e, 'process_resident_memory_bytes') > 0)
    assert.ok(e.types.has('nodejs_eventloop_lag_seconds'))
  })

  test('a call is counted in flight while it runs, and leaves when it ends', async () => {
    const running = client.callTool({
      name: 'trigger-long-running-operation',
      arguments: { duration: 1, steps: 1 },
    })
    await new Promise((resolve) => setTimeout(resolve, 300))
    assert.equal(sampleSum(await scrape(server.url), 'barbican_inflight_requests'), 1)
    await running
    assert.equal(sampleSum(await scrape(server.url), 'barbican_inflight_requests'), 0)
  })
})

describe('who may read /metrics', () => {
  const admin = generateApiKey()
  const plain = generateApiKey()
  const token = 'scrape-token-0123456789'
  const servers: RunningServer[] = []

  const start = async (extra: Record<string, unknown>) => {
    const text = JSON.stringify({
      upstreams: { lazy: { command: process.execPath, args: [everything, 'stdio'], lazy: true } },
      ...extra,
    })
    const server = await startServer(parseConfigText(text, { cwd: root }).config, silentLogger)
    servers.push(server)
    // Reached over loopback whatever the bind address.
    return server.url.replace(/\/\/[^/]+:/, '//127.0.0.1:')
  }
  const auth = {
    apiKeys: {
      keys: [
        { id: 'admin', hash: admin.hash, subject: 'ops', scopes: ['barbican:admin'] },
        { id: 'plain', hash: plain.hash, subject: 'ada' },
      ],
    },
  }
  const status = async (url: string, authorization?: string) =>
    (await fetch(`${url}/metrics`, authorization ? { headers: { authorization } } : {})).status

  after(async () => {
    for (const s of servers) await s.stop()
  })

  test('a loopback bind stays open, with or without inbound auth', async () => {
    assert.equal(await status(await start({ listen: '127.0.0.1:0' })), 200)
    assert.equal(await status(await start({ listen: '127.0.0.1:0', auth })), 200)
  })

  test('a non-loopback bind with inbound auth needs an admin credential', async () => {
    const url = await start({ listen: '0.0.0.0:0', auth })
    const res = await fetch(`${url}/metrics`)
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /^Bearer/)
    assert.equal(await status(url, `Bearer ${plain.key}`), 403)
    assert.equal(await status(url, 'Bearer bk_not-a-key'), 401)
    assert.equal(await status(url, `Bearer ${admin.key}`), 200)
  })

  test('a configured token is required, and admin credentials still work', async () => {
    const url = await start({ listen: '0.0.0.0:0', auth, metrics: { token } })
    assert.equal(await status(url), 401)
    assert.equal(await status(url, `Bearer ${token}`), 200)
    assert.equal(await status(url, `Bearer ${token}x`), 401)
    assert.equal(await status(url, `Bearer ${admin.key}`), 200)
    assert.equal(await status(url, `Bearer ${plain.key}`), 403)
    const loopback = await start({ listen: '127.0.0.1:0', metrics: { token } })
    assert.equal(await status(loopback), 401)
    assert.equal(await status(loopback, `Bearer ${token}`), 200)
  })

  test('metrics.enabled: false answers 404', async () => {
    const url = await start({ listen: '127.0.0.1:0', metrics: { enabled: false } })
    const res = await fetch(`${url}/metrics`)
    assert.equal(res.status, 404)
    assert.match(await res.text(), /metrics\.enabled: false/)
  })
})
