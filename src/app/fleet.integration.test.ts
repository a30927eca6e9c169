import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, it } from 'node:test'
import { stateKeyFromEnv } from '../bridge/request-state.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { advertisedUrl, joinFleet } from './fleet.ts'

const REDIS = process.env.BARBICAN_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const quiet = jsonLogger({ write: () => {} })

describe('joining a fleet', () => {
  it('stays a single process without Redis', async () => {
    const env: NodeJS.ProcessEnv = {}
    assert.equal(await joinFleet(undefined, env, quiet), undefined)
    assert.equal(env.BARBICAN_STATE_KEY, undefined)
  })

  it('gives every replica without a configured key the one held in Redis', async () => {
    const redis = { url: REDIS, prefix: `barbican-test-${randomBytes(6).toString('hex')}:` }
    const first: NodeJS.ProcessEnv = {}
    const second: NodeJS.ProcessEnv = {}
    const a = await joinFleet(redis, first, quiet)
    const b = await joinFleet(redis, second, quiet)
    try {
      assert.ok(first.BARBICAN_STATE_KEY)
      assert.equal(second.BARBICAN_STATE_KEY, first.BARBICAN_STATE_KEY)
      assert.deepEqual(stateKeyFromEnv(first), stateKeyFromEnv(second))
    } finally {
      await a?.leave()
      await b?.leave()
    }
  })

  it('keeps a configured key', async () => {
    const key = randomBytes(32).toString('hex')
    const env: NodeJS.ProcessEnv = { BARBICAN_STATE_KEY: key }
    const redis = { url: REDIS, prefix: `barbican-test-${randomBytes(6).toString('hex')}:` }
    const cluster = await joinFleet(redis, env, quiet)
    await cluster?.leave()
    assert.equal(env.BARBICAN_STATE_KEY, key)
  })

  it('advertises BARBICAN_ADVERTISE_URL, else the listener', () => {
    assert.equal(
      advertisedUrl({ BARBICAN_ADVERTISE_URL: 'http://10.0.0.7:8080/' }, 'http://0.0.0.0:8080'),
      'http://10.0.0.7:8080',
    )
    assert.equal(advertisedUrl({}, 'http://127.0.0.1:4100'), 'http://127.0.0.1:4100')
    assert.notEqual(new URL(advertisedUrl({}, 'http://0.0.0.0:4100')).hostname, '0.0.0.0')
  })
})
