/**
 * The embedded store: one SQLite file through Node's built-in `node:sqlite`, so the default
 * installation needs no database server and no native add-on. Writes are synchronous and short;
 * the interfaces stay asynchronous for backends that are not.
 */
import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import type { DatabaseSync } from 'node:sqlite'
import { loadSqlite } from './load-sqlite.ts'
import { MIGRATIONS } from './migrations.ts'
import {
  baselineValues,
  eventValues,
  pendingValues,
  pinnedValues,
  type Row,
  toBaseline,
  toEvent,
  toPending,
  toPinned,
} from './rows.ts'
import type { BaselineStore, PinStore, Store } from './store.ts'

/** Opens (creating file, folder and schema as needed) the SQLite store at `path`. */
export async function openSqliteStore(path: string): Promise<Store> {
  const { DatabaseSync } = await loadSqlite()
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true })
  const db = new DatabaseSync(path)
  // Another process (the CLI) may write while a gateway runs: wait for its lock briefly.
  db.exec('PRAGMA busy_timeout = 5000')
  if (path !== ':memory:') db.exec('PRAGMA journal_mode = WAL')
  migrate(db)
  return sqliteStore(db)
}

function migrate(db: DatabaseSync): void {
  db.exec('CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)')
  const row = db.prepare('SELECT MAX(version) AS v FROM schema_version').get() as Row | undefined
  const current = typeof row?.v === 'number' ? row.v : 0
  for (const m of MIGRATIONS) {
    if (m.version <= current) continue
    transaction(db, () => {
      db.exec(m.sql)
      db.prepare('INSERT INTO schema_version (version) VALUES (?)').run(m.version)
    })
  }
}

function transaction(db: DatabaseSync, work: () => void): void {
  db.exec('BEGIN IMMEDIATE')
  try {
    work()
    db.exec('COMMIT')
  } catch (err) {
    db.exec('ROLLBACK')
    throw err
  }
}

function sqliteStore(db: DatabaseSync): Store {
  const bump = db.prepare("UPDATE counters SET value = value + 1 WHERE name = 'pins'")
  // Prepared once: the catalog reads the revision on every call, so compiling it each time showed
  // as 8% of the gateway's busy time under load (bench/, docs/performance.md).
  const revisionQuery = db.prepare("SELECT value FROM counters WHERE name = 'pins'")
  // Writes through this object, for callers that cache the revision (store.ts, localWrites).
  let localWrites = 0
  const write = (sql: string, ...values: (string | number | null)[]) => {
    localWrites++
    transaction(db, () => {
      const changes = db.prepare(sql).run(...values).changes
      if (Number(changes) > 0) bump.run()
    })
  }
  /** The rows of an item table (pins, pending changes), of one upstream or all, in key order. */
  const selectItems = (table: 'pins' | 'pending_changes', upstream: string | undefined): Row[] => {
    const filter = upstream === undefined ? '' : 'WHERE upstream = ?'
    const values = upstream === undefined ? [] : [upstream]
    return db
      .prepare(`SELECT * FROM ${table} ${filter} ORDER BY upstream, key`)
      .all(...values) as Row[]
  }

  const pins: PinStore = {
    async pinned(upstream) {
      return selectItems('pins', upstream).map(toPinned)
    },
    async pending(upstream) {
      return selectItems('pending_changes', upstream).map(toPending)
    },
    async pin(item) {
      write(
        `INSERT OR REPLACE INTO pins (upstream, key, kind, name, hash, definition, approved_at, approved_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
        ...pinnedValues(item),
      )
    },
    async unpin(upstream, key) {
      write('DELETE FROM pins WHERE upstream = ? AND key = ?', upstream, key)
    },
    async propose(c) {
      write(
        `INSERT OR REPLACE INTO pending_changes (upstream, key, kind, name, hash, definition,
           previous_hash, reason, findings, status, seen_at, decided_at, decided_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        ...pendingValues(c),
      )
    },
    async dismiss(upstream, key) {
      write('DELETE FROM pending_changes WHERE upstream = ? AND key = ?', upstream, key)
    },
    async record(e) {
      db.prepare(
        `INSERT INTO pin_events (upstream, key, action, hash, previous_hash, actor, at)
         VALUES (?, ?, ?, ?, ?, ?, ?)`,
      ).run(...eventValues(e))
    },
    async history(filter = {}) {
      const clauses: string[] = []
      const values: string[] = []
      if (filter.upstream !== undefined) {
        clauses.push('upstream = ?')
        values.push(filter.upstream)
      }
      if (filter.key !== undefined) {
        clauses.push('key = ?')
        values.push(filter.key)
      }
      const whereClause = clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : ''
      const rows = db
        .prepare(`SELECT * FROM pin_events ${whereClause} ORDER BY id`)
        .all(...values) as Row[]
      return rows.map(toEvent)
    },
    async revision() {
      const row = revisionQuery.get() as Row
      return Number(row.value)
    },
    localWrites() {
      return localWrites
    },
  }
  const baselines: BaselineStore = {
    async get(name) {
      const row = db.prepare('SELECT * FROM baselines WHERE name = ?').get(name) as Row | undefined
      return row === undefined ? undefined : toBaseline(row)
    },
    async put(b) {
      db.prepare(
        `INSERT OR REPLACE INTO baselines (name, hash, document, approved_at, approved_by)
         VALUES (?, ?, ?, ?, ?)`,
      ).run(...baselineValues(b))
    },
  }
  return {
    pins,
    baselines,
    async close() {
      if (db.isOpen) db.close()
    },
  }
}
