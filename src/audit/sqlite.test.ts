import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { auditContract, call } from '../../test/contracts/audit.ts'
import { loadSqlite } from '../store/load-sqlite.ts'
import { ephemeralAuditKey } from './audit-key.ts'
import { AuditLog } from './audit-log.ts'
import { type AuditRecord, chainRecord, searchableOf } from './record.ts'
import { openSqliteAuditStore } from './sqlite.ts'

const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-'))
after(() => rmSync(dir, { recursive: true, force: true }))
let n = 0

auditContract('sqlite', async () => {
  const path = join(dir, `t${n++}`, 'audit.db')
  const store = await openSqliteAuditStore(path)
  const { DatabaseSync } = await loadSqlite()
  // A second connection, as an attacker with the file would use.
  const raw = (sql: string, ...values: (string | number)[]) => {
    const db = new DatabaseSync(path)
    try {
      db.prepare(sql).run(...values)
    } finally {
      db.close()
    }
  }
  return {
    store,
    tamper: {
      async editBody(seq, body) {
        raw('UPDATE audit_records SET body = ? WHERE seq = ?', body, seq)
      },
      async deleteRecord(seq) {
        raw('DELETE FROM audit_records WHERE seq = ?', seq)
      },
      async swap(a, b) {
        raw('UPDATE audit_records SET seq = -1 WHERE seq = ?', a)
        raw('UPDATE audit_records SET seq = ? WHERE seq = ?', a, b)
        raw('UPDATE audit_records SET seq = ? WHERE seq = -1', b)
      },
      async truncateAfter(seq) {
        raw('DELETE FROM audit_records WHERE seq > ?', seq)
      },
      async setSubject(seq, subject) {
        raw('UPDATE audit_records SET subject = ? WHERE seq = ?', subject, seq)
      },
      async deleteCheckpoint(number) {
        raw('DELETE FROM audit_checkpoints WHERE number = ?', number)
      },
    },
  }
})

test('sqlite: two writers on one file continue one chain', async () => {
  const path = join(dir, 'shared', 'audit.db')
  const key = ephemeralAuditKey()
  const gateway = new AuditLog({ store: await openSqliteAuditStore(path), key })
  const cli = new AuditLog({ store: await openSqliteAuditStore(path), key })
  try {
    await gateway.record(call('a', 'x'))
    await cli.record(call('b', 'y'))
    await gateway.record(call('c', 'z'))
    const records = await gateway.store.read()
    assert.deepEqual(
      records.map((r) => r.seq),
      [1, 2, 3],
    )
    assert.equal(records[2]!.prevHash, records[1]!.hash)
  } finally {
    await gateway.close()
    await cli.close()
  }
})

test('sqlite: the subject, target and time indexes are built by the first read using them', async () => {
  const path = join(dir, 'lazy', 'audit.db')
  const log = new AuditLog({ store: await openSqliteAuditStore(path), key: ephemeralAuditKey() })
  const { DatabaseSync } = await loadSqlite()
  const indexes = () => {
    const db = new DatabaseSync(path)
    try {
      const rows = db
        .prepare(
          "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'audit_records'",
        )
        .all() as { name: string }[]
      return rows.map((r) => r.name).sort()
    } finally {
      db.close()
    }
  }
  try {
    await log.record(call('alice', 'echo'))
    await log.record(call('bob', 'add'))
    // Appends maintain no index of their own until a read asks for one.
    assert.deepEqual(indexes(), [])
    const bySubject = await log.store.read({ subject: 'bob' })
    assert.deepEqual(
      bySubject.map((r) => r.seq),
      [2],
    )
    assert.deepEqual(indexes(), ['audit_by_subject'])
    const byTarget = await log.store.read({ target: 'echo' })
    assert.deepEqual(
      byTarget.map((r) => r.seq),
      [1],
    )
    assert.deepEqual(indexes(), ['audit_by_subject', 'audit_by_target'])
    // A read by time (as pruning makes) adds the time index.
    const since = await log.store.read({ since: '2000-01-01T00:00:00.000Z' })
    assert.equal(since.length, 2)
    assert.deepEqual(indexes(), ['audit_by_at', 'audit_by_subject', 'audit_by_target'])
  } finally {
    await log.close()
  }
})

test('sqlite: a transaction of any size stores every record as given, in statements of many rows', async () => {
  const path = join(dir, 'rows', 'audit.db')
  const store = await openSqliteAuditStore(path)
  const key = ephemeralAuditKey().macKey!
  const mine: AuditRecord[] = []
  try {
    // Sizes around the statements' 32, 8 and 1 rows, one transaction each.
    for (const size of [1, 7, 8, 9, 31, 32, 33, 41, 75]) {
      const added = await store.append((head) => {
        const records: AuditRecord[] = []
        let previous = head
        for (let i = 0; i < size; i++) {
          const event = call(
            `s${mine.length + i}`,
            i % 3 === 0 ? 'echo' : `t${i}`,
            i % 5 ? 'ok' : 'error',
          )
          // Some written from the event, some with no searchable fields (read from the body).
          const r = chainRecord(
            key,
            previous,
            `2026-12-06T03:00:00.${String(i).padStart(3, '0')}Z`,
            event,
          )
          records.push(i % 2 === 0 ? r : { ...r, searchable: undefined })
          previous = r
        }
        return records
      })
      mine.push(...added)
    }
    const stored = await store.read()
    assert.equal(stored.length, mine.length)
    for (const [i, r] of stored.entries()) {
      const m = mine[i]!
      assert.deepEqual(
        [r.seq, r.at, r.prevHash, r.hash, r.body],
        [m.seq, m.at, m.prevHash, m.hash, m.body],
      )
      assert.deepEqual(r.searchable, searchableOf(m))
    }
    assert.deepEqual((await store.head()).seq, mine.length)
  } finally {
    await store.close()
  }
})

test('sqlite: an append settles only once the WAL is on disk', async () => {
  // The batched journal is removed once its records' append settles (ADR 048): settling before
  // the fsync would leave a power loss nothing to recover them from.
  let release!: () => void
  let syncs = 0
  const store = await openSqliteAuditStore(join(dir, 'durable', 'audit.db'), () => ({
    sync() {
      syncs++
      return new Promise<void>((resolve) => {
        release = resolve
      })
    },
    async close() {},
  }))
  let settled = false
  const key = ephemeralAuditKey()
  const appended = store
    .append((head) => [chainRecord(key.macKey!, head, new Date().toISOString(), call('s', 't'))])
    .then(() => {
      settled = true
    })
  await new Promise((resolve) => setImmediate(resolve))
  assert.equal(syncs, 1, 'the commit is fsynced')
  assert.equal(settled, false, 'the append waits for the fsync')
  release()
  await appended
  assert.equal(settled, true)
  await store.close()
})
