/**
 * The account-link flow's records and refresh locks in the real Redis (docs/decisions/089):
 * keyed by digests, expiring, taken once, the PKCE verifier sealed; and the lock's
 * compare-and-delete.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { openRedis, type RedisClient, secretDigest } from '../store/redis.ts'
import { type LinkState, MemoryLinkFlowStore, RedisLinkFlowStore } from './link-flow-store.ts'
import { RedisRefreshLocks } from './refresh-lock.ts'

let client: RedisClient
const prefix = freshRedisPrefix()

before(async () => {
  client = await openRedis(REDIS_URL)
})
after(async () => {
  const keys = await client.keys(`${prefix}*`)
  if (keys.length > 0) await client.del(keys)
  client.destroy()
})

const state: LinkState = {
  user: 'key:alice',
  browser: randomBytes(32),
  upstream: 'files',
  issuer: 'https://issuer.example',
  clientId: 'barbican',
  verifier: 'the-pkce-verifier-0123456789-abcdefghijklmnop',
}

describe('RedisLinkFlowStore', () => {
  test('a ticket is kept under its digest with its TTL and taken once', async () => {
    const store = new RedisLinkFlowStore(client, prefix, randomBytes(32))
    const id = randomBytes(24).toString('base64url')
    await store.putTicket(id, { user: 'key:alice', subject: 'alice', upstream: 'files' }, 60_000)
    const keys = await client.keys(`${prefix}link:ticket:*`)
    assert.deepEqual(keys, [`${prefix}link:ticket:${secretDigest(id)}`])
    assert.ok(!keys[0]!.includes(id), 'the raw ticket is never a key')
    const ttl = await client.pTTL(keys[0]!)
    assert.ok(ttl > 50_000 && ttl <= 60_000, `ttl ${ttl}`)
    assert.deepEqual(await store.takeTicket(id), {
      user: 'key:alice',
      subject: 'alice',
      upstream: 'files',
    })
    assert.equal(await store.takeTicket(id), undefined, 'a second take finds nothing')
  })

  test('a state keeps names and a sealed verifier, opens on another replica once', async () => {
    const key = randomBytes(32)
    const a = new RedisLinkFlowStore(client, prefix, key)
    const b = new RedisLinkFlowStore(client, prefix, key)
    const id = randomBytes(24).toString('base64url')
    await a.putState(id, state, 60_000)
    const raw = await client.get(`${prefix}link:state:${secretDigest(id)}`)
    assert.ok(raw !== null)
    assert.ok(!raw.includes(state.verifier), 'the verifier is sealed')
    assert.match(JSON.parse(raw).verifier, /^enc:v1:/)
    assert.deepEqual(await b.takeState(id), state)
    assert.equal(await a.takeState(id), undefined)
  })

  test('a state sealed under another key, or expired, is not taken', async () => {
    const id = randomBytes(24).toString('base64url')
    await new RedisLinkFlowStore(client, prefix, randomBytes(32)).putState(id, state, 60_000)
    const other = new RedisLinkFlowStore(client, prefix, randomBytes(32))
    assert.equal(await other.takeState(id), undefined)
    assert.equal(await client.exists(`${prefix}link:state:${secretDigest(id)}`), 0, 'gone anyway')

    const short = randomBytes(24).toString('base64url')
    await other.putState(short, state, 30)
    await new Promise((resolve) => setTimeout(resolve, 80))
    assert.equal(await other.takeState(short), undefined)
  })
})

describe('MemoryLinkFlowStore', () => {
  test('takes a record once and never after its TTL', async () => {
    const store = new MemoryLinkFlowStore()
    await store.putState('s1', state, 60_000)
    assert.deepEqual(await store.takeState('s1'), state)
    assert.equal(await store.takeState('s1'), undefined)
    await store.putTicket('t1', { user: 'u', subject: 's', upstream: 'files' }, -1)
    assert.equal(await store.takeTicket('t1'), undefined)
  })
})

describe('RedisRefreshLocks', () => {
  test('one holder at a time; only the holder releases', async () => {
    const locks = new RedisRefreshLocks(client, prefix)
    const name = JSON.stringify({ user: 'key:alice', upstream: 'files', issuer: 'x' })
    const held = await locks.acquire(name, 10_000)
    assert.ok(held !== undefined)
    assert.equal(await locks.acquire(name, 10_000), undefined, 'taken')
    const keys = await client.keys(`${prefix}link:refresh:*`)
    assert.equal(keys.length, 1)
    assert.ok(!keys[0]!.includes('alice'), 'the link is named by a digest')
    await locks.release(name, 'not-the-holder')
    assert.equal(await locks.acquire(name, 10_000), undefined, 'a stranger cannot free it')
    await locks.release(name, held)
    const next = await locks.acquire(name, 10_000)
    assert.ok(next !== undefined, 'free again once the holder released it')
    await locks.release(name, next)
  })

  test('a lock whose holder died expires', async () => {
    const locks = new RedisRefreshLocks(client, prefix)
    assert.ok((await locks.acquire('dead', 30)) !== undefined)
    await new Promise((resolve) => setTimeout(resolve, 80))
    assert.ok((await locks.acquire('dead', 30)) !== undefined)
  })
})
