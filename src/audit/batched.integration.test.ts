/**
 * Batched durability (ADR 048): a record settles once its event is in the journal file, is
 * committed within the window, and a gateway killed with SIGKILL right after its replies loses
 * none of them: the next start replays the journal into the chain, which still verifies.
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { killWhenWritten } from '../../test/support/killed-child.ts'
import { ephemeralAuditKey } from './audit-key.ts'
import { AuditLog } from './audit-log.ts'
import { readJournal } from './journal.ts'
import type { CallEvent } from './record.ts'
import { openSqliteAuditStore } from './sqlite.ts'
import { verifyAuditLog } from './verify.ts'

const event = (n: number): CallEvent => ({
  type: 'call',
  callId: `c-${n}`,
  subject: 'alice',
  transport: 'streamable-http',
  server: 'default',
  method: 'tools/call',
  target: 'echo',
  outcome: 'ok',
  latencyMs: 1,
  decision: 'none',
})

describe('batched audit durability', () => {
  test('a record settles at the journal write and is committed within the window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-'))
    const store = await openSqliteAuditStore(join(dir, 'audit.db'))
    const key = ephemeralAuditKey()
    const journal = join(dir, 'audit.db-batch')
    const log = new AuditLog({ store, key, batched: { journal, windowMs: 50 } })
    await Promise.all([1, 2, 3].map((n) => log.record(event(n))))
    // Settled, not committed yet: the events are in the journal only.
    assert.equal((await store.read()).length, 0)
    assert.deepEqual(
      readdirSync(dir).filter((f) => f.startsWith('audit.db-batch')),
      ['audit.db-batch.0'],
    )
    const deadline = Date.now() + 5000
    while ((await store.read()).length < 3 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    assert.deepEqual(
      (await store.read()).map((r) => JSON.parse(r.body).callId),
      ['c-1', 'c-2', 'c-3'],
    )
    // The committed journal is gone.
    assert.equal(existsSync(`${journal}.0`), false)
    await log.close()
    const reopened = await openSqliteAuditStore(join(dir, 'audit.db'))
    assert.equal((await verifyAuditLog(reopened, key)).ok, true)
    await reopened.close()
  })

  test('256 waiting events are committed without waiting for the window', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-early-'))
    const store = await openSqliteAuditStore(join(dir, 'audit.db'))
    const journal = join(dir, 'audit.db-batch')
    const log = new AuditLog({
      store,
      key: ephemeralAuditKey(),
      batched: { journal, windowMs: 60_000 },
    })
    await Promise.all(Array.from({ length: 300 }, (_, i) => log.record(event(i + 1))))
    const deadline = Date.now() + 5000
    while ((await store.read()).length < 256 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
    // All 300 were written in one turn, so one early commit takes them all, long before 60 s.
    assert.equal((await store.read()).length, 300)
    await log.close()
  })

  test('an administrative act is committed before it settles, even in batched mode', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-admin-'))
    const store = await openSqliteAuditStore(join(dir, 'audit.db'))
    const journal = join(dir, 'audit.db-batch')
    const log = new AuditLog({
      store,
      key: ephemeralAuditKey(),
      batched: { journal, windowMs: 60_000 },
    })
    await log.record(event(1))
    await log.record({ type: 'admin', action: 'pin.approve', actor: 'ops', outcome: 'ok' })
    // The call waits in the journal for its window; the act is in the chain already.
    assert.deepEqual(
      (await store.read()).map((r) => JSON.parse(r.body).type),
      ['admin'],
    )
    await log.close()
  })

  test('a journal that cannot be written refuses the record, and nothing reaches the chain', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-broken-'))
    const store = await openSqliteAuditStore(join(dir, 'audit.db'))
    // The journal's folder does not exist: every open fails.
    const journal = join(dir, 'missing', 'audit.db-batch')
    const log = new AuditLog({
      store,
      key: ephemeralAuditKey(),
      batched: { journal, windowMs: 10 },
    })
    const results = await Promise.allSettled([log.record(event(1)), log.record(event(2))])
    assert.deepEqual(
      results.map((r) => r.status),
      ['rejected', 'rejected'],
    )
    await log.close()
    const reopened = await openSqliteAuditStore(join(dir, 'audit.db'))
    assert.equal(
      (await reopened.read()).filter((r) => JSON.parse(r.body).type === 'call').length,
      0,
    )
    await reopened.close()
  })

  test('SIGKILL right after the records settle loses none: the next start replays them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-kill-'))
    const db = join(dir, 'audit.db')
    const journal = join(dir, 'audit.db-batch')
    const script = `
      import { ephemeralAuditKey } from ${JSON.stringify(new URL('./audit-key.ts', import.meta.url).href)}
      import { AuditLog } from ${JSON.stringify(new URL('./audit-log.ts', import.meta.url).href)}
      import { openSqliteAuditStore } from ${JSON.stringify(new URL('./sqlite.ts', import.meta.url).href)}
      const store = await openSqliteAuditStore(${JSON.stringify(db)})
      const log = new AuditLog({ store, key: ephemeralAuditKey(), batched: { journal: ${JSON.stringify(journal)}, windowMs: 60000 } })
      for (let n = 1; n <= 20; n++) await log.record({ type: 'call', callId: 'k-' + n, subject: 'bob', transport: 'stdio', server: 'default', method: 'tools/call', outcome: 'ok', latencyMs: 1, decision: 'none' })
      process.stdout.write('settled\\n')
      setInterval(() => {}, 1000)
    `
    await killWhenWritten(script)

    const store = await openSqliteAuditStore(db)
    assert.equal((await store.read()).length, 0, 'nothing was committed before the kill')
    const log = new AuditLog({
      store,
      key: ephemeralAuditKey(),
      batched: { journal, windowMs: 50 },
    })
    assert.equal(await log.recoverJournal(), 20)
    const ids = (await store.read()).map((r) => JSON.parse(r.body).callId)
    assert.deepEqual(
      ids,
      Array.from({ length: 20 }, (_, i) => `k-${i + 1}`),
    )
    assert.equal(existsSync(`${journal}.0`), false)
    await log.close()
  })

  test('a journal left between its commit and its removal is not replayed twice', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-twice-'))
    const db = join(dir, 'audit.db')
    const journal = join(dir, 'audit.db-batch')
    const line = (n: number) => `${JSON.stringify(event(n))}\n`
    // What a gateway that died after committing journal 0 and before removing it leaves: the
    // journal's lines, and the same events in the chain (a record's body is its journal line).
    writeFileSync(`${journal}.0`, line(1) + line(2))
    const store = await openSqliteAuditStore(db)
    const key = ephemeralAuditKey()
    const committer = new AuditLog({ store, key })
    await committer.record(event(1))
    await committer.record(event(2))
    // A line the commit did not take (written after it): it must still be replayed.
    appendFileSync(`${journal}.0`, line(3))
    assert.equal(readJournal(`${journal}.0`).events.length, 3)
    const log = new AuditLog({ store, key, batched: { journal, windowMs: 50 } })
    assert.equal(await log.recoverJournal(), 1)
    assert.deepEqual(
      (await store.read()).map((r) => JSON.parse(r.body).callId),
      ['c-1', 'c-2', 'c-3'],
    )
    assert.equal(existsSync(`${journal}.0`), false)
    assert.equal((await verifyAuditLog(store, key)).ok, true)
    await log.close()
  })

  test('only records committed since the journal was created are compared with its lines', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-older-'))
    const store = await openSqliteAuditStore(join(dir, 'audit.db'))
    const key = ephemeralAuditKey()
    const committer = new AuditLog({ store, key })
    await committer.record(event(7))
    await new Promise((resolve) => setTimeout(resolve, 20))
    const journal = join(dir, 'audit.db-batch')
    writeFileSync(`${journal}.0`, `${JSON.stringify(event(7))}\n`)
    const log = new AuditLog({ store, key, batched: { journal, windowMs: 50 } })
    assert.equal(await log.recoverJournal(), 1)
    assert.equal((await store.read()).length, 2)
    await log.close()
  })

  test('readJournal names a line that does not parse, and tells a cut last line apart', () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-batched-damage-'))
    const path = join(dir, 'audit.db-batch.0')
    writeFileSync(
      path,
      `${JSON.stringify(event(1))}\n{not json\n${JSON.stringify(event(2))}\n{"type":"ca`,
    )
    const read = readJournal(path)
    assert.equal(read.events.length, 2)
    assert.deepEqual(read.damage, [
      { file: path, line: 2, cut: false },
      { file: path, line: 4, cut: true },
    ])
  })
})
