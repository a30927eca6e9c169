/**
 * Linked upstream tokens in PostgreSQL (ADR 055): the sealed entries of token-store.ts in one
 * table, so a user linked through one replica is linked on all of them. The pool opens on first
 * use, like the SQLite backend's file; `pg` is loaded only then.
 */
import type { Pool } from 'pg'
import type { SealedBackend } from './token-store.ts'

export function postgresBackend(
  url: string,
  options: { readonly migrate?: boolean } = {},
): SealedBackend & { close(): Promise<void> } {
  let pool: Promise<Pool> | undefined
  const open = () => {
    pool ??= import('../store/postgres.ts').then(({ openPostgresPool }) =>
      openPostgresPool(url, { migrate: options.migrate ?? true, maxConnections: 2 }),
    )
    // A failed open is retried at the next use instead of failing every later one.
    pool.catch(() => {
      pool = undefined
    })
    return pool
  }
  return {
    async get(slot) {
      const result = await (await open()).query(
        'SELECT sealed FROM barbican_upstream_tokens WHERE slot = $1',
        [slot],
      )
      const row = result.rows[0] as { sealed?: string } | undefined
      return row?.sealed
    },
    async put(slot, sealed) {
      await (await open()).query(
        `INSERT INTO barbican_upstream_tokens (slot, sealed, updated_at) VALUES ($1, $2, $3)
         ON CONFLICT (slot) DO UPDATE SET sealed = excluded.sealed, updated_at = excluded.updated_at`,
        [slot, sealed, new Date().toISOString()],
      )
    },
    async putIf(slot, expected, sealed) {
      const result = await (await open()).query(
        `UPDATE barbican_upstream_tokens SET sealed = $3, updated_at = $4
         WHERE slot = $1 AND sealed = $2`,
        [slot, expected, sealed, new Date().toISOString()],
      )
      return result.rowCount === 1
    },
    async delete(slot) {
      await (await open()).query('DELETE FROM barbican_upstream_tokens WHERE slot = $1', [slot])
    },
    async deleteIf(slot, expected) {
      const result = await (await open()).query(
        'DELETE FROM barbican_upstream_tokens WHERE slot = $1 AND sealed = $2',
        [slot, expected],
      )
      return result.rowCount === 1
    },
    async list() {
      const result = await (await open()).query(
        'SELECT slot FROM barbican_upstream_tokens ORDER BY slot',
      )
      return (result.rows as { slot: string }[]).map((r) => r.slot)
    },
    async close() {
      const opened = pool
      pool = undefined
      await (await opened?.catch(() => undefined))?.end()
    },
  }
}
