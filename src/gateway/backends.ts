/**
 * The shared ephemeral state of a fleet (ADR 055): the Redis connection `redis:` or
 * BARBICAN_REDIS_URL names, opened once at start and closed at stop, and the stores built on
 * it. Without Redis everything stays in process memory, exactly as for a single gateway.
 */
import type { Config } from '../config/config.ts'
import {
  type AnswerLedger,
  MemoryAnswerLedger,
  RedisAnswerLedger,
} from '../policies/answer-ledger.ts'
import { MemoryRateCounterStore, type RateCounterStore } from '../policies/rate-counter-store.ts'
import { RedisRateCounterStore } from '../policies/redis-rate-counter-store.ts'
import type { RedisClient } from '../store/redis.ts'

export interface Backends {
  /** The connection and key prefix; undefined: memory only. */
  readonly redis?: { readonly client: RedisClient; readonly prefix: string } | undefined
  close(): Promise<void>
}

/** Nothing shared: the single-process default. */
export const NO_BACKENDS: Backends = { close: async () => {} }

/** Connects what the configuration names; a server that is down fails here, at start. */
export async function openBackends(config: Config): Promise<Backends> {
  if (config.redis === undefined) return NO_BACKENDS
  // Loaded here only: a gateway without Redis never reads the redis package.
  const { openRedis } = await import('../store/redis.ts')
  const client = await openRedis(config.redis.url)
  return {
    redis: { client, prefix: config.redis.prefix },
    async close() {
      client.destroy()
    },
  }
}

/** Where rate-limit counters live: Redis when configured (fleet-wide), else this process. */
export function rateCounterStoreOf(backends: Backends): RateCounterStore {
  if (backends.redis === undefined) return new MemoryRateCounterStore()
  return new RedisRateCounterStore(backends.redis.client, backends.redis.prefix)
}

/** Where answered confirmations are kept: Redis when configured (single-use fleet-wide). */
export function answerLedgerOf(backends: Backends): AnswerLedger {
  if (backends.redis === undefined) return new MemoryAnswerLedger()
  return new RedisAnswerLedger(backends.redis.client, backends.redis.prefix)
}
