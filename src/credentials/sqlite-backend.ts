/**
 * A persistent backend for linked upstream tokens: one table in a SQLite file (Node's built-in
 * `node:sqlite`), holding only sealed entries. Tokens survive a restart when the sealing key does
 * too (`BARBICAN_SECRET_KEY`); entries sealed with another key simply read as "not linked".
 */
import { mkdirSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import type { DatabaseSync } from 'node:sqlite'
import { loadSqlite } from '../store/load-sqlite.ts'
import type { SealedBackend } from './token-store.ts'

/** Opens lazily (first use), creating the file and table as needed. */
export function sqliteBackend(path: string): SealedBackend & { close(): void } {
  let db: Promise<DatabaseSync> | undefined
  const open = () => {
    db ??= (async () => {
      const { DatabaseSync } = await loadSqlite()
      const file = path === ':memory:' ? path : resolve(path)
      if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true })
      const handle = new DatabaseSync(file)
      handle.exec('PRAGMA busy_timeout = 5000')
      handle.exec(
        'CREATE TABLE IF NOT EXISTS barbican_upstream_tokens (' +
          'slot TEXT PRIMARY KEY, sealed TEXT NOT NULL, updated_at TEXT NOT NULL)',
      )
      return handle
    })()
    return db
  }
  return {
    async get(slot) {
      const row = (await open())
        .prepare('SELECT sealed FROM barbican_upstream_tokens WHERE slot = ?')
        .get(slot) as { sealed?: string } | undefined
      return row?.sealed
    },
    async put(slot, sealed) {
      ;(await open())
        .prepare(
          'INSERT INTO barbican_upstream_tokens (slot, sealed, updated_at) VALUES (?, ?, ?) ' +
            'ON CONFLICT(slot) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at',
        )
        .run(slot, sealed, new Date().toISOString())
    },
    async putIf(slot, expected, sealed) {
      const { changes } = (await open())
        .prepare(
          'UPDATE barbican_upstream_tokens SET sealed = ?, updated_at = ? WHERE slot = ? AND sealed = ?',
        )
        .run(sealed, new Date().toISOString(), slot, expected)
      return Number(changes) === 1
    },
    async delete(slot) {
      ;(await open()).prepare('DELETE FROM barbican_upstream_tokens WHERE slot = ?').run(slot)
    },
    async deleteIf(slot, expected) {
      const { changes } = (await open())
        .prepare('DELETE FROM barbican_upstream_tokens WHERE slot = ? AND sealed = ?')
        .run(slot, expected)
      return Number(changes) === 1
    },
    async list() {
      const rows = (await open())
        .prepare('SELECT slot FROM barbican_upstream_tokens ORDER BY slot')
        .all() as { slot: string }[]
      return rows.map((r) => r.slot)
    },
    close() {
      void db?.then((handle) => handle.close()).catch(() => {})
    },
  }
}
