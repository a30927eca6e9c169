import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { userInfo } from 'node:os'
import { after, test } from 'node:test'
import { storeContract } from '../../test/contracts/store.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { openPostgresPool, openPostgresStore, postgresStore, withDefaultUser } from './postgres.ts'
import { migratePostgres, POSTGRES_MIGRATIONS, POSTGRES_SCHEMA_VERSION } from './postgres-schema.ts'

after(dropPostgresSchemas)

storeContract('postgres', async () => openPostgresStore(await freshPostgresUrl()))

const item = {
  upstream: 'a',
  key: 'tool:x',
  kind: 'tool',
  name: 'x',
  hash: 'h',
  definition: {},
  approvedAt: 'now',
  approvedBy: 'op',
} as const

test("postgres: a second process's write moves the revision the first one reads", async () => {
  const url = await freshPostgresUrl()
  const gateway = await openPostgresStore(url)
  const cli = await openPostgresStore(url)
  try {
    const before = await gateway.pins.revision()
    await cli.pins.pin(item)
    assert.notEqual(await gateway.pins.revision(), before)
    assert.equal(gateway.pins.localWrites(), 0, 'the write was not made through this object')
    assert.equal((await gateway.pins.pinned('a')).length, 1)
  } finally {
    await gateway.close()
    await cli.close()
  }
})

test('postgres: revision reads asked for at once share one query; a later one reads again', async () => {
  const url = await freshPostgresUrl()
  const pool = await openPostgresPool(url)
  const store = postgresStore(pool, true)
  const cli = await openPostgresStore(url)
  try {
    let queries = 0
    const query = pool.query.bind(pool) as (...args: unknown[]) => unknown
    pool.query = ((...args: unknown[]) => {
      queries++
      return query(...args)
    }) as typeof pool.query
    const revisions = await Promise.all(Array.from({ length: 16 }, () => store.pins.revision()))
    assert.equal(queries, 1)
    assert.equal(new Set(revisions).size, 1)
    await cli.pins.pin(item)
    assert.notEqual(await store.pins.revision(), revisions[0], 'a read after the write sees it')
    assert.equal(queries, 2)
  } finally {
    await store.close()
    await cli.close()
  }
})

test('postgres: migrations are idempotent, also when replicas start at once', async () => {
  const url = await freshPostgresUrl()
  const pools = await Promise.all([1, 2, 3].map(() => openPostgresPool(url)))
  try {
    assert.deepEqual(await migratePostgres(pools[0]!), [], 'nothing left to apply')
    const versions = await pools[0]!.query(
      'SELECT version FROM barbican_schema_version ORDER BY version',
    )
    assert.deepEqual(
      versions.rows.map((r) => r.version),
      POSTGRES_MIGRATIONS.map((m) => m.version),
    )
    assert.equal(versions.rows.at(-1)?.version, POSTGRES_SCHEMA_VERSION)
  } finally {
    await Promise.all(pools.map((p) => p.end()))
  }
})

test('postgres: migrate: false refuses an unmigrated database, naming the command', async () => {
  const url = await freshPostgresUrl()
  await assert.rejects(
    openPostgresStore(url, { migrate: false }),
    (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
      assert.match(err.message, /schema is at version 0.*barbican migrate/)
      return true
    },
  )
})

test('postgres: an unreachable server fails at open with the URL, never its password', async () => {
  await assert.rejects(
    openPostgresStore('postgres://u:s3cret@127.0.0.1:1/db'),
    (err: Error & { code?: string }) => {
      assert.equal(err.code, 'ERR_STORE_UNAVAILABLE')
      assert.match(err.message, /127\.0\.0\.1:1/)
      assert.doesNotMatch(err.message, /s3cret/)
      return true
    },
  )
})

test('postgres: a URL without a user name takes PGUSER, else the OS user, as libpq does', () => {
  const url = 'postgres://127.0.0.1:5432/db?options=-c%20x'
  assert.equal(
    withDefaultUser(url, { PGUSER: 'app', USER: 'me' }),
    'postgres://app@127.0.0.1:5432/db?options=-c%20x',
  )
  assert.equal(
    withDefaultUser(url, { USER: 'me' }),
    'postgres://me@127.0.0.1:5432/db?options=-c%20x',
  )
  assert.equal(new URL(withDefaultUser(url, {})).username, userInfo().username)
  // A named user is kept, whatever the environment says.
  assert.equal(withDefaultUser('postgres://bob@h/db', { PGUSER: 'app' }), 'postgres://bob@h/db')
  assert.equal(
    withDefaultUser('postgres://h/db?user=bob', { PGUSER: 'app' }),
    'postgres://h/db?user=bob',
  )
})

test('postgres: a gateway started without USER in its environment (systemd, containers) connects', async () => {
  const url = new URL(await freshPostgresUrl())
  url.username = ''
  const module = new URL('./postgres.ts', import.meta.url).href
  const program = `
    const { openPostgresPool } = await import(${JSON.stringify(module)})
    const pool = await openPostgresPool(${JSON.stringify(url.toString())})
    const { rows } = await pool.query('select current_user as u')
    console.log(rows[0].u)
    await pool.end()`
  const env = { ...process.env }
  delete env.USER
  delete env.PGUSER
  delete env.LOGNAME
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', program], {
    env,
    encoding: 'utf8',
  })
  assert.equal(out.trim(), userInfo().username)
})
