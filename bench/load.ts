/**
 * The load generator, run as its own process so its CPU never counts as the gateway's. It opens
 * `concurrency` workers over one undici keep-alive pool; each worker initializes its own MCP
 * session (unless the target is stateless), then sends `tools/call echo` back to back and checks
 * every reply's content. It talks to its parent over IPC: `measuring` when the measured window
 * opens (after warm-up), then `done` with the counts and latencies.
 */
import { Pool } from 'undici'
import { checkEcho, closeSession, initializeSession, type Target, toolCall } from './mcp-http.ts'

/** What the parent asks for. */
export interface LoadSpec {
  readonly target: Target
  readonly concurrency: number
  readonly warmupMs: number
  readonly durationMs: number
}

/** What one measured window produced. */
export interface LoadResult {
  readonly requests: number
  readonly errors: number
  readonly firstError?: string
  readonly elapsedMs: number
  /** Sorted latencies of the measured window, in milliseconds (sampled to at most 50,000). */
  readonly p50Ms: number
  readonly p99Ms: number
}

export type LoadMessage =
  | { readonly type: 'measuring' }
  | { readonly type: 'done'; readonly result: LoadResult }
  | { readonly type: 'failed'; readonly error: string }

async function run(spec: LoadSpec): Promise<LoadResult> {
  const url = new URL(spec.target.url)
  const pool = new Pool(url.origin, {
    connections: spec.concurrency,
    pipelining: 1,
    keepAliveTimeout: 60_000,
  })
  try {
    const sessions = await Promise.all(
      Array.from({ length: spec.concurrency }, () =>
        spec.target.stateful ? initializeSession(pool, spec.target) : Promise.resolve(undefined),
      ),
    )
    let measuring = false
    let stop = false
    let requests = 0
    let errors = 0
    let firstError: string | undefined
    const latencies: number[] = []
    const worker = async (w: number) => {
      const session = sessions[w]
      let n = 0
      while (!stop) {
        const text = `w${w}-${n++}`
        const started = performance.now()
        try {
          const reply = await toolCall(pool, spec.target, session, n, text)
          checkEcho(reply, n, text)
          if (measuring) {
            latencies.push(performance.now() - started)
            requests++
          }
        } catch (error) {
          if (measuring) errors++
          firstError ??= error instanceof Error ? error.message : String(error)
        }
      }
    }
    const workers = sessions.map((_, w) => worker(w))
    await delay(spec.warmupMs)
    measuring = true
    send({ type: 'measuring' })
    const started = performance.now()
    await delay(spec.durationMs)
    measuring = false
    const elapsedMs = performance.now() - started
    stop = true
    await Promise.all(workers)
    await Promise.allSettled(sessions.map((s) => closeSession(pool, spec.target, s)))
    latencies.sort((a, b) => a - b)
    return {
      requests,
      errors,
      ...(firstError === undefined ? {} : { firstError }),
      elapsedMs,
      p50Ms: quantile(latencies, 0.5),
      p99Ms: quantile(latencies, 0.99),
    }
  } finally {
    await pool.close()
  }
}

/** The q-quantile of sorted values (nearest rank); NaN for none. */
export function quantile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms))
}

function send(message: LoadMessage): void {
  process.send?.(message)
}

if (process.send) {
  process.once('message', (spec: LoadSpec) => {
    run(spec).then(
      (result) => send({ type: 'done', result }),
      (error: unknown) => send({ type: 'failed', error: String(error) }),
    )
  })
}
