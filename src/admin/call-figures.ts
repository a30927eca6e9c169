/**
 * Live figures for the admin console: calls per second, errors and p95 latency per upstream,
 * over the last few minutes. They are read from the call histogram Prometheus already keeps
 * (src/metrics), sampled every few seconds, so the call path pays nothing more; between two
 * samples the difference of the cumulative buckets gives that interval's figures. Without
 * metrics (`metrics.enabled: false`) there is nothing to sample and the console says so.
 */
import type { GatewayMetrics } from '../telemetry/metrics.ts'

/** One interval of one upstream. */
export interface FigurePoint {
  /** Epoch ms at the end of the interval. */
  readonly at: number
  readonly callsPerSecond: number
  /** Calls that ended in anything but `ok` (tool errors, upstream errors, denials, timeouts). */
  readonly errors: number
  /** Upper bound of the bucket holding the 95th percentile, in ms; undefined with no calls. */
  readonly p95Ms: number | undefined
}

interface Cumulative {
  count: number
  errors: number
  /** Bucket upper bound (s) → cumulative count. */
  buckets: Map<number, number>
}

export const FIGURE_INTERVAL_MS = 5_000
/** Points kept per upstream: five minutes at the default interval. */
export const FIGURE_POINTS = 60

export class CallFigures {
  readonly #metrics: GatewayMetrics | undefined
  readonly #intervalMs: number
  #last = new Map<string, Cumulative>()
  #lastAt = 0
  readonly #series = new Map<string, FigurePoint[]>()
  #timer: NodeJS.Timeout | undefined

  constructor(metrics: GatewayMetrics | undefined, intervalMs = FIGURE_INTERVAL_MS) {
    this.#metrics = metrics
    this.#intervalMs = intervalMs
  }

  get enabled(): boolean {
    return this.#metrics !== undefined
  }

  /** Starts sampling (idempotent); the timer never keeps the process alive. */
  start(): void {
    if (this.#metrics === undefined || this.#timer !== undefined) return
    void this.sample()
    this.#timer = setInterval(() => void this.sample().catch(() => {}), this.#intervalMs)
    this.#timer.unref()
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /** Each upstream's points, oldest first. */
  series(): ReadonlyMap<string, readonly FigurePoint[]> {
    return this.#series
  }

  /** Takes one sample now (the timer's work; tests call it to avoid waiting). */
  async sample(now = Date.now()): Promise<void> {
    if (this.#metrics === undefined) return
    const current = cumulativeOf(await this.#metrics.callDuration.get())
    if (this.#lastAt > 0) {
      const seconds = Math.max((now - this.#lastAt) / 1000, 0.001)
      for (const [upstream, c] of current) {
        const before = this.#last.get(upstream)
        const calls = c.count - (before?.count ?? 0)
        const point: FigurePoint = {
          at: now,
          callsPerSecond: calls / seconds,
          errors: c.errors - (before?.errors ?? 0),
          p95Ms: p95(c.buckets, before?.buckets, calls),
        }
        const series = this.#series.get(upstream) ?? []
        series.push(point)
        if (series.length > FIGURE_POINTS) series.shift()
        this.#series.set(upstream, series)
      }
    }
    this.#last = current
    this.#lastAt = now
  }
}

type HistogramValue = {
  readonly labels: Readonly<Record<string, string | number | undefined>>
  readonly value: number
  readonly metricName?: string | undefined
}

/** The histogram's cumulative figures summed per upstream over every other label. */
function cumulativeOf(histogram: { readonly values: readonly HistogramValue[] }) {
  const totals = new Map<string, Cumulative>()
  for (const v of histogram.values) {
    const upstream = String(v.labels.upstream ?? '')
    if (upstream === '') continue
    let t = totals.get(upstream)
    if (!t) {
      t = { count: 0, errors: 0, buckets: new Map() }
      totals.set(upstream, t)
    }
    if (v.metricName?.endsWith('_count')) {
      t.count += v.value
      if (v.labels.outcome !== 'ok') t.errors += v.value
    } else if (v.metricName?.endsWith('_bucket')) {
      const le = v.labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(v.labels.le)
      t.buckets.set(le, (t.buckets.get(le) ?? 0) + v.value)
    }
  }
  return totals
}

/** The smallest bucket bound under which 95 % of the interval's calls fell, in ms. */
function p95(
  now: ReadonlyMap<number, number>,
  before: ReadonlyMap<number, number> | undefined,
  calls: number,
): number | undefined {
  if (calls <= 0) return undefined
  const want = calls * 0.95
  for (const le of [...now.keys()].sort((a, b) => a - b)) {
    const n = (now.get(le) ?? 0) - (before?.get(le) ?? 0)
    if (n >= want) return Number.isFinite(le) ? le * 1000 : undefined
  }
  return undefined
}
