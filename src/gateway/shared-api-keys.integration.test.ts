import assert from 'node:assert/strict'
import { after, describe, it } from 'node:test'
import type { Pool } from 'pg'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { ApiKeyStore, generateApiKey } from '../auth/api-keys.ts'
import { openPostgresPool } from '../store/postgres.ts'
import { PostgresApiKeys } from '../store/postgres-api-keys.ts'
import { silentLogger } from '../telemetry/log.ts'
import { SharedApiKeys } from './shared-api-keys.ts'

const pools: Pool[] = []
const followers: SharedApiKeys[] = []
after(async () => {
  for (const f of followers) f.stop()
  await Promise.all(pools.map((p) => p.end()))
  await dropPostgresSchemas()
})

/** One replica: its own pool, its own key store following the shared table. */
async function replica(url: string): Promise<{ keys: ApiKeyStore; table: PostgresApiKeys }> {
  const pool = await openPostgresPool(url, { maxConnections: 2 })
  pools.push(pool)
  const table = new PostgresApiKeys(pool)
  const keys = new ApiKeyStore([])
  const follower = new SharedApiKeys(keys, table, silentLogger)
  followers.push(follower)
  await follower.start()
  return { keys, table }
}

describe('API keys in PostgreSQL', () => {
  it('a key revoked through replica A is refused on replica B within 1 s', async () => {
    const url = await freshPostgresUrl()
    const a = await replica(url)
    const b = await replica(url)
    const { key, hash } = generateApiKey()
    const created = await a.table.create({
      id: 'ci',
      hash,
      subject: 'robot',
      scopes: ['tools'],
      createdAt: new Date().toISOString(),
    })
    assert.equal(created, true)
    const until = async (ok: () => boolean) => {
      const started = Date.now()
      while (!ok() && Date.now() - started < 1000) await new Promise((r) => setTimeout(r, 10))
      return Date.now() - started
    }
    await until(() => b.keys.verify(key) !== undefined)
    assert.equal(b.keys.verify(key)?.subject, 'robot', 'a key created on A is accepted on B')
    assert.equal(await a.table.revoke('ci'), true)
    const took = await until(() => b.keys.verify(key) === undefined)
    assert.equal(b.keys.verify(key), undefined, `still accepted on B after ${took} ms`)
    assert.ok(took < 1000)
  })

  it('refuses a second key of the same id and a revocation of none', async () => {
    const { table } = await replica(await freshPostgresUrl())
    const key = { id: 'k', hash: generateApiKey().hash, subject: 's', scopes: [], createdAt: 'x' }
    assert.equal(await table.create(key), true)
    const before = await table.revision()
    assert.equal(await table.create({ ...key, subject: 'other' }), false)
    assert.equal(await table.revoke('nope'), false)
    assert.equal(await table.revision(), before, 'nothing written, nothing moved')
    assert.deepEqual(
      (await table.list()).map((k) => k.subject),
      ['s'],
    )
  })
})
