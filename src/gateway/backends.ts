/**
 * The shared ephemeral state of a fleet (ADR 055): the Redis connection `redis:` or
 * BARBICAN_REDIS_URL names, opened once at start and closed at stop, and the stores built on
 * it. Without Redis everything stays in process memory, exactly as for a single gateway.
 */

import type { Config } from '../config/config.ts'
import { DEFAULT_QUOTA_LEASE_MS } from '../config/defaults.ts'
import {
  type AnswerLedger,
  MemoryAnswerLedger,
  RedisAnswerLedger,
} from '../policies/answer-ledger.ts'
import { MemoryRateCounterStore, type RateCounterStore } from '../policies/rate-counter-store.ts'
import { LeasingRateCounterStore } from '../policies/rate-leases.ts'
import { RedisRateCounterStore } from '../policies/redis-rate-counter-store.ts'
import type { RedisClient } from '../store/redis.ts'

export interface Backends {
  /**
   * The connection, key prefix and quota lease life; undefined: memory only. `leases`: the
   * leasing store of each key prefix (the gateway's, each tenant's), built once and reused by
   * every plan made from a reloaded configuration; their outstanding leases go back at close.
   */
  readonly redis?:
    | {
        readonly client: RedisClient
        readonly prefix: string
        readonly quotaLeaseMs: number
        readonly leases: Map<string, LeasingRateCounterStore>
      }
    | undefined
  close(): Promise<void>
}

/** How long a stopping replica waits for Redis to take its unused lease tokens back. */
const GIVE_BACK_AT_CLOSE_MS = 1000

/** Nothing shared: the single-process default. */
export const NO_BACKENDS: Backends = { close: async () => {} }

/** Connects what the configuration names; a server that is down fails here, at start. */
export async function openBackends(config: Config): Promise<Backends> {
  if (config.redis === undefined) return NO_BACKENDS
  // Loaded here only: a gateway without Redis never reads the redis package.
  const { openRedis } = await import('../store/redis.ts')
  const client = await openRedis(config.redis.url)
  const leases = new Map<string, LeasingRateCounterStore>()
  return {
    redis: {
      client,
      prefix: config.redis.prefix,
      quotaLeaseMs: config.redis.quotaLeaseMs ?? DEFAULT_QUOTA_LEASE_MS,
      leases,
    },
    async close() {
      // Unused lease tokens go back first (bounded), so a rolling update strands none (ADR 085).
      let timer: NodeJS.Timeout | undefined
      await Promise.race([
        Promise.all([...leases.values()].map((store) => store.close())),
        new Promise((resolve) => {
          timer = setTimeout(resolve, GIVE_BACK_AT_CLOSE_MS)
        }),
      ])
      clearTimeout(timer)
      client.destroy()
    },
  }
}

/**
 * Where rate-limit counters live: Redis when configured (fleet-wide), with leases for busy keys
 * unless `redis.quotaLeaseMs` is 0 (ADR 085), else this process.
 *
 * One leasing store per key prefix for the life of the backends: each reload builds a new plan,
 * and a store per plan would pile up (one per reload, each holding its keys' state until stop)
 * and make a reload hand its live leases back only to lease them again. The store keeps no
 * configuration of its own: a key whose rule changed drops its lease (rate-leases.ts).
 */
export function rateCounterStoreOf(backends: Backends): RateCounterStore {
  if (backends.redis === undefined) return new MemoryRateCounterStore()
  const { client, prefix, quotaLeaseMs, leases } = backends.redis
  if (quotaLeaseMs <= 0) return new RedisRateCounterStore(client, prefix)
  let store = leases.get(prefix)
  if (store === undefined) {
    store = new LeasingRateCounterStore(new RedisRateCounterStore(client, prefix), quotaLeaseMs)
    leases.set(prefix, store)
  }
  return store
}

/** Where answered confirmations are kept: Redis when configured (single-use fleet-wide). */
export function answerLedgerOf(backends: Backends): AnswerLedger {
  if (backends.redis === undefined) return new MemoryAnswerLedger()
  return new RedisAnswerLedger(backends.redis.client, backends.redis.prefix)
}
