/**
 * How a virtual server's catalog waits for its members and wins back the ones it left out. A
 * merged list waits for a member at most the listing deadline; a member that was late, or whose
 * lists failed, is marked missing and fetched again in the background, never on a client's list
 * path: a late one as soon as its lists arrive, a failed one after a delay that doubles up to a
 * cap. When a missing member's lists come back, the catalog is rebuilt and clients are told.
 * (docs/decisions/018-listing-deadline-and-catalog-recovery.md)
 */
import { DEFAULT_LIMITS } from '../config/defaults.ts'

/** How long catalogs and handshakes wait for members, and how missing members are retried. */
export interface ListTiming {
  /** Longest a merged list waits for members still connecting or listing. */
  readonly listDeadlineMs: number
  /** Longest a client's `initialize` (or `server/discover`) waits for members still connecting. */
  readonly handshakeWaitMs: number
  /** Delay before the first background retry of a member whose lists failed. */
  readonly listRetryMs: number
  /** Longest delay between two background retries (the delay doubles up to it). */
  readonly listRetryMaxMs: number
}

/** The documented defaults (config/defaults.ts, the `limits` of docs/configuration.md). */
export const DEFAULT_LIST_TIMING: ListTiming = Object.freeze({
  listDeadlineMs: DEFAULT_LIMITS.listDeadlineMs,
  handshakeWaitMs: DEFAULT_LIMITS.handshakeWaitMs,
  listRetryMs: DEFAULT_LIMITS.listRetryMs,
  listRetryMaxMs: DEFAULT_LIMITS.listRetryMaxMs,
})

/** The delay before the next retry of a member whose lists failed `failures` times in a row. */
export function listRetryDelay(timing: ListTiming, failures: number): number {
  return Math.min(timing.listRetryMaxMs, timing.listRetryMs * 2 ** Math.max(0, failures - 1))
}

/** One member the catalog left out. */
interface Missing {
  /** Why, as the degraded marker says it. */
  error: string
  /** Failed fetches in a row (the delay before the next retry grows with it). */
  failures: number
  timer: NodeJS.Timeout | undefined
  /** A fetch of its lists under way (late lists being waited for, or a retry). */
  fetching: Promise<unknown> | undefined
}

/** What recovery needs from the virtual server. */
export interface RecoveryHost {
  /** Fetches every list of member `name` (through its Upstream's cache). */
  fetch(name: string): Promise<unknown>
  /** Member `name`'s lists are back: the catalog must be rebuilt with them. */
  recovered(name: string): void
}

/** The members one catalog left out, each with its way back. */
export class CatalogRecovery {
  readonly #timing: ListTiming
  readonly #host: RecoveryHost
  readonly #missing = new Map<string, Missing>()
  #stopped = false

  constructor(timing: ListTiming, host: RecoveryHost) {
    this.#timing = timing
    this.#host = host
  }

  /** Why member `name` is left out of the catalog, or undefined when it is not. */
  missing(name: string): string | undefined {
    return this.#missing.get(name)?.error
  }

  /** Member `name` missed the listing deadline: its lists (`pending`) join as they arrive. */
  late(name: string, error: string, pending: Promise<unknown>): void {
    const entry = this.#entry(name, error)
    if (entry.fetching === undefined && entry.timer === undefined)
      this.#follow(name, entry, pending)
  }

  /** Member `name`'s lists failed: they are tried again after the backoff delay. */
  failed(name: string, error: string): void {
    const entry = this.#entry(name, error)
    if (entry.fetching !== undefined || entry.timer !== undefined) return
    entry.failures++
    this.#schedule(name, entry)
  }

  /** Member `name` became ready again: a retry waiting for its delay runs now. */
  retryNow(name: string): void {
    const entry = this.#missing.get(name)
    if (!entry || entry.fetching !== undefined) return
    clearTimeout(entry.timer)
    entry.timer = undefined
    this.#attempt(name, entry)
  }

  /** Member `name` left the server or was replaced: what was known about it no longer holds. */
  forget(name: string): void {
    clearTimeout(this.#missing.get(name)?.timer)
    this.#missing.delete(name)
  }

  /** No more retries (the gateway is stopping). */
  stop(): void {
    this.#stopped = true
    for (const entry of this.#missing.values()) clearTimeout(entry.timer)
    this.#missing.clear()
  }

  #entry(name: string, error: string): Missing {
    let entry = this.#missing.get(name)
    if (!entry) {
      entry = { error, failures: 0, timer: undefined, fetching: undefined }
      this.#missing.set(name, entry)
    }
    return entry
  }

  #schedule(name: string, entry: Missing): void {
    if (this.#stopped) return
    entry.timer = setTimeout(
      () => {
        entry.timer = undefined
        this.#attempt(name, entry)
      },
      listRetryDelay(this.#timing, entry.failures),
    )
    // Retries never keep a process alive on their own.
    entry.timer.unref()
  }

  #attempt(name: string, entry: Missing): void {
    if (this.#stopped || this.#missing.get(name) !== entry) return
    this.#follow(name, entry, this.#host.fetch(name))
  }

  /** Waits for `fetching`; success brings the member back, failure schedules the next retry. */
  #follow(name: string, entry: Missing, fetching: Promise<unknown>): void {
    entry.fetching = fetching
    fetching.then(
      () => {
        if (this.#missing.get(name) !== entry) return
        this.#missing.delete(name)
        if (!this.#stopped) this.#host.recovered(name)
      },
      (err: unknown) => {
        if (this.#missing.get(name) !== entry) return
        entry.fetching = undefined
        entry.failures++
        entry.error = err instanceof Error ? err.message : String(err)
        this.#schedule(name, entry)
      },
    )
  }
}
