/**
 * `barbican store migrate` moves an embedded installation into PostgreSQL: the gateway then
 * reads the same pins, history and baselines there, and `barbican audit verify` accepts the
 * moved chain with the same key; linked tokens and client registrations arrive sealed and open
 * with the same secret key. `barbican migrate` reports the schema, and a second move into
 * a database that already holds data is refused.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { loadAuditKey } from '../../src/audit/audit-key.ts'
import { AuditLog } from '../../src/audit/audit-log.ts'
import { openSqliteAuditStore } from '../../src/audit/sqlite.ts'
import { postgresBackend } from '../../src/credentials/postgres-backend.ts'
import { LocalKeyProvider } from '../../src/credentials/secret-box.ts'
import { sqliteBackend } from '../../src/credentials/sqlite-backend.ts'
import { TokenStore } from '../../src/credentials/token-store.ts'
import { openPostgresStore } from '../../src/store/postgres.ts'
import { openSqliteStore } from '../../src/store/sqlite.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../support/backends.ts'
import { runCli } from '../support/cli.ts'

after(dropPostgresSchemas)

const AT = '2026-01-01T00:00:00.000Z'

describe('moving an installation to PostgreSQL', () => {
  test('pins, history, baselines and the audit chain arrive intact', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-store-migrate-')))
    const config = join(dir, 'barbican.yaml')
    writeFileSync(config, 'upstreams:\n  a:\n    command: node\n')
    const storePath = join(dir, '.barbican', 'barbican.db')
    const sqlite = await openSqliteStore(storePath)
    const item = { upstream: 'a', kind: 'tool', name: 'x', definition: { name: 'x' } } as const
    await sqlite.pins.pin({
      ...item,
      key: 'tool:x',
      hash: 'h1',
      approvedAt: AT,
      approvedBy: 'olga',
    })
    await sqlite.pins.propose({
      ...item,
      key: 'tool:y',
      name: 'y',
      hash: 'h2',
      previousHash: null,
      reason: 'new',
      findings: [],
      status: 'pending',
      seenAt: AT,
    })
    for (const hash of ['h0', 'h1']) {
      await sqlite.pins.record({
        upstream: 'a',
        key: 'tool:x',
        action: 'approved',
        hash,
        previousHash: null,
        actor: 'olga',
        at: AT,
      })
    }
    await sqlite.baselines.put({
      name: 'config',
      hash: 'b',
      document: { a: 1 },
      approvedAt: AT,
      approvedBy: 'olga',
    })
    await sqlite.close()
    const audit = new AuditLog({
      store: await openSqliteAuditStore(join(dir, '.barbican', 'audit.db')),
      key: loadAuditKey(join(dir, '.barbican', 'audit-key.pem'), true),
    })
    for (const target of ['p', 'q', 'r']) {
      await audit.record({
        type: 'admin',
        action: 'pins.approve',
        actor: 'olga',
        target,
        outcome: 'ok',
      })
    }
    await audit.close()

    const url = await freshPostgresUrl()
    const moved = await runCli(['store', 'migrate', '--from', `sqlite:${storePath}`, '--to', url])
    assert.equal(moved.code, 0, moved.stderr)
    assert.match(
      moved.stdout,
      /moved 1 pins, 1 pending changes, 2 pin events, 1 baselines, 3 audit records, 1 audit checkpoints/,
    )

    const pg = await openPostgresStore(url)
    try {
      assert.deepEqual(
        (await pg.pins.pinned()).map((p) => [p.key, p.hash, p.approvedBy]),
        [['tool:x', 'h1', 'olga']],
      )
      assert.deepEqual(
        (await pg.pins.pending()).map((p) => p.key),
        ['tool:y'],
      )
      assert.deepEqual(
        (await pg.pins.history()).map((e) => e.hash),
        ['h0', 'h1'],
      )
      assert.deepEqual((await pg.baselines.get('config'))?.document, { a: 1 })
      // Ids continue after the copied ones.
      await pg.pins.record({
        upstream: 'a',
        key: 'tool:x',
        action: 'approved',
        hash: 'h2',
        previousHash: 'h1',
        actor: 'o',
        at: AT,
      })
      assert.deepEqual(
        (await pg.pins.history()).map((e) => e.hash),
        ['h0', 'h1', 'h2'],
      )
    } finally {
      await pg.close()
    }

    process.env.BARBICAN_POSTGRES_URL = url
    try {
      const verify = await runCli(['audit', 'verify', '--config', config])
      assert.equal(verify.code, 0, verify.stdout + verify.stderr)
      assert.match(verify.stdout, /^ok +3 record\(s\)/m)
      const migrate = await runCli(['migrate', '--config', config])
      assert.equal(migrate.code, 0, migrate.stderr)
      assert.match(migrate.stdout, /schema up to date \(version \d+\)/)
    } finally {
      delete process.env.BARBICAN_POSTGRES_URL
    }

    const again = await runCli(['store', 'migrate', '--from', `sqlite:${storePath}`, '--to', url])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /already holds data \(barbican_pins\): move into an empty database/)
  })

  test('linked tokens and client registrations move sealed, and open with the same key', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-store-migrate-tokens-')))
    const storePath = join(dir, 'barbican.db')
    await (await openSqliteStore(storePath)).close()
    const tokensPath = join(dir, 'tokens.db')
    const keys = new LocalKeyProvider(randomBytes(32))
    const file = sqliteBackend(tokensPath)
    const links = new TokenStore(keys, file)
    const ada = { user: '["user","","ada"]', upstream: 'drive', issuer: 'https://as.example' }
    const bo = { user: '["user","","bo"]', upstream: 'drive', issuer: 'https://as.example' }
    await links.put(ada, { accessToken: 'at-ada', refreshToken: 'rt-ada' })
    await links.put(bo, { accessToken: 'at-bo' })
    // A dynamic registration, in the slot client-registration.ts gives it.
    const slot = `client:${JSON.stringify(['https://as.example', 'http://127.0.0.1/cb'])}`
    await file.put(slot, await keys.seal(JSON.stringify({ clientId: 'dcr-1' }), slot))
    file.close()

    const url = await freshPostgresUrl()
    const moved = await runCli([
      'store',
      'migrate',
      '--from',
      `sqlite:${storePath}`,
      '--tokens',
      `sqlite:${tokensPath}`,
      '--to',
      url,
    ])
    assert.equal(moved.code, 0, moved.stderr)
    assert.match(moved.stdout, /, 2 linked upstream tokens, 1 client registrations from /)
    assert.match(moved.stdout, /same BARBICAN_SECRET_KEY/)

    const pg = postgresBackend(url, { migrate: false })
    try {
      const stored = await pg.get(slot)
      assert.ok(stored)
      assert.ok(!stored.includes('dcr-1'), 'still sealed in PostgreSQL')
      assert.deepEqual(JSON.parse(await keys.open(stored, slot)), { clientId: 'dcr-1' })
      const moved = new TokenStore(keys, pg)
      assert.deepEqual(await moved.get(ada), { accessToken: 'at-ada', refreshToken: 'rt-ada' })
      assert.deepEqual(await moved.get(bo), { accessToken: 'at-bo' })
      assert.equal((await moved.links())?.length, 2)
    } finally {
      await pg.close()
    }
    const noTokens = await runCli([
      'store',
      'migrate',
      '--from',
      `sqlite:${storePath}`,
      '--tokens',
      tokensPath,
      '--to',
      url,
    ])
    assert.equal(noTokens.code, 2)
    assert.match(noTokens.stderr, /--tokens must be sqlite:PATH/)
  })

  test('bad arguments are named', async () => {
    const noFrom = await runCli(['store', 'migrate', '--to', 'postgres://h/db'])
    assert.equal(noFrom.code, 2)
    assert.match(noFrom.stderr, /--from must be sqlite:PATH/)
    const missing = await runCli([
      'store',
      'migrate',
      '--from',
      'sqlite:/nonexistent/x.db',
      '--to',
      'postgres://h/db',
    ])
    assert.equal(missing.code, 1)
    assert.match(missing.stderr, /--from: \/nonexistent\/x\.db does not exist/)
    const badTo = await runCli([
      'store',
      'migrate',
      '--from',
      `sqlite:${import.meta.filename}`,
      '--to',
      'mysql://h/db',
    ])
    assert.equal(badTo.code, 2)
    assert.match(badTo.stderr, /--to has the scheme "mysql:"; expected postgres: or postgresql:/)
    const migrate = await runCli(['migrate', '--config', '/nonexistent.yaml'])
    assert.equal(migrate.code, 1)
  })
})
