/**
 * Rate-limit counters in Redis (ADR 055): one count for the whole fleet, so a limit of N per
 * minute admits N across every replica. Each key expires once it would read as new again, so
 * Redis holds only live counters. Time is the caller's clock: replicas are expected to run NTP,
 * and a skew of a few ms only shifts when a token comes back.
 *
 * Takes are batched (ADR 080): the takes that arrive in one turn of the event loop, or while the
 * previous batch is in flight, go to Redis as one EVALSHA of one Lua script that runs them in
 * arrival order, each with exactly the arithmetic of the memory store (rate-counter-store.ts).
 * A script runs atomically, so a batch is as exact as one call per take: N calls for N
 * verdicts would have been serialized by Redis in the same way. At most one batch per store is
 * in flight, so a call waits for at most one round trip before its own.
 *
 * A take may also ask for a lease (ADR 085, rate-leases.ts): up to `want` more tokens of the
 * counter, taken from it now and handed to the replica, granted only while the counter keeps
 * LEASE_HEADROOM times as many; `giveBack` returns a lease's unused tokens.
 */
import { createHash } from 'node:crypto'
import { BarbicanError } from '../common/errors.ts'
import type { RedisClient } from '../store/redis.ts'
import type { RateCounterStore, RateDecision, RateRule, RateTake } from './rate-counter-store.ts'
import {
  LEASE_HEADROOM,
  type LeasedDecision,
  type LeaseSource,
  type LeaseTake,
  MIN_LEASE,
} from './rate-leases.ts'

/**
 * The most takes (calls, each with all its limits) one script call carries. It bounds how long
 * the script holds Redis (Redis runs nothing else meanwhile: 256 takes of a few limits each are
 * well under a millisecond) and the size of one command; takes beyond it wait for the next batch.
 */
export const MAX_TAKES_PER_BATCH = 256

/**
 * KEYS: every counter of every take, in order. ARGV, per take: now, the number of its limits n,
 * then (algorithm, limit, windowMs, want) for each of them. Each counter is a hash {t: tokens or
 * calls left, a: refill time or window start, l: the limit t counts down from}. Returns, per take, the number of its decisions m,
 * then m quadruples {1, remaining, granted, window start or 0} or {0, retryAfterMs, 0, 0}: a
 * take stops at its first refusal, the next take goes on. `granted` tokens (at most `want`) are
 * leased: taken from the counter beyond the call's own.
 */
const TAKE_BATCH = `
local function lease(tokens, want)
  if want < 1 then return 0 end
  local granted = math.min(want, math.floor(tokens / ${LEASE_HEADROOM}))
  if granted < ${MIN_LEASE} then return 0 end
  return granted
end

local function take(key, algorithm, limit, window, now, want)
  local state = redis.call('HMGET', key, 't', 'a', 'l')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  local counted = tonumber(state[3])
  -- A changed limit (a reload): the calls counted still count, against the new limit.
  if tokens ~= nil and counted ~= nil and counted ~= limit then
    tokens = math.min(limit, tokens + limit - counted)
  end
  if algorithm == 'token-bucket' then
    local perMs = limit / window
    if tokens == nil then tokens = limit; at = now end
    tokens = math.min(limit, tokens + math.max(0, now - at) * perMs)
    if tokens < 1 then
      redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(now), 'l', tostring(limit))
      redis.call('PEXPIRE', key, math.ceil((limit - tokens) / perMs) + 1000)
      return 0, math.ceil((1 - tokens) / perMs), 0, 0
    end
    tokens = tokens - 1
    local granted = lease(tokens, want)
    tokens = tokens - granted
    redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(now), 'l', tostring(limit))
    redis.call('PEXPIRE', key, math.ceil((limit - tokens) / perMs) + 1000)
    return 1, math.floor(tokens), granted, 0
  end
  if tokens == nil or now - at >= window then tokens = limit; at = now end
  if tokens < 1 then return 0, math.max(1, at + window - now), 0, 0 end
  tokens = tokens - 1
  local granted = lease(tokens, want)
  tokens = tokens - granted
  redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(at), 'l', tostring(limit))
  redis.call('PEXPIRE', key, math.max(1, at + window - now) + 1000)
  return 1, tokens, granted, at
end

local out = {}
local k = 0
local a = 1
while a <= #ARGV do
  local now = tonumber(ARGV[a])
  local n = tonumber(ARGV[a + 1])
  local countAt = #out + 1
  out[countAt] = 0
  for j = 1, n do
    local p = a + 2 + (j - 1) * 4
    local allowed, value, granted, anchor = take(KEYS[k + j], ARGV[p], tonumber(ARGV[p + 1]),
      tonumber(ARGV[p + 2]), now, tonumber(ARGV[p + 3]))
    out[countAt] = j
    out[#out + 1] = allowed
    out[#out + 1] = value
    out[#out + 1] = granted
    out[#out + 1] = anchor
    if allowed == 0 then break end
  end
  k = k + n
  a = a + 2 + n * 4
end
return out
`
const TAKE_BATCH_SHA = createHash('sha1').update(TAKE_BATCH).digest('hex')

/**
 * KEYS: the counter. ARGV: algorithm, limit, windowMs, tokens, window start (fixed window), now.
 * Puts a lease's unused tokens back: into a token bucket, refilled to now and never above its
 * limit; into a fixed window only if it is still the window they were taken from. A counter
 * that is gone (expired: full again) needs none, nor one whose limit changed since the lease (a
 * reload; at most one lease's tokens go unused). Returns 1 if the tokens went back.
 */
const GIVE_BACK = `
local state = redis.call('HMGET', KEYS[1], 't', 'a', 'l')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil then return 0 end
if state[3] and tonumber(state[3]) ~= tonumber(ARGV[2]) then return 0 end
local limit = tonumber(ARGV[2])
local window = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = tonumber(ARGV[6])
if ARGV[1] == 'token-bucket' then
  local perMs = limit / window
  tokens = math.min(limit, tokens + math.max(0, now - at) * perMs + n)
  redis.call('HSET', KEYS[1], 't', tostring(tokens), 'a', tostring(math.max(at, now)))
  redis.call('PEXPIRE', KEYS[1], math.ceil((limit - tokens) / perMs) + 1000)
  return 1
end
if at ~= tonumber(ARGV[5]) or now - at >= window then return 0 end
redis.call('HSET', KEYS[1], 't', tostring(math.min(limit, tokens + n)))
return 1
`
const GIVE_BACK_SHA = createHash('sha1').update(GIVE_BACK).digest('hex')

/** A take waiting for its batch. */
interface PendingTake {
  readonly entries: readonly (RateTake | LeaseTake)[]
  readonly now: number
  /** Whether the decisions carry their leases (LeasedDecision) or are plain. */
  readonly leasing: boolean
  readonly resolve: (decisions: LeasedDecision[]) => void
  readonly reject: (err: Error) => void
}

export class RedisRateCounterStore implements RateCounterStore, LeaseSource {
  readonly #client: RedisClient
  readonly #prefix: string
  #queue: PendingTake[] = []
  #flushScheduled = false
  #inFlight = false

  /** `prefix` starts every key (config `redis.prefix`); counters live under `PREFIX rate:`. */
  constructor(client: RedisClient, prefix: string) {
    this.#client = client
    this.#prefix = `${prefix}rate:`
  }

  async take(key: string, rule: RateRule, now: number): Promise<RateDecision> {
    const [decision] = await this.takeAll([{ key, rule }], now)
    return decision!
  }

  takeAll(entries: readonly RateTake[], now: number): Promise<RateDecision[]> {
    return this.#enqueue(entries, now, false)
  }

  /** takeAll, each entry asking for up to `want` more tokens as a lease. */
  takeLeasing(entries: readonly LeaseTake[], now: number): Promise<LeasedDecision[]> {
    return this.#enqueue(entries, now, true)
  }

  /**
   * Puts `tokens` unused tokens of a lease on `key` back (GIVE_BACK), one command for the
   * lease. `anchor` is the window start the lease came from (fixed window). Resolves to whether
   * they went back; a failure rejects, and the tokens are lost for their window (under-admission).
   */
  async giveBack(
    key: string,
    rule: RateRule,
    tokens: number,
    anchor: number,
    now: number,
  ): Promise<boolean> {
    const command = [
      'EVALSHA',
      GIVE_BACK_SHA,
      '1',
      this.#prefix + key,
      rule.algorithm,
      String(rule.limit),
      String(rule.windowMs),
      String(tokens),
      String(anchor),
      String(Math.floor(now)),
    ]
    return (await this.#run(command, GIVE_BACK)) === 1
  }

  #enqueue(
    entries: readonly (RateTake | LeaseTake)[],
    now: number,
    leasing: boolean,
  ): Promise<LeasedDecision[]> {
    if (entries.length === 0) return Promise.resolve([])
    return new Promise((resolve, reject) => {
      this.#queue.push({ entries, now, leasing, resolve, reject })
      // A batch in flight sends the queue when it returns; otherwise wait out this turn so the
      // takes of the calls that arrived together leave together.
      if (!this.#inFlight && !this.#flushScheduled) {
        this.#flushScheduled = true
        setImmediate(this.#flush)
      }
    })
  }

  readonly #flush = (): void => {
    this.#flushScheduled = false
    if (this.#queue.length === 0) return
    const batch =
      this.#queue.length <= MAX_TAKES_PER_BATCH
        ? this.#queue
        : this.#queue.splice(0, MAX_TAKES_PER_BATCH)
    if (batch === this.#queue) this.#queue = []
    this.#inFlight = true
    void this.#send(batch)
      // A reply that cannot be read (a bug, not an outage) must not leave calls waiting for
      // ever: the takes still pending are refused; those already settled ignore it.
      .catch((err: Error) => {
        for (const pending of batch) pending.reject(err)
      })
      .finally(() => {
        this.#inFlight = false
        this.#flush()
      })
  }

  /** One script call for `batch`; every take settles, with its decisions or with the failure. */
  async #send(batch: PendingTake[]): Promise<void> {
    const command = this.#command(batch)
    let flat: number[]
    try {
      flat = await this.#run<number[]>(command, TAKE_BATCH)
    } catch (err) {
      // Fail closed, each waiting call alike: without the fleet's count a quota cannot be honoured.
      const failure = new BarbicanError(
        'ERR_STORE_UNAVAILABLE',
        `rate limits cannot be checked: Redis ${(err as Error).message}`,
        { cause: err },
      )
      for (const pending of batch) pending.reject(failure)
      return
    }
    let i = 0
    for (const pending of batch) {
      const count = flat[i++]!
      const decisions: LeasedDecision[] = new Array(count)
      for (let d = 0; d < count; d++, i += 4) {
        decisions[d] =
          flat[i] !== 1
            ? { allowed: false, retryAfterMs: flat[i + 1]! }
            : pending.leasing
              ? {
                  allowed: true,
                  remaining: flat[i + 1]!,
                  granted: flat[i + 2]!,
                  anchor: flat[i + 3]!,
                }
              : { allowed: true, remaining: flat[i + 1]! }
      }
      pending.resolve(decisions)
    }
  }

  /** `EVALSHA sha numkeys keys… args…`, built in one array with its final length. */
  #command(batch: readonly PendingTake[]): string[] {
    let keyCount = 0
    for (const pending of batch) keyCount += pending.entries.length
    const command: string[] = new Array(3 + keyCount * 5 + batch.length * 2)
    command[0] = 'EVALSHA'
    command[1] = TAKE_BATCH_SHA
    command[2] = String(keyCount)
    let k = 3
    let a = 3 + keyCount
    for (const { entries, now } of batch) {
      command[a++] = String(Math.floor(now))
      command[a++] = String(entries.length)
      for (const entry of entries) {
        command[k++] = this.#prefix + entry.key
        command[a++] = entry.rule.algorithm
        command[a++] = String(entry.rule.limit)
        command[a++] = String(entry.rule.windowMs)
        command[a++] = 'want' in entry ? String(entry.want) : '0'
      }
    }
    return command
  }

  /**
   * The raw command, not `client.evalSha`: that one rebuilds the arguments through node-redis's
   * command parser on every call. A server that does not know the script yet (NOSCRIPT: first
   * use, a restart, SCRIPT FLUSH) gets its source once, by EVAL, which also caches it.
   */
  async #run<T>(command: string[], source: string): Promise<T> {
    try {
      return await this.#client.sendCommand<T>(command)
    } catch (err) {
      if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err
      const evalCommand = command.slice()
      evalCommand[0] = 'EVAL'
      evalCommand[1] = source
      return await this.#client.sendCommand<T>(evalCommand)
    }
  }
}
