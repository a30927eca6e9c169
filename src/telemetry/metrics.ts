/**
 * Barbican's Prometheus metrics (docs/observability.md, "Metrics"), with prom-client: per-call
 * counters and latency histograms by virtual server, upstream, method, tool and outcome; the
 * state of upstreams, sessions, quarantined items, policy denials and sandbox refusals; and
 * prom-client's default process metrics (CPU, memory, event-loop lag, GC), kept once per
 * process.
 *
 * The call path does as little as it can: each virtual server holds its series in nested maps
 * (method → upstream → tool), each series resolves its prom-client children once per outcome,
 * so a call costs three map lookups, one counter and one histogram update, and no label object.
 * What can be read when scraped (sessions, requests in flight, upstream states, quarantine) is
 * read then, not counted on the way.
 *
 * Cardinality is bounded: methods come from the method table, upstreams and servers from the
 * configuration, outcomes from OUTCOMES, and tools from the catalogs, of which only the first
 * `maxTools` distinct names get their own label; the rest are counted under `other`.
 */

import type { Counter, Metric, Registry } from 'prom-client'
import { BarbicanError, type ErrorCode } from '../common/errors.ts'
import { promClient } from '../common/lazy-deps.ts'

/** How a call ended, one label value each. */
export const OUTCOMES = [
  'ok',
  /** A `tools/call` result with `isError: true`: the tool ran and reported a failure. */
  'tool_error',
  /** A JSON-RPC error the upstream answered. */
  'error',
  'denied',
  'quarantined',
  /** Unknown name, bad params: the request could not be routed. */
  'invalid',
  'unavailable',
  'timeout',
  'cancelled',
  'internal',
] as const

export type Outcome = (typeof OUTCOMES)[number]

/** Index into OUTCOMES: what the call path passes around instead of strings. */
export type OutcomeIndex = number

const OUTCOME = Object.fromEntries(OUTCOMES.map((o, i) => [o, i])) as Record<Outcome, number>

/** Barbican's own errors by outcome; a code not listed here counts as `internal`. */
const OUTCOME_OF_ERROR: Partial<Record<ErrorCode, Outcome>> = {
  ERR_POLICY_DENIED: 'denied',
  ERR_TOOL_QUARANTINED: 'quarantined',
  ERR_ROUTE_UNKNOWN: 'invalid',
  ERR_INVALID_PARAMS: 'invalid',
  ERR_METHOD_UNKNOWN: 'invalid',
  ERR_METHOD_NOT_IN_REVISION: 'invalid',
  ERR_UPSTREAM_UNAVAILABLE: 'unavailable',
  ERR_UPSTREAM_CLOSED: 'unavailable',
  ERR_SHUTTING_DOWN: 'unavailable',
  ERR_LAUNCH_REFUSED: 'unavailable',
  ERR_UPSTREAM_TIMEOUT: 'timeout',
  ERR_CANCELLED: 'cancelled',
}

export const DENIED: OutcomeIndex = OUTCOME.denied

/** The outcome of a reply: a result (failed tool or not) or an upstream's error. */
export function outcomeOfReply(reply: {
  readonly kind: 'result' | 'error'
  readonly result?: { readonly isError?: unknown }
}): OutcomeIndex {
  if (reply.kind === 'error') return OUTCOME.error
  return reply.result?.isError === true ? OUTCOME.tool_error : OUTCOME.ok
}

/** The outcome of a call that threw. */
export function outcomeOfError(err: unknown): OutcomeIndex {
  const outcome = err instanceof BarbicanError ? OUTCOME_OF_ERROR[err.code] : undefined
  return OUTCOME[outcome ?? 'internal']
}

/**
 * Latency buckets, in seconds: from a cached local answer (about a millisecond) to a long tool
 * run (two minutes, the default request timeout).
 */
export const CALL_BUCKETS = [
  0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
] as const

/** The label value of tools past `maxTools`. */
export const OTHER_TOOL = 'other'

/** Upstream states, in the order they are exported (`barbican_upstream_state`). */
const UPSTREAM_STATES = ['idle', 'connecting', 'ready', 'failed', 'stopped'] as const

/** What the gateway lets the metrics read when scraped. */
export interface MetricSources {
  /** Every upstream and where its connection stands. */
  upstreams(): Iterable<{ readonly name: string; readonly state: string }>
  /** Every open client session: its virtual server and transport. */
  sessions(): Iterable<{ readonly server: string; readonly transport: string }>
  /** Every item trust keeps hidden now. */
  quarantined(): Iterable<{
    readonly upstream: string
    readonly kind: string
    readonly reason: string
  }>
}

export interface MetricsOptions {
  /** Most distinct tool names with a label of their own; the rest are `other`. */
  readonly maxTools: number
  /** Barbican's version, exported as `barbican_build_info`. */
  readonly version?: string
}

type CallLabels = 'server' | 'upstream' | 'method' | 'tool' | 'outcome'

/**
 * The running totals of one (server, upstream, method, tool, outcome): what both
 * `barbican_calls_total` (its count) and `barbican_call_duration_seconds` are made from when
 * scraped. A call adds to three numbers here and nothing else: prom-client's labelled children
 * hash and validate their labels on every `inc`/`observe` (~1 µs a call), these do not.
 */
class CallCell {
  readonly labels: Readonly<Record<CallLabels, string>>
  count = 0
  sum = 0
  /** Observations per bucket of CALL_BUCKETS (not cumulative); past the last: only in count. */
  readonly buckets = new Float64Array(CALL_BUCKETS.length)

  constructor(labels: Readonly<Record<CallLabels, string>>) {
    this.labels = labels
  }

  observe(seconds: number): void {
    this.count++
    this.sum += seconds
    for (let i = 0; i < CALL_BUCKETS.length; i++) {
      if (seconds <= CALL_BUCKETS[i]!) {
        this.buckets[i]!++
        return
      }
    }
  }
}

/** One sample of a metric as prom-client's registry formats it. */
interface Sample {
  readonly labels: Readonly<Record<string, string | number>>
  readonly value: number
  readonly metricName?: string
}

/**
 * A metric read from the call cells when scraped, registered in the gateway's prom-client
 * registry beside its own metrics (the registry asks each for `get()` and formats the samples).
 */
class CellMetric {
  readonly name: string
  readonly help: string
  readonly type: 'counter' | 'histogram'
  readonly aggregator = 'sum' as const
  readonly #cells: readonly CallCell[]

  constructor(
    name: string,
    help: string,
    type: 'counter' | 'histogram',
    cells: readonly CallCell[],
  ) {
    this.name = name
    this.help = help
    this.type = type
    this.#cells = cells
  }

  async get(): Promise<{
    name: string
    help: string
    type: 'counter' | 'histogram'
    aggregator: 'sum'
    values: Sample[]
  }> {
    const values: Sample[] = []
    for (const cell of this.#cells) {
      if (this.type === 'counter') {
        values.push({ labels: cell.labels, value: cell.count })
        continue
      }
      const bucket = `${this.name}_bucket`
      let cumulative = 0
      for (let i = 0; i < CALL_BUCKETS.length; i++) {
        cumulative += cell.buckets[i]!
        values.push({
          labels: { ...cell.labels, le: CALL_BUCKETS[i]! },
          value: cumulative,
          metricName: bucket,
        })
      }
      values.push({ labels: { ...cell.labels, le: '+Inf' }, value: cell.count, metricName: bucket })
      values.push({ labels: cell.labels, value: cell.sum, metricName: `${this.name}_sum` })
      values.push({ labels: cell.labels, value: cell.count, metricName: `${this.name}_count` })
    }
    return {
      name: this.name,
      help: this.help,
      type: this.type,
      aggregator: this.aggregator,
      values,
    }
  }

  /** prom-client's `registry.resetMetrics()`: counts start again. */
  reset(): void {
    for (const cell of this.#cells) {
      cell.count = 0
      cell.sum = 0
      cell.buckets.fill(0)
    }
  }
}

/** The call cells of one (server, upstream, method, tool), per outcome, made on first use. */
class CallSeries {
  readonly #labels: readonly [string, string, string, string]
  readonly #metrics: GatewayMetrics
  readonly #cells: (CallCell | undefined)[] = []

  constructor(metrics: GatewayMetrics, labels: readonly [string, string, string, string]) {
    this.#metrics = metrics
    this.#labels = labels
  }

  observe(outcome: OutcomeIndex, seconds: number): void {
    let cell = this.#cells[outcome]
    if (cell === undefined) {
      const [server, upstream, method, tool] = this.#labels
      cell = this.#metrics.callCell({ server, upstream, method, tool, outcome: OUTCOMES[outcome]! })
      this.#cells[outcome] = cell
    }
    cell.observe(seconds)
  }
}

/** The call metrics of one virtual server; its sessions share it. */
export class ServerMetrics {
  readonly name: string
  /** Client requests of this server being worked on now (read when scraped). */
  inflight = 0
  readonly #metrics: GatewayMetrics
  /** method → upstream → tool → series. */
  readonly #series = new Map<string, Map<string, Map<string, CallSeries>>>()
  readonly #denials = new Map<string, { inc(): void }>()

  constructor(metrics: GatewayMetrics, name: string) {
    this.#metrics = metrics
    this.name = name
  }

  /** A request reached routing; returns the start time to pass to `end`. */
  begin(): number {
    this.inflight++
    return performance.now()
  }

  /**
   * The request ended. `upstream` is '' for what Barbican answers itself (and merged lists);
   * `tool` is the exposed tool name of a routed `tools/call`, '' otherwise.
   */
  end(
    method: string,
    upstream: string,
    tool: string,
    outcome: OutcomeIndex,
    started: number,
  ): void {
    this.inflight--
    this.#seriesOf(method, upstream, tool).observe(outcome, (performance.now() - started) / 1000)
  }

  /** A policy of the chain refused a call of this server. */
  denied(policy: string): void {
    let child = this.#denials.get(policy)
    if (child === undefined) {
      child = this.#metrics.policyDenials.labels({ server: this.name, policy })
      this.#denials.set(policy, child)
    }
    child.inc()
  }

  #seriesOf(method: string, upstream: string, tool: string): CallSeries {
    let byUpstream = this.#series.get(method)
    if (byUpstream === undefined) {
      byUpstream = new Map()
      this.#series.set(method, byUpstream)
    }
    let byTool = byUpstream.get(upstream)
    if (byTool === undefined) {
      byTool = new Map()
      byUpstream.set(upstream, byTool)
    }
    let series = byTool.get(tool)
    if (series === undefined) {
      const label = this.#metrics.toolLabel(tool)
      series = byTool.get(label)
      if (series === undefined) {
        series = new CallSeries(this.#metrics, [this.name, upstream, method, label])
        byTool.set(label, series)
      }
      // Names past the limit are not kept: each of them finds `other` again.
    }
    return series
  }
}

/**
 * prom-client's default metrics, registered once per process in their own registry (they
 * describe the process, and their event-loop monitor and GC observer must not multiply with
 * every gateway a test starts).
 */
let processRegistry: Registry | undefined

function processMetrics(): Registry {
  if (processRegistry === undefined) {
    const prom = promClient()
    processRegistry = new prom.Registry()
    prom.collectDefaultMetrics({ register: processRegistry })
  }
  return processRegistry
}

/** The gauges read when scraped: upstreams, sessions, requests in flight, quarantine. */
function registerGauges(
  prom: ReturnType<typeof promClient>,
  registers: Registry[],
  sources: MetricSources,
  servers: ReadonlyMap<string, ServerMetrics>,
): void {
  new prom.Gauge({
    name: 'barbican_upstream_up',
    help: '1 when the upstream is connected and initialized, 0 otherwise.',
    labelNames: ['upstream'],
    registers,
    collect() {
      this.reset()
      for (const u of sources.upstreams())
        this.set({ upstream: u.name }, u.state === 'ready' ? 1 : 0)
    },
  })
  new prom.Gauge({
    name: 'barbican_upstream_state',
    help: 'Where each upstream connection stands: 1 for its current state, 0 for the others.',
    labelNames: ['upstream', 'state'],
    registers,
    collect() {
      this.reset()
      for (const u of sources.upstreams()) {
        for (const state of UPSTREAM_STATES) {
          this.set({ upstream: u.name, state }, u.state === state ? 1 : 0)
        }
      }
    },
  })
  new prom.Gauge({
    name: 'barbican_sessions',
    help: 'Client sessions open now, by virtual server and transport.',
    labelNames: ['server', 'transport'],
    registers,
    collect() {
      this.reset()
      const counts = new Map<string, { server: string; transport: string; n: number }>()
      for (const s of sources.sessions()) {
        const key = `${s.server}\u0000${s.transport}`
        const entry = counts.get(key)
        if (entry) entry.n++
        else counts.set(key, { server: s.server, transport: s.transport, n: 1 })
      }
      for (const { server, transport, n } of counts.values()) this.set({ server, transport }, n)
    },
  })
  new prom.Gauge({
    name: 'barbican_inflight_requests',
    help: 'Client requests being worked on now, by virtual server.',
    labelNames: ['server'],
    registers,
    collect() {
      for (const s of servers.values()) this.set({ server: s.name }, s.inflight)
    },
  })
  new prom.Gauge({
    name: 'barbican_quarantined_items',
    help: 'Items trust keeps hidden now, by upstream, kind and reason (docs/trust.md).',
    labelNames: ['upstream', 'kind', 'reason'],
    registers,
    collect() {
      this.reset()
      const counts = new Map<
        string,
        { upstream: string; kind: string; reason: string; n: number }
      >()
      for (const q of sources.quarantined()) {
        const key = `${q.upstream}\u0000${q.kind}\u0000${q.reason}`
        const entry = counts.get(key)
        if (entry) entry.n++
        else counts.set(key, { upstream: q.upstream, kind: q.kind, reason: q.reason, n: 1 })
      }
      for (const { n, ...labels } of counts.values()) this.set(labels, n)
    },
  })
}

/** Every metric of one gateway, in its own registry. */
export class GatewayMetrics {
  readonly registry: Registry
  /** `barbican_calls_total` and `barbican_call_duration_seconds`, read from the call cells. */
  readonly calls: CellMetric
  readonly callDuration: CellMetric
  readonly #cells: CallCell[] = []
  readonly policyDenials: Counter<'server' | 'policy'>
  readonly upstreamRestarts: Counter<'upstream'>
  readonly sandboxRefusals: Counter<'upstream'>
  readonly maxTools: number
  readonly #servers = new Map<string, ServerMetrics>()
  /** Tool names that have a label of their own. */
  readonly #tools = new Set<string>()

  constructor(sources: MetricSources, options: MetricsOptions) {
    this.maxTools = options.maxTools
    // Started now, so the event-loop lag and GC figures cover the gateway's whole life.
    processMetrics()
    const prom = promClient()
    const registry = new prom.Registry()
    this.registry = registry
    const registers = [registry]
    this.calls = new CellMetric(
      'barbican_calls_total',
      'Client requests that reached routing, by virtual server, upstream, method, tool and outcome.',
      'counter',
      this.#cells,
    )
    this.callDuration = new CellMetric(
      'barbican_call_duration_seconds',
      'Time from routing a client request to its reply, by the same labels as barbican_calls_total.',
      'histogram',
      this.#cells,
    )
    // The registry only asks a metric for get() (and reset()); see CellMetric.
    registry.registerMetric(this.calls as unknown as Metric)
    registry.registerMetric(this.callDuration as unknown as Metric)
    this.policyDenials = new prom.Counter({
      name: 'barbican_policy_denials_total',
      help: 'Calls refused by a policy of the chain, by virtual server and policy.',
      labelNames: ['server', 'policy'],
      registers,
    })
    this.upstreamRestarts = new prom.Counter({
      name: 'barbican_upstream_restarts_total',
      help: 'Times an upstream connection was made again after the previous one failed or died.',
      labelNames: ['upstream'],
      registers,
    })
    this.sandboxRefusals = new prom.Counter({
      name: 'barbican_sandbox_refusals_total',
      help: 'Operations the sandbox of a stdio upstream refused.',
      labelNames: ['upstream'],
      registers,
    })
    registerGauges(prom, registers, sources, this.#servers)
    const build = new prom.Gauge({
      name: 'barbican_build_info',
      help: "Always 1; the label names Barbican's version.",
      labelNames: ['version'],
      registers,
    })
    build.set({ version: options.version ?? 'unknown' }, 1)
  }

  /** A new cell of call totals, exported from the next scrape on. */
  callCell(labels: Readonly<Record<CallLabels, string>>): CallCell {
    const cell = new CallCell(labels)
    this.#cells.push(cell)
    return cell
  }

  /** The call metrics of a virtual server (one object per name, shared by its sessions). */
  forServer(name: string): ServerMetrics {
    let server = this.#servers.get(name)
    if (server === undefined) {
      server = new ServerMetrics(this, name)
      this.#servers.set(name, server)
    }
    return server
  }

  /**
   * Makes an upstream's counters exist at 0 (a counter that never moved would otherwise be
   * missing, and `rate()` and alerts need the series).
   */
  addUpstream(name: string): void {
    this.upstreamRestarts.labels({ upstream: name }).inc(0)
    this.sandboxRefusals.labels({ upstream: name }).inc(0)
  }

  /** The label of a tool name: itself while fewer than `maxTools` names have one, else `other`. */
  toolLabel(tool: string): string {
    if (tool === '' || this.#tools.has(tool)) return tool
    if (this.#tools.size >= this.maxTools) return OTHER_TOOL
    this.#tools.add(tool)
    return tool
  }

  /** The Prometheus text exposition: the process's metrics, then this gateway's. */
  async exposition(): Promise<string> {
    const [process, own] = await Promise.all([processMetrics().metrics(), this.registry.metrics()])
    return `${process}\n${own}`
  }

  get contentType(): string {
    return this.registry.contentType
  }
}
