/**
 * The embedded audit backend: its own SQLite file beside the pin store (`.barbican/audit.db`),
 * in WAL mode. Searchable fields are copied into indexed columns; the body is the hashed truth
 * and reads return a record only if its body agrees with the filter.
 *
 * Durability without stalling the gateway: SQLite's own commit fsync would block the event loop
 * (node:sqlite is synchronous) for the whole flush, ~5 ms per transaction on a shared VM disk.
 * So commits run with `synchronous = NORMAL` (the transaction reaches the OS at COMMIT, which a
 * killed process cannot undo) and `append` settles only after an fsync of the WAL file on
 * libuv's thread pool, shared by every commit made before it started (group commit). A
 * checkpoint that moves the WAL into the database fsyncs the database first (SQLite does), so
 * a record is on disk in one file or the other when `append` settles.
 */
import { mkdirSync } from 'node:fs'
import { type FileHandle, open } from 'node:fs/promises'
import { dirname } from 'node:path'
import type { DatabaseSync, SQLInputValue, StatementSync } from 'node:sqlite'
import { loadSqlite } from '../store/load-sqlite.ts'
import type {
  AuditQuery,
  AuditStore,
  ChainHead,
  Checkpoint,
  CheckpointBuilder,
} from './audit-store.ts'
import { bodyAgrees } from './query.ts'
import { type AuditRecord, GENESIS_HASH, searchableOf } from './record.ts'
import { checkpointOfRow, RECORD_COLUMNS, type Row, recordOfRow } from './sql-rows.ts'

/**
 * Indexes that only reads use, made by the first read that filters on their column (any
 * process): until someone searches by subject, target or time, or prunes, an append maintains
 * no index but the primary key. Each index costs every append ~2.5 µs of CPU per record (ADR
 * 077), and a gateway that is never searched should not pay that on every call.
 */
const QUERY_INDEXES = {
  subject: 'CREATE INDEX IF NOT EXISTS audit_by_subject ON audit_records (subject, seq)',
  target: 'CREATE INDEX IF NOT EXISTS audit_by_target ON audit_records (target, seq)',
  /** `--since`/`--until`, and pruning (which reads the newest record older than the cutoff). */
  at: 'CREATE INDEX IF NOT EXISTS audit_by_at ON audit_records (at)',
} as const

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
  CREATE TABLE IF NOT EXISTS audit_checkpoints (
    id INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    hash TEXT NOT NULL,
    at TEXT NOT NULL,
    reason TEXT NOT NULL,
    key_id TEXT NOT NULL,
    signature TEXT NOT NULL,
    number INTEGER,
    prev TEXT
  );
`

/**
 * Checkpoints are numbered and chained since ADR 102: a log made by an earlier release gains the
 * two columns (null on its old checkpoints, which verify checks as version 1).
 */
function addCheckpointChainColumns(db: DatabaseSync): void {
  const columns = db.prepare('PRAGMA table_info(audit_checkpoints)').all() as Row[]
  if (columns.some((c) => c.name === 'number')) return
  try {
    db.exec(
      'BEGIN IMMEDIATE; ALTER TABLE audit_checkpoints ADD COLUMN number INTEGER; ' +
        'ALTER TABLE audit_checkpoints ADD COLUMN prev TEXT; COMMIT',
    )
  } catch (err) {
    if (db.isTransaction) db.exec('ROLLBACK')
    // Another process opening the same log added them first.
    if (!/duplicate column/.test((err as Error).message)) throw err
  }
}

const json = (value: unknown) => (value === undefined ? undefined : JSON.stringify(value))

/** What makes the WAL's commits durable (walSync). */
export interface WalSync {
  sync(): Promise<void>
  close(): Promise<void>
}

/**
 * Opens (creating file, folder and tables as needed) the audit log at `path`. `durable` makes
 * the WAL durable; tests replace it to see that nothing settles before it has.
 */
export async function openSqliteAuditStore(
  path: string,
  durable: (path: string) => WalSync = walSync,
): Promise<AuditStore> {
  const { DatabaseSync } = await loadSqlite()
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new DatabaseSync(path)
  // The gateway and the CLI (pins approve) append to one log: wait for the other's lock.
  db.exec('PRAGMA busy_timeout = 5000')
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL')
  db.exec('PRAGMA synchronous = NORMAL')
  db.exec(SCHEMA)
  addCheckpointChainColumns(db)
  return sqliteAuditStore(db, path === ':memory:' ? undefined : durable(path))
}

/**
 * An fsync of the WAL that covers every commit made before the call: one runs at a time, and
 * calls made while it runs share the next one.
 */
function walSync(path: string): WalSync {
  let handle: Promise<FileHandle> | undefined
  let running: Promise<void> | undefined
  let next: Promise<void> | undefined
  const fsync = async () => {
    if (!handle) {
      // The WAL file exists after the first commit; its directory entry is made durable once.
      handle = open(`${path}-wal`, 'r')
      const dir = await open(dirname(path), 'r')
      try {
        await dir.sync()
      } finally {
        await dir.close()
      }
    }
    await (await handle).sync()
  }
  const sync = (): Promise<void> => {
    if (!running) {
      running = fsync().finally(() => {
        running = undefined
      })
      return running
    }
    next ??= running.then(
      () => {
        next = undefined
        return sync()
      },
      () => {
        next = undefined
        return sync()
      },
    )
    return next
  }
  return {
    sync,
    async close() {
      await running?.catch(() => {})
      if (handle) await (await handle.catch(() => undefined))?.close()
    },
  }
}

/** The records `query` asks for; the index a filter needs is made on its first use. */
function readRecords(db: DatabaseSync, query: AuditQuery): AuditRecord[] {
  if (query.subject !== undefined) db.exec(QUERY_INDEXES.subject)
  if (query.target !== undefined) db.exec(QUERY_INDEXES.target)
  if (query.since !== undefined || query.until !== undefined) db.exec(QUERY_INDEXES.at)
  const clauses: string[] = []
  const values: SQLInputValue[] = []
  const where = (clause: string, value: SQLInputValue | undefined) => {
    if (value === undefined) return
    clauses.push(clause)
    values.push(value)
  }
  where('seq > ?', query.afterSeq)
  where('subject = ?', query.subject)
  where("json_extract(body, '$.tenant') = ?", query.tenant)
  where('target = ?', query.target)
  where('outcome = ?', query.outcome)
  where('at >= ?', query.since)
  where('at <= ?', query.until)
  where('body IN (SELECT value FROM json_each(?))', json(query.bodies))
  const sql =
    `SELECT ${RECORD_COLUMNS} FROM audit_records` +
    (clauses.length > 0 ? ` WHERE ${clauses.join(' AND ')}` : '') +
    ` ORDER BY seq ${query.newestFirst ? 'DESC' : 'ASC'}` +
    (query.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`)
  const records = (db.prepare(sql).all(...values) as Row[]).map(recordOfRow)
  // The columns are an index; the hashed body is the truth a record is returned on.
  return records.filter((r) => bodyAgrees(r, query))
}

/**
 * Most rows one INSERT takes, then the next smaller size: a group commit's records go in as few
 * statements as this allows. Each `run()` costs ~5 k instructions beside its rows (the bindings
 * reset, a step, and the `{ changes, lastInsertRowid }` object node:sqlite returns), which a
 * statement per record paid on every call (issue 33).
 */
const INSERT_ROWS = [32, 8, 1] as const

/** Inserts `records` in order, in statements of INSERT_ROWS rows. */
function insertRecords(
  records: readonly AuditRecord[],
  insertOf: (rows: number) => StatementSync,
): void {
  let i = 0
  for (const rows of INSERT_ROWS) {
    while (records.length - i >= rows) {
      const values: SQLInputValue[] = []
      for (let j = i; j < i + rows; j++) {
        const r = records[j]!
        const s = r.searchable ?? searchableOf(r)
        values.push(r.seq, r.at, s.type, s.subject, s.target, s.outcome, r.prevHash, r.hash, r.body)
      }
      insertOf(rows).run(...values)
      i += rows
    }
  }
}

function sqliteAuditStore(db: DatabaseSync, wal: WalSync | undefined): AuditStore {
  const lastRecord = db.prepare('SELECT seq, hash FROM audit_records ORDER BY seq DESC LIMIT 1')
  const lastPrune = db.prepare(
    "SELECT seq, hash FROM audit_checkpoints WHERE reason = 'prune' ORDER BY seq DESC LIMIT 1",
  )
  /** INSERT statements of 1, 8 and 32 rows, prepared on first use. */
  const inserts = new Map<number, StatementSync>()
  const insertOf = (rows: number): StatementSync => {
    let statement = inserts.get(rows)
    if (statement === undefined) {
      statement = db.prepare(
        'INSERT INTO audit_records (seq, at, type, subject, target, outcome, prev_hash, hash, body) ' +
          `VALUES ${Array(rows).fill('(?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
      )
      inserts.set(rows, statement)
    }
    return statement
  }
  const insertCheckpoint = db.prepare(
    `INSERT INTO audit_checkpoints (seq, hash, at, reason, key_id, signature, number, prev)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
  )
  const lastNumbered = db.prepare(
    'SELECT * FROM audit_checkpoints WHERE number IS NOT NULL ORDER BY number DESC LIMIT 1',
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
  /** Inside a transaction: the checkpoint `build` makes of `of` after the last numbered one. */
  const addCheckpoint = (of: ChainHead, build: CheckpointBuilder): Checkpoint => {
    const row = lastNumbered.get() as Row | undefined
    const c = build(of, row ? checkpointOfRow(row) : undefined)
    insertCheckpoint.run(
      c.seq,
      c.hash,
      c.at,
      c.reason,
      c.keyId,
      c.signature,
      c.number ?? null,
      c.prev ?? null,
    )
    return c
  }
  return {
    async append(build) {
      const added = transaction(() => {
        const added = build(head())
        insertRecords(added, insertOf)
        return added
      })
      // The commit reached the OS (synchronous = NORMAL); settling waits for the disk too, as
      // the batched journal is removed once this settles (ADR 048's stated loss window).
      await wal?.sync()
      return added
    },
    async head() {
      return head()
    },
    read: async (query: AuditQuery = {}) => readRecords(db, query),
    async addCheckpoint(build) {
      const checkpoint = transaction(() => addCheckpoint(head(), build))
      await wal?.sync()
      return checkpoint
    },
    async checkpoints() {
      const rows = db.prepare('SELECT * FROM audit_checkpoints ORDER BY seq, at, id').all() as Row[]
      return rows.map(checkpointOfRow)
    },
    async prune(last, build) {
      const pruned = transaction(() => {
        const deleted = db.prepare('DELETE FROM audit_records WHERE seq <= ?').run(last.seq)
        return { removed: Number(deleted.changes), checkpoint: addCheckpoint(last, build) }
      })
      await wal?.sync()
      return pruned
    },
    async close() {
      await wal?.close()
      if (db.isOpen) db.close()
    },
  }
}
