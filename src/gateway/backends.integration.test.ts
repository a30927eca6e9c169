/**
 * The fleet backends at stop: a replica that stops gives its unused quota-lease tokens back
 * before it closes its Redis connection, so a rolling update strands none (ADR 085). Reloads
 * reuse the leasing store instead of piling up one per reloaded configuration.
 */
import assert from 'node:assert/strict'
import { after, test } from 'node:test'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import type { Config } from '../config/config.ts'
import { parseConfigText } from '../config/load.ts'
import type { RateRule } from '../policies/rate-counter-store.ts'
import { RedisRateCounterStore } from '../policies/redis-rate-counter-store.ts'
import { openRedis } from '../store/redis.ts'
import { silentLogger } from '../telemetry/log.ts'
import { openBackends, rateCounterStoreOf } from './backends.ts'
import { planFromConfig } from './plan.ts'

const client = await openRedis(REDIS_URL)
after(() => client.destroy())

test('closing the backends gives back the leases of the quota stores built on them', async () => {
  const prefix = freshRedisPrefix()
  const backends = await openBackends({
    redis: { url: REDIS_URL, prefix, quotaLeaseMs: 1000 },
  } as unknown as Config)
  const store = rateCounterStoreOf(backends)
  const rule: RateRule = { algorithm: 'fixed-window', limit: 100_000, windowMs: 60_000 }
  // Calls until the counter in Redis shows more taken than this replica admitted: a lease.
  const counter = async () => {
    const [key] = await client.keys(`${prefix}*`)
    return key === undefined ? rule.limit : Number(await client.hGet(key, 't'))
  }
  let admitted = 0
  const deadline = Date.now() + 5000
  while (rule.limit - (await counter()) === admitted && Date.now() < deadline) {
    if ((await store.take('k', rule, Date.now())).allowed) admitted++
  }
  assert.ok(rule.limit - (await counter()) > admitted, 'a lease is outstanding')
  await backends.close() // well within the lease's 1 s life
  assert.equal(rule.limit - (await counter()), admitted, 'every unused token went back')
  const other = new RedisRateCounterStore(client, prefix)
  assert.equal((await other.take('k', rule, Date.now())).allowed, true)
})

test('plans from reloaded configurations share one leasing store per key prefix', async () => {
  const prefix = freshRedisPrefix()
  const backends = await openBackends({
    redis: { url: REDIS_URL, prefix, quotaLeaseMs: 1000 },
  } as unknown as Config)
  const text = (limit: number) =>
    [
      'upstreams: { e: { command: node, args: [-e, ""] } }',
      `rateLimits: { all: { limit: ${limit}, windowMs: 60000 } }`,
    ].join('\n')
  // Start-up, then three reloads, each building a plan (src/cli/serve.ts, apply).
  for (const limit of [100, 200, 300, 400]) {
    planFromConfig(parseConfigText(text(limit)).config, silentLogger, undefined, backends)
  }
  const leases = backends.redis!.leases
  assert.equal(leases.size, 1, 'one store, however many reloads')
  assert.equal(rateCounterStoreOf(backends), rateCounterStoreOf(backends))
  // A tenant's quotas are keyed apart (src/cli/serve.ts): a store of its own.
  const tenant = { ...backends, redis: { ...backends.redis!, prefix: `${prefix}tenant.t:` } }
  assert.notEqual(rateCounterStoreOf(tenant), rateCounterStoreOf(backends))
  assert.equal(leases.size, 2)
  await backends.close()
})
