import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { rateCounterStoreContract } from '../../test/contracts/rate-counter-store.ts'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { openRedis, type RedisClient } from '../store/redis.ts'
import type { RateRule } from './rate-counter-store.ts'
import { MAX_TAKES_PER_BATCH, RedisRateCounterStore } from './redis-rate-counter-store.ts'

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

/** `run`'s result, and the scripts it sent through `c`, by command (EVALSHA or EVAL). */
async function countingScripts<T>(c: RedisClient, run: () => Promise<T>) {
  const counted = { EVALSHA: 0, EVAL: 0 }
  const spied = c as unknown as { sendCommand: (args: string[], ...rest: unknown[]) => unknown }
  const original = spied.sendCommand
  spied.sendCommand = (args, ...rest) => {
    const name = String(args[0]).toUpperCase()
    if (name === 'EVALSHA' || name === 'EVAL') counted[name]++
    return original.call(c, args, ...rest)
  }
  try {
    return { counted, result: await run() }
  } finally {
    spied.sendCommand = original
  }
}

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
    const { counted } = await countingScripts(client, () => store.takeAll(takes, Date.now()))
    assert.deepEqual(counted, { EVALSHA: 1, EVAL: 0 })
    const keys = await client.keys(`${prefixes.at(-1)}*`)
    assert.equal(keys.length, 3, 'three counters written by the one script')
    const ttl = await client.pTTL(keys[0]!)
    assert.ok(ttl > 0 && ttl <= 1200 + 1000, `counters expire (pttl ${ttl})`)
  })

  it('batches the takes of calls that arrive together: one round trip, arrival order', async () => {
    const store = fresh()
    const rule: RateRule = { algorithm: 'fixed-window', limit: 10, windowMs: 60_000 }
    await store.take('warm', rule, Date.now())
    const now = Date.now()
    const { counted, result } = await countingScripts(client, () =>
      Promise.all(Array.from({ length: 16 }, () => store.take('quota', rule, now))),
    )
    assert.deepEqual(counted, { EVALSHA: 1, EVAL: 0 })
    assert.deepEqual(
      result.map((d) => (d.allowed ? d.remaining : -1)),
      [9, 8, 7, 6, 5, 4, 3, 2, 1, 0, -1, -1, -1, -1, -1, -1],
      'the first ten to arrive are admitted, in order',
    )
  })

  it('a refusal in one take of a batch does not stop the takes after it', async () => {
    const store = fresh()
    const one: RateRule = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }
    const now = Date.now()
    await store.take('full', one, now)
    const [first, second] = await Promise.all([
      store.takeAll(
        [
          { key: 'x', rule: one },
          { key: 'full', rule: one },
          { key: 'y', rule: one },
        ],
        now,
      ),
      store.takeAll([{ key: 'y', rule: one }], now),
    ])
    assert.deepEqual(first, [
      { allowed: true, remaining: 0 },
      { allowed: false, retryAfterMs: 60_000 },
    ])
    assert.deepEqual(second, [{ allowed: true, remaining: 0 }], 'y was not counted by the first')
  })

  it(`bounds a batch at ${MAX_TAKES_PER_BATCH} takes; the rest go in the next`, async () => {
    const store = fresh()
    const rule: RateRule = { algorithm: 'token-bucket', limit: 1000, windowMs: 60_000 }
    await store.take('warm', rule, Date.now())
    const n = MAX_TAKES_PER_BATCH + 44
    const { counted, result } = await countingScripts(client, () =>
      Promise.all(Array.from({ length: n }, () => store.take('k', rule, Date.now()))),
    )
    assert.deepEqual(counted, { EVALSHA: 2, EVAL: 0 })
    assert.equal(result.filter((d) => d.allowed).length, n)
  })

  it('a connection lost fails every waiting call closed with ERR_STORE_UNAVAILABLE, never hangs', async () => {
    const own = await openRedis(REDIS_URL)
    const store = new RedisRateCounterStore(own, freshRedisPrefix())
    const rule: RateRule = { algorithm: 'token-bucket', limit: 5, windowMs: 1000 }
    own.destroy()
    const waiting = [1, 2, 3].map((i) => store.take(`k${i}`, rule, Date.now()))
    for (const call of waiting) {
      await assert.rejects(call, (err: Error & { code?: string }) => {
        assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
        assert.match(err.message, /rate limits cannot be checked/)
        return true
      })
    }
  })

  it('a server that is down fails the open with ERR_STORE_UNAVAILABLE', async () => {
    await assert.rejects(openRedis('redis://127.0.0.1:1'), (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
      return true
    })
  })
})
