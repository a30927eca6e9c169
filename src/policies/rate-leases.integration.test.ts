import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { rateCounterStoreContract } from '../../test/contracts/rate-counter-store.ts'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { openRedis, type RedisClient } from '../store/redis.ts'
import type { RateRule } from './rate-counter-store.ts'
import { type LeasedDecision, type LeaseTake, LeasingRateCounterStore } from './rate-leases.ts'
import { RedisRateCounterStore } from './redis-rate-counter-store.ts'

let client: RedisClient
const prefixes: string[] = []
const opened: RedisClient[] = []
before(async () => {
  client = await openRedis(REDIS_URL)
})
after(async () => {
  for (const prefix of prefixes) {
    const keys = await client.keys(`${prefix}*`)
    if (keys.length > 0) await client.del(keys)
  }
  for (const c of opened) c.destroy()
  client.destroy()
})

function freshPrefix(): string {
  const prefix = freshRedisPrefix()
  prefixes.push(prefix)
  return prefix
}

/** The Redis store, counting the tokens it leased and the script calls it made. */
class Counted extends RedisRateCounterStore {
  granted = 0
  /** Decisions that carried a lease. */
  leases = 0
  takes = 0
  givenBack = 0
  override async takeLeasing(entries: readonly LeaseTake[], now: number) {
    this.takes++
    const decisions: LeasedDecision[] = await super.takeLeasing(entries, now)
    for (const d of decisions) {
      if (!d.allowed || (d.granted ?? 0) === 0) continue
      this.granted += d.granted!
      this.leases++
    }
    return decisions
  }
  override async giveBack(
    key: string,
    rule: RateRule,
    tokens: number,
    anchor: number,
    now: number,
  ) {
    this.givenBack += tokens
    return await super.giveBack(key, rule, tokens, anchor, now)
  }
}

/** Three replicas: a connection, a Redis store and a leasing store each, on one prefix. */
async function replicas(leaseMs = 100) {
  const prefix = freshPrefix()
  return await Promise.all(
    [1, 2, 3].map(async () => {
      const c = await openRedis(REDIS_URL)
      opened.push(c)
      const redis = new Counted(c, prefix)
      return { client: c, redis, store: new LeasingRateCounterStore(redis, leaseMs) }
    }),
  )
}

/** Takes on `key` every ~`gapMs` for `ms`, `workers` at a time; how many were admitted. */
async function drive(
  store: LeasingRateCounterStore,
  key: string,
  rule: RateRule,
  ms: number,
  workers = 1,
  gapMs = 1,
): Promise<{ calls: number; admitted: number }> {
  const end = Date.now() + ms
  let calls = 0
  let admitted = 0
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (Date.now() < end) {
        calls++
        if ((await store.take(key, rule, Date.now())).allowed) admitted++
        if (gapMs > 0) await sleep(gapMs)
        else await new Promise((resolve) => setImmediate(resolve))
      }
    }),
  )
  return { calls, admitted }
}

/**
 * Takes on `key` one at a time until the store holds a lease (at most 5 s): a lease just granted
 * has at least one unused token whatever the machine's speed, so tests that need one don't
 * depend on how fast calls run. Returns how many of its takes were admitted.
 */
async function driveUntilLeased(
  replica: { store: LeasingRateCounterStore; redis: Counted },
  key: string,
  rule: RateRule,
): Promise<number> {
  const deadline = Date.now() + 5000
  const before = replica.redis.granted
  let admitted = 0
  while (replica.redis.granted === before && Date.now() < deadline) {
    if ((await replica.store.take(key, rule, Date.now())).allowed) admitted++
    // Paced (about 1 ms apart): on a fast machine, back-to-back takes could use up a small
    // limit within the first rate sample (100 ms), and an exhausted counter never leases.
    await sleep(1)
  }
  assert.ok(replica.redis.granted > before, `${key} was leased`)
  return admitted
}

/** Exactly `n` takes on `key`, `workers` at a time, as fast as they go; how many were admitted. */
async function driveCalls(
  store: LeasingRateCounterStore,
  key: string,
  rule: RateRule,
  n: number,
  workers: number,
): Promise<{ calls: number; admitted: number }> {
  let calls = 0
  let admitted = 0
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (calls < n) {
        calls++
        if ((await store.take(key, rule, Date.now())).allowed) admitted++
      }
    }),
  )
  return { calls, admitted }
}

rateCounterStoreContract('redis with leases', () => {
  return new LeasingRateCounterStore(new RedisRateCounterStore(client, freshPrefix()), 200)
})

describe('LeasingRateCounterStore on Redis', () => {
  it('three replicas hammering one key with leases admit exactly the limit, never more', async () => {
    const fleet = await replicas()
    const rule: RateRule = { algorithm: 'fixed-window', limit: 3000, windowMs: 60_000 }
    // A count, not a time: 4,500 calls drive the key past its limit however slow the machine.
    const runs = await Promise.all(
      fleet.map(({ store }) => driveCalls(store, 'hot', rule, 1500, 4)),
    )
    const admitted = runs.reduce((n, r) => n + r.admitted, 0)
    const calls = runs.reduce((n, r) => n + r.calls, 0)
    const granted = fleet.reduce((n, r) => n + r.redis.granted, 0)
    assert.ok(calls > rule.limit, `the key was driven past its limit (${calls} calls)`)
    assert.ok(granted > 0, 'leases were granted')
    assert.ok(admitted <= rule.limit, `admitted ${admitted} of ${rule.limit}`)
    // Once the leases have expired and gone back, the fleet can take exactly what is left.
    await sleep(300)
    let more = 0
    for (let i = 0; i < rule.limit - admitted + 10; i++) {
      if ((await fleet[i % 3]!.store.take('hot', rule, Date.now())).allowed) more++
    }
    assert.equal(admitted + more, rule.limit, `${admitted} + ${more} admitted in total`)
  })

  it('a token bucket under leases never admits more than its tokens', async () => {
    const fleet = await replicas()
    // Paced (1 ms between a worker's takes) and sized so the bucket outlasts the first rate
    // sample (SAMPLE_MS): taken back to back on a fast machine, 2000 tokens were gone before any
    // replica knew the key's rate, so no lease was ever granted and the test proved nothing.
    const rule: RateRule = { algorithm: 'token-bucket', limit: 5000, windowMs: 3_600_000 }
    const started = Date.now()
    const runs = await Promise.all(fleet.map(({ store }) => drive(store, 'hot', rule, 1500, 4, 1)))
    const calls = runs.reduce((n, r) => n + r.calls, 0)
    assert.ok(calls > rule.limit, `the bucket ran out (${calls} calls for ${rule.limit} tokens)`)
    const admitted = runs.reduce((n, r) => n + r.admitted, 0)
    assert.ok(fleet.reduce((n, r) => n + r.redis.granted, 0) > 0, 'leases were granted')
    const refilled = Math.ceil(((Date.now() - started) * rule.limit) / rule.windowMs)
    assert.ok(
      admitted <= rule.limit + refilled,
      `admitted ${admitted} of ${rule.limit} + ${refilled}`,
    )
  })

  it('a low-limit key never leases: a limit of N across three replicas admits N', async () => {
    const fleet = await replicas()
    const rule: RateRule = { algorithm: 'fixed-window', limit: 25, windowMs: 60_000 }
    const runs = await Promise.all(fleet.map(({ store }) => drive(store, 'low', rule, 600, 2)))
    assert.equal(
      fleet.reduce((n, r) => n + r.redis.granted, 0),
      0,
      'no lease',
    )
    assert.equal(
      runs.reduce((n, r) => n + r.admitted, 0),
      25,
    )
  })

  it('a key that sees a few calls a second never leases', async () => {
    const [one] = await replicas()
    const rule: RateRule = { algorithm: 'token-bucket', limit: 1_000_000, windowMs: 60_000 }
    await drive(one!.store, 'slow', rule, 600, 1, 50)
    assert.equal(one!.redis.granted, 0)
  })

  it('unused lease tokens go back when the lease expires, and another replica uses them', async () => {
    const [a, b] = await replicas()
    const rule: RateRule = { algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 }
    const admitted = await driveUntilLeased(a!, 'k', rule)
    await sleep(250) // the lease (100 ms) has expired and the sweep gave it back
    assert.ok(a!.redis.givenBack > 0, 'tokens were given back')
    let more = 0
    for (let i = 0; i < 1000; i++) {
      if ((await b!.store.take('k', rule, Date.now())).allowed) more++
    }
    assert.equal(admitted + more, 1000, `A admitted ${admitted}, B ${more}`)
  })

  it('a replica that stops gives its unused lease tokens back before it goes', async () => {
    const [a, b] = await replicas(1000)
    const rule: RateRule = { algorithm: 'fixed-window', limit: 1000, windowMs: 60_000 }
    const admitted = await driveUntilLeased(a!, 'k', rule)
    const before = a!.redis.givenBack
    await a!.store.close() // long before the 1 s lease would expire
    assert.ok(a!.redis.givenBack > before, 'tokens were given back at close')
    let more = 0
    for (let i = 0; i < 1000; i++) {
      if ((await b!.store.take('k', rule, Date.now())).allowed) more++
    }
    assert.equal(admitted + more, 1000, `A admitted ${admitted}, B ${more}`)
  })

  it('a token given back never fills a bucket above its limit', async () => {
    const [a] = await replicas()
    const rule: RateRule = { algorithm: 'token-bucket', limit: 400, windowMs: 100 }
    // Calls until the first lease, then none: that lease holds unused tokens, and the bucket is
    // full again before it expires.
    await driveUntilLeased(a!, 'k', rule)
    await sleep(250)
    assert.ok(a!.redis.givenBack > 0, 'tokens were given back')
    const keys = await client.keys(`${prefixes.at(-1)}*`)
    const tokens = Number(await client.hGet(keys[0]!, 't'))
    assert.ok(tokens <= rule.limit, `bucket holds ${tokens} of ${rule.limit}`)
  })

  it('at a sustained rate and a high limit, well under 0.1 script calls per call at c=1', async () => {
    const [a] = await replicas(200)
    const rule: RateRule = { algorithm: 'fixed-window', limit: 1_000_000_000, windowMs: 60_000 }
    await driveUntilLeased(a!, 'k', rule) // the key's rate is measured
    const before = a!.redis.takes
    const { calls } = await driveCalls(a!.store, 'k', rule, 1500, 1)
    const perCall = (a!.redis.takes - before) / calls
    assert.ok(perCall < 0.1, `${perCall} script calls per call`)
  })

  it('calls that arrive while a lease is asked for take from it: one script call per lease at c=16', async () => {
    const [a] = await replicas(200)
    const rule: RateRule = { algorithm: 'fixed-window', limit: 1_000_000_000, windowMs: 60_000 }
    await driveUntilLeased(a!, 'k', rule)
    const takes = a!.redis.takes
    const leases = a!.redis.leases
    const { admitted } = await driveCalls(a!.store, 'k', rule, 4000, 16)
    assert.ok(admitted >= 4000)
    const scriptCalls = a!.redis.takes - takes
    const leased = a!.redis.leases - leases
    assert.ok(leased > 0, 'leases were granted')
    // Each lease is asked for by one call; the 15 others that run out with it wait for it
    // instead of taking one by one in a second script call.
    assert.ok(scriptCalls <= leased + 2, `${scriptCalls} script calls for ${leased} leases`)
  })

  it('a call served from a live lease needs no Redis; once it expires, the call fails closed', async () => {
    const [a] = await replicas(1000)
    const rule: RateRule = { algorithm: 'fixed-window', limit: 1_000_000, windowMs: 60_000 }
    await driveUntilLeased(a!, 'k', rule)
    a!.client.destroy()
    assert.equal((await a!.store.take('k', rule, Date.now())).allowed, true)
    await sleep(1100)
    await assert.rejects(a!.store.take('k', rule, Date.now()), { code: 'ERR_STORE_UNAVAILABLE' })
  })

  it('takeAll: a leased limit before a refusing one counts; the ones after it do not', async () => {
    const [a] = await replicas(1000)
    const hot: RateRule = { algorithm: 'fixed-window', limit: 1_000_000, windowMs: 60_000 }
    const one: RateRule = { algorithm: 'fixed-window', limit: 1, windowMs: 60_000 }
    await driveUntilLeased(a!, 'hot', hot)
    const now = Date.now()
    const first = await a!.store.takeAll(
      [
        { key: 'hot', rule: hot },
        { key: 'one', rule: one },
      ],
      now,
    )
    assert.deepEqual(
      first.map((d) => d.allowed),
      [true, true],
    )
    const second = await a!.store.takeAll(
      [
        { key: 'hot', rule: hot },
        { key: 'one', rule: one },
        { key: 'other', rule: one },
      ],
      now,
    )
    assert.deepEqual(second.at(-1), { allowed: false, retryAfterMs: 60_000 })
    assert.equal(second.length, 2)
    assert.equal((await a!.store.take('other', one, now)).allowed, true, 'other was not counted')
  })
})
