/**
 * Where held upstream calls wait between a 2026-07-28 client's rounds. A continuation is taken
 * exactly once (the spec leaves single use to the server), and one left unclaimed expires and
 * is told so, which lets its owner cancel the upstream call and answer the upstream's pending
 * requests. The interface is small and async so that a shared backend can take the memory one's
 * place when several replicas must resume each other's calls.
 */

/** Something held between rounds; `expire` runs when nobody claimed it in time. */
export interface Continuation {
  expire(): void
}

export interface ContinuationStore<T extends Continuation = Continuation> {
  /** Keeps `value` under `id` for `ttlMs`. */
  put(id: string, value: T, ttlMs: number): Promise<void>
  /** Removes and returns the value, or undefined when unknown, taken or expired. */
  take(id: string): Promise<T | undefined>
  /** Expires everything now (shutdown). */
  clear(): Promise<void>
  readonly size: number
}

/** The single-process backend: a map with one unref'd timer per entry. */
export class MemoryContinuationStore<T extends Continuation = Continuation>
  implements ContinuationStore<T>
{
  readonly #entries = new Map<string, { value: T; timer: NodeJS.Timeout }>()

  get size(): number {
    return this.#entries.size
  }

  put(id: string, value: T, ttlMs: number): Promise<void> {
    const previous = this.#entries.get(id)
    if (previous) clearTimeout(previous.timer)
    const timer = setTimeout(() => {
      this.#entries.delete(id)
      value.expire()
    }, ttlMs)
    timer.unref()
    this.#entries.set(id, { value, timer })
    return Promise.resolve()
  }

  take(id: string): Promise<T | undefined> {
    const entry = this.#entries.get(id)
    if (!entry) return Promise.resolve(undefined)
    this.#entries.delete(id)
    clearTimeout(entry.timer)
    return Promise.resolve(entry.value)
  }

  clear(): Promise<void> {
    const entries = [...this.#entries.values()]
    this.#entries.clear()
    for (const { value, timer } of entries) {
      clearTimeout(timer)
      value.expire()
    }
    return Promise.resolve()
  }
}
