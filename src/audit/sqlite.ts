/**
 * The embedded audit backend: its own SQLite file beside the pin store (`.barbican/audit.db`),
 * in WAL mode with `synchronous = FULL`, so a committed append has reached the disk (the WAL is
 * fsynced at every commit). Searchable fields are copied into indexed columns; the body is the
 * hashed truth and `barbican audit verify` checks the columns against it.
 */
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import { loadSqlite } from '../store/load-sqlite.ts'
import type { AuditQuery, AuditStore, ChainHead, Checkpoint } from './audit-store.ts'
import { type AuditRecord, GENESIS_HASH, searchableOf } from './record.ts'

type Row = Record<string, unknown>

const SCHEMA = `
  CREATE TABLE IF NOT EXISTS audit_records (
    seq INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    type TEXT NOT NULL,
    subject TEXT NOT NULL,
    target TEXT,
    outcome TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    body TEXT NOT NULL
  );
  CREATE INDEX IF NOT EXISTS audit_by_subject ON audit_records (subject, seq);
  CREATE INDEX IF NOT EXISTS audit_by_target ON audit_records (target, seq);
  CREATE INDEX IF NOT EXISTS audit_by_at ON audit_records (at);
  CREATE TABLE IF NOT EXISTS audit_checkpoints (
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    at TEXT NOT NULL,
    reason TEXT NOT NULL,
    key_id TEXT NOT NULL,
    signature TEXT NOT NULL
  );
`

/** Opens (creating file, folder and tables as needed) the audit log at `path`. */
export async function openSqliteAuditStore(path: string): Promise<AuditStore> {
  const { DatabaseSync } = await loadSqlite()
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new DatabaseSync(path)
  // The gateway and the CLI (pins approve) append to one log: wait for the other's lock.
  db.exec('PRAGMA busy_timeout = 5000')
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL')
  db.exec('PRAGMA synchronous = FULL')
  db.exec(SCHEMA)
  return sqliteAuditStore(db)
}

function agrees(r: AuditRecord, q: AuditQuery): boolean {
  if (q.subject === undefined && q.target === undefined && q.outcome === undefined) return true
  const s = searchableOf(r)
  return (
    (q.subject === undefined || s.subject === q.subject) &&
    (q.target === undefined || s.target === q.target) &&
    (q.outcome === undefined || s.outcome === q.outcome)
  )
}

function sqliteAuditStore(db: DatabaseSync): AuditStore {
  const lastRecord = db.prepare('SELECT seq, hash FROM audit_records ORDER BY seq DESC LIMIT 1')
  const lastPrune = db.prepare(
    "SELECT seq, hash FROM audit_checkpoints WHERE reason = 'prune' ORDER BY seq DESC LIMIT 1",
  )
  const insert = db.prepare(
    `INSERT INTO audit_records (seq, at, type, subject, target, outcome, prev_hash, hash, body)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
  )
  const insertCheckpoint = db.prepare(
    'INSERT INTO audit_checkpoints (seq, hash, at, reason, key_id, signature) VALUES (?, ?, ?, ?, ?, ?)',
  )
  const head = (): ChainHead => {
    const row = (lastRecord.get() ?? lastPrune.get()) as Row | undefined
    return row ? { seq: Number(row.seq), hash: String(row.hash) } : { seq: 0, hash: GENESIS_HASH }
  }
  const transaction = <T>(work: () => T): T => {
    db.exec('BEGIN IMMEDIATE')
    try {
      const result = work()
      db.exec('COMMIT')
      return result
    } catch (err) {
      db.exec('ROLLBACK')
      throw err
    }
  }
  const addCheckpoint = (c: Checkpoint) =>
    insertCheckpoint.run(c.seq, c.hash, c.at, c.reason, c.keyId, c.signature)
  return {
    async append(build) {
      return transaction(() => {
        const added = build(head())
        for (const r of added) {
          const s = searchableOf(r)
          insert.run(
            r.seq,
            r.at,
            s.type,
            s.subject,
            s.target,
            s.outcome,
            r.prevHash,
            r.hash,
            r.body,
          )
        }
        return added
      })
    },
    async head() {
      return head()
    },
    async read(query: AuditQuery = {}) {
      const clauses: string[] = []
      const values: SQLInputValue[] = []
      const where = (clause: string, value: SQLInputValue | undefined) => {
        if (value === undefined) return
        clauses.push(clause)
        values.push(value)
      }
      where('seq > ?', query.afterSeq)
      where('subject = ?', query.subject)
      where('target = ?', query.target)
      where('outcome = ?', query.outcome)
      where('at >= ?', query.since)
      where('at <= ?', query.until)
      const sql =
        'SELECT seq, at, prev_hash, hash, body FROM audit_records' +
        (clauses.length > 0 ? ` WHERE ${clauses.join(' AND ')}` : '') +
        ` ORDER BY seq ${query.newestFirst ? 'DESC' : 'ASC'}` +
        (query.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`)
      const records = (db.prepare(sql).all(...values) as Row[]).map((row) => ({
        seq: Number(row.seq),
        at: String(row.at),
        prevHash: String(row.prev_hash),
        hash: String(row.hash),
        body: String(row.body),
      }))
      // The columns are an index; the hashed body is the truth a record is returned on.
      return records.filter((r) => agrees(r, query))
    },
    async addCheckpoint(checkpoint) {
      addCheckpoint(checkpoint)
    },
    async checkpoints() {
      const rows = db.prepare('SELECT * FROM audit_checkpoints ORDER BY seq, at, id').all() as Row[]
      return rows.map((row) => ({
        seq: Number(row.seq),
        hash: String(row.hash),
        at: String(row.at),
        reason: String(row.reason) as Checkpoint['reason'],
        keyId: String(row.key_id),
        signature: String(row.signature),
      }))
    },
    async prune(checkpoint) {
      return transaction(() => {
        const removed = db.prepare('DELETE FROM audit_records WHERE seq <= ?').run(checkpoint.seq)
        addCheckpoint(checkpoint)
        return Number(removed.changes)
      })
    },
    async close() {
      if (db.isOpen) db.close()
    },
  }
}
