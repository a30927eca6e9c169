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
 */
import { createHash } from 'node:crypto'
import { BarbicanError } from '../common/errors.ts'
import type { RedisClient } from '../store/redis.ts'
import type { RateCounterStore, RateDecision, RateRule, RateTake } from './rate-counter-store.ts'

/**
 * The most takes (calls, each with all its limits) one script call carries. It bounds how long
 * the script holds Redis (Redis runs nothing else meanwhile: 256 takes of a few limits each are
 * well under a millisecond) and the size of one command; takes beyond it wait for the next batch.
 */
export const MAX_TAKES_PER_BATCH = 256

/**
 * KEYS: every counter of every take, in order. ARGV, per take: now, the number of its limits n,
 * then (algorithm, limit, windowMs) for each of them. Each counter is a hash {t: tokens or calls
 * left, a: refill time or window start}. Returns, per take, the number of its decisions m, then
 * m pairs {1, remaining} or {0, retryAfterMs}: a take stops at its first refusal, the next take
 * goes on.
 */
const TAKE_BATCH = `
local function take(key, algorithm, limit, window, now)
  local state = redis.call('HMGET', key, 't', 'a')
  local tokens = tonumber(state[1])
  local at = tonumber(state[2])
  if algorithm == 'token-bucket' then
    local perMs = limit / window
    if tokens == nil then tokens = limit; at = now end
    tokens = math.min(limit, tokens + math.max(0, now - at) * perMs)
    if tokens < 1 then
      redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(now))
      redis.call('PEXPIRE', key, math.ceil((limit - tokens) / perMs) + 1000)
      return 0, math.ceil((1 - tokens) / perMs)
    end
    tokens = tokens - 1
    redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(now))
    redis.call('PEXPIRE', key, math.ceil((limit - tokens) / perMs) + 1000)
    return 1, math.floor(tokens)
  end
  if tokens == nil or now - at >= window then tokens = limit; at = now end
  if tokens < 1 then return 0, math.max(1, at + window - now) end
  tokens = tokens - 1
  redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(at))
  redis.call('PEXPIRE', key, math.max(1, at + window - now) + 1000)
  return 1, tokens
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
    local p = a + 2 + (j - 1) * 3
    local allowed, value = take(KEYS[k + j], ARGV[p], tonumber(ARGV[p + 1]), tonumber(ARGV[p + 2]), now)
    out[countAt] = j
    out[#out + 1] = allowed
    out[#out + 1] = value
    if allowed == 0 then break end
  end
  k = k + n
  a = a + 2 + n * 3
end
return out
`
const TAKE_BATCH_SHA = createHash('sha1').update(TAKE_BATCH).digest('hex')

/** A take waiting for its batch. */
interface PendingTake {
  readonly entries: readonly RateTake[]
  readonly now: number
  readonly resolve: (decisions: RateDecision[]) => void
  readonly reject: (err: Error) => void
}

export class RedisRateCounterStore implements RateCounterStore {
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
    if (entries.length === 0) return Promise.resolve([])
    return new Promise((resolve, reject) => {
      this.#queue.push({ entries, now, resolve, reject })
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
      flat = await this.#run(command)
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
      const decisions: RateDecision[] = new Array(count)
      for (let d = 0; d < count; d++, i += 2) {
        decisions[d] =
          flat[i] === 1
            ? { allowed: true, remaining: flat[i + 1]! }
            : { allowed: false, retryAfterMs: flat[i + 1]! }
      }
      pending.resolve(decisions)
    }
  }

  /** `EVALSHA sha numkeys keys… args…`, built in one array with its final length. */
  #command(batch: readonly PendingTake[]): string[] {
    let keyCount = 0
    for (const pending of batch) keyCount += pending.entries.length
    const command: string[] = new Array(3 + keyCount * 4 + batch.length * 2)
    command[0] = 'EVALSHA'
    command[1] = TAKE_BATCH_SHA
    command[2] = String(keyCount)
    let k = 3
    let a = 3 + keyCount
    for (const { entries, now } of batch) {
      command[a++] = String(Math.floor(now))
      command[a++] = String(entries.length)
      for (const { key, rule } of entries) {
        command[k++] = this.#prefix + key
        command[a++] = rule.algorithm
        command[a++] = String(rule.limit)
        command[a++] = String(rule.windowMs)
      }
    }
    return command
  }

  /**
   * The raw command, not `client.evalSha`: that one rebuilds the arguments through node-redis's
   * command parser on every call. A server that does not know the script yet (NOSCRIPT: first
   * use, a restart, SCRIPT FLUSH) gets its source once, by EVAL, which also caches it.
   */
  async #run(command: string[]): Promise<number[]> {
    try {
      return await this.#client.sendCommand<number[]>(command)
    } catch (err) {
      if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err
      const evalCommand = command.slice()
      evalCommand[0] = 'EVAL'
      evalCommand[1] = TAKE_BATCH
      return await this.#client.sendCommand<number[]>(evalCommand)
    }
  }
}
