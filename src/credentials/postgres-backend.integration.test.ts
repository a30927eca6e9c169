import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, describe, test } from 'node:test'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { pg } from '../common/lazy-deps.ts'
import { postgresBackend } from './postgres-backend.ts'
import { LocalKeyProvider } from './secret-box.ts'
import { TokenStore } from './token-store.ts'

after(dropPostgresSchemas)

const alice = { user: '["user","","alice"]', upstream: 'drive', issuer: 'https://as.example' }

describe('linked token store on PostgreSQL', () => {
  test('keeps tokens per user, upstream and issuer, sealed, seen by every replica', async () => {
    const url = await freshPostgresUrl()
    const key = randomBytes(32)
    const a = postgresBackend(url)
    const b = postgresBackend(url)
    try {
      const replicaA = new TokenStore(new LocalKeyProvider(key), a)
      const replicaB = new TokenStore(new LocalKeyProvider(key), b)
      await replicaA.put(alice, { accessToken: 'at-secret', refreshToken: 'rt-secret' })
      assert.equal((await replicaB.get(alice))?.refreshToken, 'rt-secret')
      assert.equal(await replicaB.get({ ...alice, issuer: 'https://other.example' }), undefined)
      assert.equal(await replicaB.get({ ...alice, user: '["user","","bob"]' }), undefined)

      const client = new (pg().Client)({ connectionString: url })
      await client.connect()
      const rows = await client.query('SELECT sealed FROM barbican_upstream_tokens')
      await client.end()
      assert.equal(rows.rows.length, 1)
      assert.ok(!String(rows.rows[0].sealed).includes('at-secret'), 'only sealed values stored')

      const rekeyed = new TokenStore(new LocalKeyProvider(randomBytes(32)), b)
      assert.equal(await rekeyed.get(alice), undefined, 'another key reads as not linked')
      assert.equal(await replicaA.get(alice), undefined, 'and the unreadable entry is gone')
    } finally {
      await a.close()
      await b.close()
    }
  })

  test('lists the links one replica made to another, for the admin console', async () => {
    const url = await freshPostgresUrl()
    const key = randomBytes(32)
    const a = postgresBackend(url)
    const b = postgresBackend(url)
    try {
      await new TokenStore(new LocalKeyProvider(key), a).put(alice, { accessToken: 'x' })
      const replicaB = new TokenStore(new LocalKeyProvider(key), b)
      assert.deepEqual(await replicaB.links(), [alice])
      await replicaB.delete(alice)
      assert.deepEqual(await replicaB.links(), [])
    } finally {
      await a.close()
      await b.close()
    }
  })

  test('a server that is down fails the call, and the next call tries again', async () => {
    const down = postgresBackend('postgres://postgres@127.0.0.1:1/test')
    await assert.rejects(down.get('x'), /ERR_STORE_UNAVAILABLE|cannot be used/)
    await assert.rejects(down.get('x'), /cannot be used/)
    await down.close()
  })
})
