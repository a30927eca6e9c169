/**
 * A PostgreSQL replica that journals (ADR 090): a reply settles at its journal write, the chain
 * in PostgreSQL gets the record within the window, a replica killed with SIGKILL loses nothing
 * its next start can replay, and a crash between a commit and the journal's removal puts no
 * record in the chain twice.
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { call } from '../../test/contracts/audit.ts'
import { dropPostgresSchemas, freshPostgresUrl } from '../../test/support/backends.ts'
import { killWhenWritten } from '../../test/support/killed-child.ts'
import { openPostgresPool } from '../store/postgres.ts'
import { ephemeralAuditKey } from './audit-key.ts'
import { AuditLog } from './audit-log.ts'
import { inspectJournals, journalIn } from './journal.ts'
import { postgresAuditStore } from './postgres.ts'
import { verifyAuditLog } from './verify.ts'

after(dropPostgresSchemas)

const journalDir = () => mkdtempSync(join(tmpdir(), 'barbican-pg-journal-'))
const store = async (url: string) => postgresAuditStore(await openPostgresPool(url), true)
const callIds = async (log: AuditLog) =>
  (await log.store.read()).map((r) => JSON.parse(r.body).callId as string)

async function until(what: string, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 10_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

describe('a journalled audit log on PostgreSQL', () => {
  test('a record settles at its journal write and reaches PostgreSQL within the window', async () => {
    const url = await freshPostgresUrl()
    const dir = journalDir()
    const journal = journalIn(dir)
    const key = ephemeralAuditKey()
    const log = new AuditLog({ store: await store(url), key, batched: { journal, windowMs: 300 } })
    try {
      const settled = Date.now()
      await Promise.all([1, 2, 3].map((n) => log.record(call(`u${n}`, 'echo'))))
      // Settled before any commit: in the journal only.
      assert.equal((await log.store.read()).length, 0)
      assert.deepEqual(readdirSync(dir), ['audit-batch.0'])
      await until('the window commit', async () => (await log.store.read()).length === 3)
      assert.ok(Date.now() - settled < 3000, 'committed within the window, not at close')
      assert.deepEqual(await callIds(log), ['c-u1-echo', 'c-u2-echo', 'c-u3-echo'])
      await until('the journal removal', async () => !existsSync(`${journal}.0`))
      // Another replica, reading the same database, verifies the chain.
      const other = await store(url)
      assert.equal((await verifyAuditLog(other, key)).ok, true)
      await other.close()
    } finally {
      await log.close()
    }
  })

  test('SIGKILL after the replies loses none: the next start replays them into PostgreSQL', async () => {
    const url = await freshPostgresUrl()
    const journal = journalIn(journalDir())
    const module = (name: string) => JSON.stringify(new URL(name, import.meta.url).href)
    const script = `
      import { ephemeralAuditKey } from ${module('./audit-key.ts')}
      import { AuditLog } from ${module('./audit-log.ts')}
      import { postgresAuditStore } from ${module('./postgres.ts')}
      import { openPostgresPool } from ${module('../store/postgres.ts')}
      const store = postgresAuditStore(await openPostgresPool(${JSON.stringify(url)}), true)
      const log = new AuditLog({ store, key: ephemeralAuditKey(), batched: { journal: ${JSON.stringify(journal)}, windowMs: 60000 } })
      await Promise.all(Array.from({ length: 20 }, (_, n) => log.record({ type: 'call', callId: 'k-' + n, subject: 'bob', transport: 'stdio', server: 'default', method: 'tools/call', outcome: 'ok', latencyMs: 1, decision: 'none' })))
      process.stdout.write('settled\\n')
      setInterval(() => {}, 1000)
    `
    await killWhenWritten(script)

    const key = ephemeralAuditKey()
    const log = new AuditLog({ store: await store(url), key, batched: { journal, windowMs: 50 } })
    try {
      assert.equal((await log.store.read()).length, 0, 'nothing was committed before the kill')
      const waiting = await inspectJournals(log.store, journal)
      assert.deepEqual([waiting.pending, waiting.committed], [20, 0])
      assert.equal(await log.recoverJournal(), 20)
      assert.deepEqual(
        (await callIds(log)).sort(),
        Array.from({ length: 20 }, (_, n) => `k-${n}`).sort(),
      )
      assert.equal(existsSync(`${journal}.0`), false)
      assert.equal((await verifyAuditLog(log.store, key)).ok, true)
    } finally {
      await log.close()
    }
  })

  test('a journal left between its commit and its removal is not replayed twice', async () => {
    const url = await freshPostgresUrl()
    const journal = journalIn(journalDir())
    const line = (n: number) => `${JSON.stringify(call(`u${n}`, 'echo'))}\n`
    // What a replica that died after committing journal 0 and before removing it leaves.
    writeFileSync(`${journal}.0`, line(1) + line(2))
    const key = ephemeralAuditKey()
    const committer = new AuditLog({ store: await store(url), key })
    await committer.record(call('u1', 'echo'))
    await committer.record(call('u2', 'echo'))
    // Another replica's calls since, in the same database: never compared, never replayed.
    await committer.record(call('u9', 'elsewhere'))
    await committer.close()
    // A line the commit did not take (written after it): it must still be replayed.
    appendFileSync(`${journal}.0`, line(3))
    const log = new AuditLog({ store: await store(url), key, batched: { journal, windowMs: 50 } })
    try {
      const before = await inspectJournals(log.store, journal)
      assert.deepEqual([before.pending, before.committed], [1, 2])
      assert.equal(await log.recoverJournal(), 1)
      assert.deepEqual(await callIds(log), [
        'c-u1-echo',
        'c-u2-echo',
        'c-u9-elsewhere',
        'c-u3-echo',
      ])
      assert.equal(existsSync(`${journal}.0`), false)
      assert.equal((await verifyAuditLog(log.store, key)).ok, true)
    } finally {
      await log.close()
    }
  })
})
