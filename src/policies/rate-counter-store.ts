/**
 * Where rate-limit counters live, behind one interface: process memory now, a shared store
 * (Redis, BARBICAN_REDIS_URL) when replicas must count together. A store only counts; which
 * calls count against which key is the rate-limit policy's business (rate-limit.ts).
 * Every implementation passes the contract suite in rate-counter-store.contract.ts.
 */

/** How one limit counts: `limit` calls per `windowMs`. */
export interface RateRule {
  /**
   * `token-bucket`: a bucket of `limit` tokens refilled evenly over `windowMs`, so bursts up to
   * `limit` pass and the rate recovers continuously. `fixed-window`: at most `limit` calls in
   * each window of `windowMs` counted from the key's first call, all reset at its end.
   */
  readonly algorithm: 'token-bucket' | 'fixed-window'
  readonly limit: number
  readonly windowMs: number
}

/** The answer to one call: taken, or refused with how long until one more call would pass. */
export type RateDecision =
  | { readonly allowed: true; readonly remaining: number }
  | { readonly allowed: false; readonly retryAfterMs: number }

/** One count a call asks for: `key` under `rule`. */
export interface RateTake {
  readonly key: string
  readonly rule: RateRule
}

export interface RateCounterStore {
  /** Counts one call against `key` under `rule` at time `now` (ms), if the rule allows it. */
  take(key: string, rule: RateRule, now: number): Promise<RateDecision>
  /**
   * Takes each entry in order and stops at the first refusal, which is the last decision
   * returned: the limits before it counted the call, the ones after it did not. A shared store
   * does this in one round trip, so a call costs one whatever number of limits apply to it.
   */
  takeAll(entries: readonly RateTake[], now: number): Promise<RateDecision[]>
}

interface Bucket {
  /** Tokens left (token bucket) or calls left (fixed window). */
  tokens: number
  /** The limit `tokens` counts down from (see `rebased`). */
  limit: number
  /** Token bucket: when `tokens` was last refilled. Fixed window: when the window started. */
  at: number
  /** After this instant the entry is as good as new and may be forgotten. */
  idleAfter: number
}

/** How often the memory store forgets keys that are back to full, so memory stays bounded. */
const SWEEP_EVERY_MS = 60_000

/** Counters in this process's memory: exact for one replica, per replica in a fleet. */
export class MemoryRateCounterStore implements RateCounterStore {
  readonly #buckets = new Map<string, Bucket>()
  #lastSweep = 0

  take(key: string, rule: RateRule, now: number): Promise<RateDecision> {
    if (now - this.#lastSweep >= SWEEP_EVERY_MS) this.#sweep(now)
    return Promise.resolve(
      rule.algorithm === 'token-bucket'
        ? this.#bucket(key, rule, now)
        : this.#window(key, rule, now),
    )
  }

  async takeAll(entries: readonly RateTake[], now: number): Promise<RateDecision[]> {
    const decisions: RateDecision[] = []
    for (const { key, rule } of entries) {
      const decision = await this.take(key, rule, now)
      decisions.push(decision)
      if (!decision.allowed) break
    }
    return decisions
  }

  /** Keys held now (for tests of the sweep). */
  get size(): number {
    return this.#buckets.size
  }

  #bucket(key: string, rule: RateRule, now: number): RateDecision {
    const perMs = rule.limit / rule.windowMs
    const bucket = this.#buckets.get(key) ?? {
      tokens: rule.limit,
      limit: rule.limit,
      at: now,
      idleAfter: now,
    }
    rebase(bucket, rule)
    bucket.tokens = Math.min(rule.limit, bucket.tokens + Math.max(0, now - bucket.at) * perMs)
    bucket.at = now
    if (bucket.tokens < 1) {
      this.#buckets.set(key, bucket)
      return { allowed: false, retryAfterMs: Math.ceil((1 - bucket.tokens) / perMs) }
    }
    bucket.tokens -= 1
    bucket.idleAfter = now + Math.ceil((rule.limit - bucket.tokens) / perMs)
    this.#buckets.set(key, bucket)
    return { allowed: true, remaining: Math.floor(bucket.tokens) }
  }

  #window(key: string, rule: RateRule, now: number): RateDecision {
    let window = this.#buckets.get(key)
    if (window === undefined || now - window.at >= rule.windowMs) {
      window = { tokens: rule.limit, limit: rule.limit, at: now, idleAfter: now + rule.windowMs }
      this.#buckets.set(key, window)
    }
    rebase(window, rule)
    if (window.tokens < 1) {
      return { allowed: false, retryAfterMs: Math.max(1, window.at + rule.windowMs - now) }
    }
    window.tokens -= 1
    return { allowed: true, remaining: window.tokens }
  }

  #sweep(now: number): void {
    this.#lastSweep = now
    for (const [key, bucket] of this.#buckets)
      if (bucket.idleAfter <= now) this.#buckets.delete(key)
  }
}

/**
 * A key's limit changed (a reload): the calls it counted still count, against the new limit.
 * Lowered from 10 to 3 after 3 calls, the key has none left, not 3 more; raised, it gains the
 * difference at once. The Redis store does the same arithmetic (redis-rate-counter-store.ts).
 */
function rebase(bucket: Bucket, rule: RateRule): void {
  if (bucket.limit === rule.limit) return
  bucket.tokens = Math.min(rule.limit, bucket.tokens + rule.limit - bucket.limit)
  bucket.limit = rule.limit
}
