/**
 * Quota leases (ADR 085): a replica reserves a block of tokens of a shared counter in the script
 * call that takes a call's own token, then admits up to that many calls of the key from process
 * memory, with no round trip, until the lease runs out or expires; its unused tokens then go
 * back to the counter, one command per lease. A leased token is taken from the shared counter
 * when it is leased, so the fleet never admits more than the counter allows; what a lease can
 * cost is under-admission: tokens held by one replica while another is refused, for at most one
 * lease's life, and the outstanding tokens of a replica that dies, for the rest of their window.
 *
 * Leases are sized from the key's recent rate on this replica: enough for LEASE_SPAN_MS of its
 * calls, at most MAX_LEASE, none for a key that sees a few calls a second. The shared store
 * grants a lease only while the counter keeps 16 times as many (redis-rate-counter-store.ts),
 * so near its limit a key is taken call by call, exactly as without leases.
 */
import { DEFAULT_QUOTA_LEASE_MS } from '../config/defaults.ts'
import type { RateCounterStore, RateDecision, RateRule, RateTake } from './rate-counter-store.ts'

/** One count a call asks for, and how many more tokens it would like leased with it. */
export interface LeaseTake extends RateTake {
  readonly want: number
}

/** A decision with its lease: `granted` tokens beyond the call's own, from window `anchor`. */
export type LeasedDecision =
  | {
      readonly allowed: true
      readonly remaining: number
      readonly granted?: number
      readonly anchor?: number
    }
  | { readonly allowed: false; readonly retryAfterMs: number }

/** A shared store that can lease (RedisRateCounterStore). */
export interface LeaseSource {
  takeLeasing(entries: readonly LeaseTake[], now: number): Promise<LeasedDecision[]>
  /** Puts `tokens` unused tokens of a lease taken from window `anchor` back; one command. */
  giveBack(
    key: string,
    rule: RateRule,
    tokens: number,
    anchor: number,
    now: number,
  ): Promise<boolean>
}

/**
 * The shared store grants a lease only while the counter, after it, keeps LEASE_HEADROOM times
 * the lease: a lease is at most 1/16 of what is left, so leases shrink as the counter runs
 * down and stop below MIN_LEASE × LEASE_HEADROOM tokens, where every call is taken exactly.
 */
export const LEASE_HEADROOM = 16
/** The smallest lease worth asking for or granting. */
export const MIN_LEASE = 2
/** The most tokens one lease holds, whatever the key's rate. */
export const MAX_LEASE = 512
/** A lease holds this long's worth of the key's recent calls (at most half the lease's life). */
export const LEASE_SPAN_MS = 100
/** The rate of a key is measured over samples of at least this long. */
const SAMPLE_MS = 100
/** A key unseen this long is forgotten (its rate restarts from nothing). */
const IDLE_MS = 2000

interface KeyState {
  rule: RateRule
  /** Rate: calls since `sampleAt`, and the calls per ms of the last full sample. */
  sampleAt: number
  sampleCalls: number
  perMs: number
  /** The lease: tokens left, valid before `until`, from window `anchor` (fixed window). */
  tokens: number
  until: number
  anchor: number
  /** The counter's remaining when the lease was granted, for the decisions it serves. */
  remaining: number
  /**
   * Settles once the take asking for a lease for this key has been answered and its lease
   * granted; undefined when none is in flight. The others of the key ask for none meanwhile,
   * and a call that finds it pending waits for it and takes from the lease it brings.
   */
  asking: Promise<void> | undefined
  lastSeen: number
}

const sameRule = (a: RateRule, b: RateRule) =>
  a.algorithm === b.algorithm && a.limit === b.limit && a.windowMs === b.windowMs

/**
 * A RateCounterStore over a shared store that leases. A call whose every limit has a live lease
 * is decided in memory; any other goes to the shared store, the limits it has leases for
 * first (taken in order, as the contract says), the rest in one take there.
 */
export class LeasingRateCounterStore implements RateCounterStore {
  readonly #source: LeaseSource
  readonly #leaseMs: number
  readonly #spanMs: number
  readonly #clock: () => number
  readonly #keys = new Map<string, KeyState>()
  #sweeper: ReturnType<typeof setInterval> | undefined
  #lastForget = 0

  /** `leaseMs`: how long a lease lives (> 0); `clock` drives expiry (tests). */
  constructor(source: LeaseSource, leaseMs: number = DEFAULT_QUOTA_LEASE_MS, clock = Date.now) {
    this.#source = source
    this.#leaseMs = leaseMs
    this.#spanMs = Math.min(LEASE_SPAN_MS, leaseMs / 2)
    this.#clock = clock
  }

  async take(key: string, rule: RateRule, now: number): Promise<RateDecision> {
    const [decision] = await this.takeAll([{ key, rule }], now)
    return decision!
  }

  takeAll(entries: readonly RateTake[], now: number): Promise<RateDecision[]> {
    if (entries.length === 0) return Promise.resolve([])
    if (now - this.#lastForget >= IDLE_MS) this.#forget(now)
    const states = entries.map(({ key, rule }) => this.#seen(key, rule, now))
    // The leading limits with a live lease are taken here, in order.
    const local: RateDecision[] = []
    this.#takeLeased(states, local, now)
    if (local.length === entries.length) return Promise.resolve(local)
    // The next limit's lease is being asked for: its answer comes no later than a take of our
    // own would (one batch in flight at a time), and usually brings the tokens for this call.
    const asking = states[local.length]!.asking
    if (asking !== undefined) return this.#afterAsk(asking, entries, states, local, now)
    return this.#takeFromSource(entries, states, local, now)
  }

  /** Takes the limits from `local.length` on from their live leases, in order, while it can. */
  #takeLeased(states: readonly KeyState[], local: RateDecision[], now: number): void {
    for (let i = local.length; i < states.length; i++) {
      const state = states[i]!
      if (state.tokens < 1 || now >= state.until) return
      state.tokens--
      local.push({ allowed: true, remaining: state.remaining + Math.floor(state.tokens) })
    }
  }

  /**
   * Waits for the lease being asked for, takes what it can from the leases then, and sends the
   * rest to the shared store. Waits once only: a call never queues behind two asks.
   */
  async #afterAsk(
    asking: Promise<void>,
    entries: readonly RateTake[],
    states: readonly KeyState[],
    local: RateDecision[],
    now: number,
  ): Promise<RateDecision[]> {
    await asking
    this.#takeLeased(states, local, now)
    if (local.length === entries.length) return local
    return await this.#takeFromSource(entries, states, local, now)
  }

  /** Keys whose state is held (tests). */
  get size(): number {
    return this.#keys.size
  }

  /**
   * Stops expiring leases and gives every outstanding one back (a replica that stops, so a
   * rolling update strands nothing); settles when Redis has answered every give-back.
   */
  async close(): Promise<void> {
    if (this.#sweeper !== undefined) clearInterval(this.#sweeper)
    this.#sweeper = undefined
    const now = this.#clock()
    const givenBack: Promise<unknown>[] = []
    for (const [key, state] of this.#keys) givenBack.push(this.#end(key, state, now))
    this.#keys.clear()
    await Promise.all(givenBack)
  }

  async #takeFromSource(
    entries: readonly RateTake[],
    states: readonly KeyState[],
    local: RateDecision[],
    now: number,
  ): Promise<RateDecision[]> {
    const rest: LeaseTake[] = []
    const asked: KeyState[] = []
    // Settled once the leases are granted (or the take failed): the calls waiting on it go on.
    let answer = (): void => {}
    const answered = new Promise<void>((resolve) => {
      answer = resolve
    })
    for (let i = local.length; i < entries.length; i++) {
      const { key, rule } = entries[i]!
      const state = states[i]!
      // An expired lease's unused tokens go back before the key leases again.
      if (state.tokens >= 1 && now >= state.until) this.#end(key, state, now)
      let want = 0
      // A key asks for a lease when it has none live and no other take of it is asking.
      if (state.asking === undefined && state.tokens < 1) {
        want = Math.min(MAX_LEASE, Math.floor(state.perMs * this.#spanMs))
        if (want >= MIN_LEASE) {
          state.asking = answered
          asked.push(state)
        } else want = 0
      }
      rest.push({ key, rule, want })
    }
    try {
      const decisions = await this.#source.takeLeasing(rest, now)
      const first = local.length
      for (let d = 0; d < decisions.length; d++) {
        const decision = decisions[d]!
        if (!decision.allowed) {
          local.push(decision)
          continue
        }
        const granted = decision.granted ?? 0
        local.push({ allowed: true, remaining: decision.remaining + granted })
        if (granted > 0) this.#grant(rest[d]!, states[first + d]!, decision, granted, now)
      }
      return local
    } finally {
      for (const state of asked) state.asking = undefined
      answer()
    }
  }

  #grant(
    take: LeaseTake,
    state: KeyState,
    decision: { readonly remaining: number; readonly anchor?: number },
    granted: number,
    now: number,
  ): void {
    // Whatever the key still held (none, normally: only the asker leases) goes back first.
    if (state.tokens >= 1) this.#end(take.key, state, now)
    const anchor = decision.anchor ?? 0
    let until = now + this.#leaseMs
    // A fixed window's tokens are good in their window only.
    if (take.rule.algorithm === 'fixed-window') until = Math.min(until, anchor + take.rule.windowMs)
    state.tokens = granted
    state.until = until
    state.anchor = anchor
    state.remaining = decision.remaining
    state.rule = take.rule
    if (this.#sweeper === undefined) {
      this.#sweeper = setInterval(this.#sweep, Math.max(10, this.#leaseMs / 2))
      this.#sweeper.unref()
    }
  }

  /** The key's state, its rate counted with this call; a changed rule drops the old lease. */
  #seen(key: string, rule: RateRule, now: number): KeyState {
    let state = this.#keys.get(key)
    if (state === undefined) {
      state = {
        rule,
        sampleAt: now,
        sampleCalls: 0,
        perMs: 0,
        tokens: 0,
        until: 0,
        anchor: 0,
        remaining: 0,
        asking: undefined,
        lastSeen: now,
      }
      this.#keys.set(key, state)
    } else if (!sameRule(state.rule, rule)) {
      this.#end(key, state, now)
      state.rule = rule
      state.perMs = 0
      state.sampleAt = now
      state.sampleCalls = 0
    }
    state.lastSeen = now
    state.sampleCalls++
    const elapsed = now - state.sampleAt
    if (elapsed >= SAMPLE_MS) {
      state.perMs = state.sampleCalls / elapsed
      state.sampleAt = now
      state.sampleCalls = 0
    }
    return state
  }

  /** Ends the key's lease: its unused tokens go back; never rejects (the sweep ignores it). */
  #end(key: string, state: KeyState, now: number): Promise<unknown> {
    const tokens = Math.floor(state.tokens)
    state.tokens = 0
    state.until = 0
    if (tokens < 1) return Promise.resolve()
    // A failure loses the tokens for their window: under-admission, never over-admission.
    return this.#source.giveBack(key, state.rule, tokens, state.anchor, now).catch(() => {})
  }

  /** Forgets the keys idle for IDLE_MS that hold no lease, so memory stays bounded. */
  #forget(now: number): void {
    this.#lastForget = now
    for (const [key, state] of this.#keys)
      if (state.tokens < 1 && state.asking === undefined && now - state.lastSeen >= IDLE_MS)
        this.#keys.delete(key)
  }

  /** Gives back the leases that expired, forgets idle keys, stops when nothing is held. */
  readonly #sweep = (): void => {
    const now = this.#clock()
    let leases = 0
    for (const [key, state] of this.#keys) {
      if (state.tokens >= 1 && now >= state.until) this.#end(key, state, now)
      if (state.tokens >= 1 || state.asking !== undefined) leases++
      else if (now - state.lastSeen >= IDLE_MS) this.#keys.delete(key)
    }
    if (leases === 0 && this.#sweeper !== undefined) {
      clearInterval(this.#sweeper)
      this.#sweeper = undefined
    }
  }
}
