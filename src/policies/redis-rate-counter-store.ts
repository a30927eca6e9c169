/**
 * Rate-limit counters in Redis (ADR 055): one count for the whole fleet, so a limit of N per
 * minute admits N across every replica. A call's limits are taken by one Lua script, atomically
 * and in one round trip (EVALSHA), with exactly the arithmetic of the memory store
 * (rate-counter-store.ts). Each key expires once it would read as new again, so Redis holds
 * only live counters. Time is the caller's clock: replicas are expected to run NTP, and a skew
 * of a few ms only shifts when a token comes back.
 */
import { BarbicanError } from '../common/errors.ts'
import { type RedisClient, RedisScript } from '../store/redis.ts'
import type { RateCounterStore, RateDecision, RateRule, RateTake } from './rate-counter-store.ts'

/**
 * KEYS: the counters. ARGV: now, then (algorithm, limit, windowMs) per key. Each counter is a
 * hash {t: tokens or calls left, a: refill time or window start}. Returns one flat pair per
 * decision, {1, remaining} or {0, retryAfterMs}, stopping at the first refusal.
 */
const TAKE_ALL = new RedisScript(`
local now = tonumber(ARGV[1])
local out = {}
for i, key in ipairs(KEYS) do
  local algorithm = ARGV[i * 3 - 1]
  local limit = tonumber(ARGV[i * 3])
  local window = tonumber(ARGV[i * 3 + 1])
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
      out[#out + 1] = 0
      out[#out + 1] = math.ceil((1 - tokens) / perMs)
      return out
    end
    tokens = tokens - 1
    redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(now))
    redis.call('PEXPIRE', key, math.ceil((limit - tokens) / perMs) + 1000)
    out[#out + 1] = 1
    out[#out + 1] = math.floor(tokens)
  else
    if tokens == nil or now - at >= window then tokens = limit; at = now end
    if tokens < 1 then
      out[#out + 1] = 0
      out[#out + 1] = math.max(1, at + window - now)
      return out
    end
    tokens = tokens - 1
    redis.call('HSET', key, 't', tostring(tokens), 'a', tostring(at))
    redis.call('PEXPIRE', key, math.max(1, at + window - now) + 1000)
    out[#out + 1] = 1
    out[#out + 1] = tokens
  end
end
return out
`)

export class RedisRateCounterStore implements RateCounterStore {
  readonly #client: RedisClient
  readonly #prefix: string

  /** `prefix` starts every key (config `redis.prefix`); counters live under `PREFIX rate:`. */
  constructor(client: RedisClient, prefix: string) {
    this.#client = client
    this.#prefix = `${prefix}rate:`
  }

  async take(key: string, rule: RateRule, now: number): Promise<RateDecision> {
    const [decision] = await this.takeAll([{ key, rule }], now)
    return decision!
  }

  async takeAll(entries: readonly RateTake[], now: number): Promise<RateDecision[]> {
    if (entries.length === 0) return []
    const keys = entries.map((e) => this.#prefix + e.key)
    const args = [String(Math.floor(now))]
    for (const { rule } of entries) {
      args.push(rule.algorithm, String(rule.limit), String(rule.windowMs))
    }
    let flat: number[]
    try {
      flat = (await TAKE_ALL.run(this.#client, keys, args)) as number[]
    } catch (err) {
      // Fail closed: without the fleet's count a quota cannot be honoured.
      throw new BarbicanError(
        'ERR_STORE_UNAVAILABLE',
        `rate limits cannot be checked: Redis ${(err as Error).message}`,
        { cause: err },
      )
    }
    const decisions: RateDecision[] = []
    for (let i = 0; i < flat.length; i += 2) {
      decisions.push(
        flat[i] === 1
          ? { allowed: true, remaining: Number(flat[i + 1]) }
          : { allowed: false, retryAfterMs: Number(flat[i + 1]) },
      )
    }
    return decisions
  }
}
