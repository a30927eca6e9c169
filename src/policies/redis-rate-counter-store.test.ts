import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { openRedis, type RedisClient } from '../store/redis.ts'
import { rateCounterStoreContract } from './rate-counter-store.contract.ts'
import type { RateRule } from './rate-counter-store.ts'
import { RedisRateCounterStore } from './redis-rate-counter-store.ts'

let client: RedisClient
const prefixes: string[] = []
before(async () => {
  client = await openRedis(REDIS_URL)
})
after(async () => {
  for (const prefix of prefixes) {
    const keys = await client.keys(`${prefix}*`)
    if (keys.length > 0) await client.del(keys)
  }
  client.destroy()
})

/** A store under a prefix of its own, so each test starts from no counters. */
function fresh(): RedisRateCounterStore {
  const prefix = freshRedisPrefix()
  prefixes.push(prefix)
  return new RedisRateCounterStore(client, prefix)
}

rateCounterStoreContract('redis', fresh)

describe('RedisRateCounterStore', () => {
  it('counts fleet-wide: three replicas sharing a limit of 10 admit 10 in total', async () => {
    const prefix = freshRedisPrefix()
    prefixes.push(prefix)
    const replicas = await Promise.all([1, 2, 3].map(() => openRedis(REDIS_URL)))
    try {
      const stores = replicas.map((c) => new RedisRateCounterStore(c, prefix))
      const rule: RateRule = { algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }
      const now = Date.now()
      const decisions = await Promise.all(
        Array.from({ length: 30 }, (_, i) => stores[i % 3]!.take('quota', rule, now)),
      )
      assert.equal(decisions.filter((d) => d.allowed).length, 10)
    } finally {
      for (const c of replicas) c.destroy()
    }
  })

  it('makes one round trip for all the limits of a call, and keys expire', async () => {
    const store = fresh()
    const rule: RateRule = { algorithm: 'token-bucket', limit: 5, windowMs: 1000 }
    const takes = ['a', 'b', 'c'].map((key) => ({ key, rule }))
    await store.takeAll(takes, Date.now()) // loads the script on this connection if needed
    const counted = { evalSha: 0, eval: 0 }
    const spied = client as unknown as Record<'evalSha' | 'eval', (...a: unknown[]) => unknown>
    const originals = { evalSha: spied.evalSha, eval: spied.eval }
    for (const name of ['evalSha', 'eval'] as const) {
      spied[name] = (...args: unknown[]) => {
        counted[name]++
        return originals[name].apply(client, args)
      }
    }
    try {
      await store.takeAll(takes, Date.now())
    } finally {
      Object.assign(spied, originals)
    }
    assert.deepEqual(counted, { evalSha: 1, eval: 0 })
    const keys = await client.keys(`${prefixes.at(-1)}*`)
    assert.equal(keys.length, 3, 'three counters written by the one script')
    const ttl = await client.pTTL(keys[0]!)
    assert.ok(ttl > 0 && ttl <= 1200 + 1000, `counters expire (pttl ${ttl})`)
  })

  it('a connection lost fails the call closed with ERR_STORE_UNAVAILABLE, never hangs', async () => {
    const own = await openRedis(REDIS_URL)
    const store = new RedisRateCounterStore(own, freshRedisPrefix())
    const rule: RateRule = { algorithm: 'token-bucket', limit: 5, windowMs: 1000 }
    own.destroy()
    await assert.rejects(store.take('k', rule, Date.now()), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
      assert.match(err.message, /rate limits cannot be checked/)
      return true
    })
  })

  it('a server that is down fails the open with ERR_STORE_UNAVAILABLE', async () => {
    await assert.rejects(openRedis('redis://127.0.0.1:1'), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
      return true
    })
  })
})
