import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { describe, test } from 'node:test'
import { parseExposition, sampleSum, samplesOf } from '../../test/support/prometheus.ts'
import { BarbicanError } from '../common/errors.ts'
import {
  GatewayMetrics,
  type MetricSources,
  OUTCOMES,
  outcomeOfError,
  outcomeOfReply,
} from './metrics.ts'

const sources = (over: Partial<MetricSources> = {}): MetricSources => ({
  upstreams: () => [
    { name: 'files', state: 'ready' },
    { name: 'github', state: 'failed' },
  ],
  sessions: () => [
    { server: 'default', transport: 'streamable-http' },
    { server: 'default', transport: 'streamable-http' },
    { server: 'ops', transport: 'websocket' },
  ],
  quarantined: () => [
    { upstream: 'github', kind: 'tool', reason: 'changed' },
    { upstream: 'github', kind: 'tool', reason: 'changed' },
    { upstream: 'files', kind: 'prompt', reason: 'new' },
  ],
  ...over,
})

const scrape = async (metrics: GatewayMetrics) => parseExposition(await metrics.exposition())
const outcome = (name: (typeof OUTCOMES)[number]) => OUTCOMES.indexOf(name)

describe('GatewayMetrics', () => {
  test('counts and times calls by server, upstream, method, tool and outcome', async () => {
    const metrics = new GatewayMetrics(sources(), { maxTools: 10 })
    const server = metrics.forServer('default')
    for (const o of ['ok', 'ok', 'tool_error'] as const) {
      server.end('tools/call', 'files', 'files__read', outcome(o), server.begin())
    }
    const e = await scrape(metrics)
    const labels = {
      server: 'default',
      upstream: 'files',
      method: 'tools/call',
      tool: 'files__read',
    }
    assert.equal(sampleSum(e, 'barbican_calls_total', { ...labels, outcome: 'ok' }), 2)
    assert.equal(sampleSum(e, 'barbican_calls_total', { ...labels, outcome: 'tool_error' }), 1)
    assert.equal(e.types.get('barbican_call_duration_seconds'), 'histogram')
    const ok = { ...labels, outcome: 'ok' }
    assert.equal(sampleSum(e, 'barbican_call_duration_seconds_count', ok), 2)
    // Each call took well under a millisecond: it lands in the first bucket and every later one.
    assert.equal(sampleSum(e, 'barbican_call_duration_seconds_bucket', { ...ok, le: '0.001' }), 2)
    assert.equal(sampleSum(e, 'barbican_call_duration_seconds_bucket', { ...ok, le: '+Inf' }), 2)
    assert.equal(sampleSum(e, 'barbican_inflight_requests', { server: 'default' }), 0)
  })

  test('past maxTools distinct tools, further tools are counted under "other"', async () => {
    const metrics = new GatewayMetrics(sources(), { maxTools: 2 })
    const server = metrics.forServer('default')
    for (const tool of ['a', 'b', 'c', 'd', 'a', 'c']) {
      server.end('tools/call', 'files', tool, outcome('ok'), server.begin())
    }
    const e = await scrape(metrics)
    const tools = samplesOf(e, 'barbican_calls_total').map((s) => [s.labels.tool, s.value])
    assert.deepEqual(tools.sort(), [
      ['a', 2],
      ['b', 1],
      ['other', 3],
    ])
    // Other methods carry no tool name and never use up the limit.
    server.end('resources/read', 'files', '', outcome('ok'), server.begin())
    assert.equal(metrics.toolLabel(''), '')
  })

  test('requests in flight are counted until they end', async () => {
    const metrics = new GatewayMetrics(sources(), { maxTools: 10 })
    const server = metrics.forServer('ops')
    const started = [server.begin(), server.begin()]
    assert.equal(
      sampleSum(await scrape(metrics), 'barbican_inflight_requests', { server: 'ops' }),
      2,
    )
    server.end('ping', '', '', outcome('ok'), started[0]!)
    assert.equal(
      sampleSum(await scrape(metrics), 'barbican_inflight_requests', { server: 'ops' }),
      1,
    )
  })

  test('upstreams, sessions and quarantined items are read when scraped', async () => {
    let upstreams = [
      { name: 'files', state: 'ready' },
      { name: 'github', state: 'failed' },
    ]
    const metrics = new GatewayMetrics(sources({ upstreams: () => upstreams }), { maxTools: 10 })
    let e = await scrape(metrics)
    assert.equal(sampleSum(e, 'barbican_upstream_up', { upstream: 'files' }), 1)
    assert.equal(sampleSum(e, 'barbican_upstream_up', { upstream: 'github' }), 0)
    assert.equal(
      sampleSum(e, 'barbican_upstream_state', { upstream: 'github', state: 'failed' }),
      1,
    )
    assert.equal(sampleSum(e, 'barbican_upstream_state', { upstream: 'github' }), 1, 'one-hot')
    assert.equal(
      sampleSum(e, 'barbican_sessions', { server: 'default', transport: 'streamable-http' }),
      2,
    )
    assert.equal(sampleSum(e, 'barbican_sessions', { server: 'ops', transport: 'websocket' }), 1)
    assert.equal(
      sampleSum(e, 'barbican_quarantined_items', { upstream: 'github', kind: 'tool' }),
      2,
    )
    assert.equal(sampleSum(e, 'barbican_quarantined_items', { upstream: 'files' }), 1)
    upstreams = [{ name: 'files', state: 'idle' }]
    e = await scrape(metrics)
    assert.equal(samplesOf(e, 'barbican_upstream_up', { upstream: 'github' }).length, 0)
    assert.equal(sampleSum(e, 'barbican_upstream_state', { upstream: 'files', state: 'idle' }), 1)
  })

  test('restart and sandbox counters exist at 0 for every upstream added', async () => {
    const metrics = new GatewayMetrics(sources(), { maxTools: 10 })
    metrics.addUpstream('files')
    const e = await scrape(metrics)
    assert.deepEqual(samplesOf(e, 'barbican_upstream_restarts_total'), [
      { name: 'barbican_upstream_restarts_total', labels: { upstream: 'files' }, value: 0 },
    ])
    assert.deepEqual(samplesOf(e, 'barbican_sandbox_refusals_total'), [
      { name: 'barbican_sandbox_refusals_total', labels: { upstream: 'files' }, value: 0 },
    ])
    assert.equal(e.types.get('barbican_sandbox_refusals_total'), 'counter')
  })

  test('policy denials are counted by server and policy', async () => {
    const metrics = new GatewayMetrics(sources(), { maxTools: 10 })
    metrics.forServer('default').denied('authorize')
    metrics.forServer('default').denied('authorize')
    const e = await scrape(metrics)
    assert.equal(
      sampleSum(e, 'barbican_policy_denials_total', { server: 'default', policy: 'authorize' }),
      2,
    )
  })

  test('the default process metrics come with every gateway, including event-loop lag', async () => {
    const e = await scrape(new GatewayMetrics(sources(), { maxTools: 10 }))
    for (const name of [
      'process_cpu_seconds_total',
      'process_resident_memory_bytes',
      'nodejs_eventloop_lag_seconds',
      'nodejs_eventloop_lag_p99_seconds',
      'nodejs_heap_size_used_bytes',
    ]) {
      assert.ok(e.types.has(name), name)
    }
    assert.equal(samplesOf(e, 'barbican_build_info').length, 1)
  })
})

describe('outcomes', () => {
  test('replies: a result, a failed tool, an upstream error', () => {
    assert.equal(OUTCOMES[outcomeOfReply({ kind: 'result', result: {} })], 'ok')
    assert.equal(
      OUTCOMES[outcomeOfReply({ kind: 'result', result: { isError: true } })],
      'tool_error',
    )
    assert.equal(OUTCOMES[outcomeOfReply({ kind: 'error' })], 'error')
  })

  test("Barbican's errors by code; anything else is internal", () => {
    const of = (code: ConstructorParameters<typeof BarbicanError>[0]) =>
      OUTCOMES[outcomeOfError(new BarbicanError(code, 'x'))]
    assert.equal(of('ERR_POLICY_DENIED'), 'denied')
    assert.equal(of('ERR_TOOL_QUARANTINED'), 'quarantined')
    assert.equal(of('ERR_ROUTE_UNKNOWN'), 'invalid')
    assert.equal(of('ERR_UPSTREAM_UNAVAILABLE'), 'unavailable')
    assert.equal(of('ERR_UPSTREAM_TIMEOUT'), 'timeout')
    assert.equal(of('ERR_CANCELLED'), 'cancelled')
    assert.equal(of('ERR_UPSTREAM_PROTOCOL'), 'internal')
    assert.equal(OUTCOMES[outcomeOfError(new Error('boom'))], 'internal')
  })
})

describe('the sample Grafana dashboard (docs/grafana/barbican-dashboard.json)', () => {
  test('queries only metrics Barbican exports', async () => {
    const file = new URL('../../docs/grafana/barbican-dashboard.json', import.meta.url)
    const dashboard = JSON.parse(readFileSync(file, 'utf8')) as {
      panels: { title: string; targets: { expr: string }[] }[]
      templating: { list: { query: unknown }[] }
    }
    const exprs = [
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
      ...dashboard.templating.list.map((v) => v.query).filter((q) => typeof q === 'string'),
    ] as string[]
    const metrics = new GatewayMetrics(sources(), { maxTools: 10 })
    metrics.forServer('default').end('tools/call', 'files', 'x', 0, 0)
    const e = await scrape(metrics)
    const named = new Set(
      exprs.flatMap((x) => x.match(/\b(barbican|nodejs|process)_[a-z0-9_]+/g) ?? []),
    )
    assert.ok(named.size >= 12)
    for (const name of named) {
      const family = name.replace(/_(bucket|sum|count)$/, '')
      assert.ok(e.types.has(name) || e.types.get(family) === 'histogram', `${name} is exported`)
    }
  })
})
