/**
 * The PostgreSQL store (ADR 055): pins, pending changes, their history and baselines in the
 * tables of postgres-schema.ts, shared by every replica given the same URL. `revision()` reads a
 * counter bumped in the same transaction as each write, so a write by any replica or CLI moves
 * it; the trust guard reads it at most every 250 ms (trust/trust-guard.ts), never per call, and
 * calls that ask at once share one read.
 * `pg` is loaded only here, when PostgreSQL is configured (common/lazy-deps.ts).
 */
import { userInfo } from 'node:os'
import type { Pool } from 'pg'
import { redactUrl } from '../common/backend-urls.ts'
import { BarbicanError } from '../common/errors.ts'
import { pg } from '../common/lazy-deps.ts'
import { assertSchemaCurrent, inTransaction, migratePostgres } from './postgres-schema.ts'
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

export interface PostgresOptions {
  /** Apply pending migrations first (default); false: refuse a schema that is not current. */
  readonly migrate?: boolean
  /** Most connections this pool opens (default 4: replicas add up on the server). */
  readonly maxConnections?: number
}

/**
 * `url` with a user name when it names none, chosen as libpq chooses: `PGUSER`, else the name of
 * the operating-system user. The `pg` driver falls back on `$USER` alone, which systemd units and
 * containers often leave unset, and then fails with "no PostgreSQL user name specified".
 */
export function withDefaultUser(url: string, env: NodeJS.ProcessEnv = process.env): string {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return url
  }
  if (parsed.username !== '' || parsed.searchParams.has('user')) return url
  let user = env.PGUSER || env.USER
  if (!user) {
    try {
      user = userInfo().username
    } catch {
      return url
    }
  }
  parsed.username = encodeURIComponent(user)
  return parsed.toString()
}

/**
 * A pool on `url` with the schema checked (or migrated). A server that cannot be reached fails
 * here, at start, with ERR_STORE_UNAVAILABLE, never at the first call.
 */
export async function openPostgresPool(url: string, options: PostgresOptions = {}): Promise<Pool> {
  const { Pool } = pg()
  const pool = new Pool({
    connectionString: withDefaultUser(url),
    max: options.maxConnections ?? 4,
    connectionTimeoutMillis: 10_000,
    // An idle connection the server dropped must not take the process down.
    idleTimeoutMillis: 30_000,
  })
  pool.on('error', () => {})
  try {
    if (options.migrate ?? true) await migratePostgres(pool)
    else await assertSchemaCurrent(pool)
  } catch (err) {
    await pool.end().catch(() => {})
    if (err instanceof BarbicanError) throw err
    throw new BarbicanError(
      'ERR_STORE_UNAVAILABLE',
      `PostgreSQL at ${redactUrl(url)} cannot be used: ${(err as Error).message}`,
      { cause: err },
    )
  }
  return pool
}

/** Opens the store at `url`, its own pool closed by `close()`. */
export async function openPostgresStore(
  url: string,
  options: PostgresOptions = {},
): Promise<Store> {
  return postgresStore(await openPostgresPool(url, options), true)
}

/** Configuration baselines in `barbican_baselines`. */
function postgresBaselines(pool: Pool): BaselineStore {
  return {
    async get(name) {
      const result = await pool.query('SELECT * FROM barbican_baselines WHERE name = $1', [name])
      const row = result.rows[0] as Row | undefined
      return row === undefined ? undefined : toBaseline(row)
    },
    async put(b) {
      await pool.query(
        `INSERT INTO barbican_baselines (name, hash, document, approved_at, approved_by)
         VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (name) DO UPDATE SET hash = excluded.hash, document = excluded.document,
           approved_at = excluded.approved_at, approved_by = excluded.approved_by`,
        baselineValues(b),
      )
    },
  }
}

/** The store over an open pool; `ownsPool`: `close()` ends it. */
export function postgresStore(pool: Pool, ownsPool: boolean): Store {
  let localWrites = 0
  /** The revision read in flight, if any. */
  let reading: Promise<number> | undefined
  /** One statement, and the revision bumped in the same transaction when it changed a row. */
  const write = async (sql: string, values: unknown[]) => {
    localWrites++
    await inTransaction(pool, async (client) => {
      const result = await client.query(sql, values)
      if ((result.rowCount ?? 0) > 0) {
        await client.query("UPDATE barbican_counters SET value = value + 1 WHERE name = 'pins'")
      }
    })
  }
  const selectItems = async (
    table: 'barbican_pins' | 'barbican_pending_changes',
    upstream: string | undefined,
  ): Promise<Row[]> => {
    const filter = upstream === undefined ? '' : 'WHERE upstream = $1'
    const result = await pool.query(
      `SELECT * FROM ${table} ${filter} ORDER BY upstream COLLATE "C", key COLLATE "C"`,
      upstream === undefined ? [] : [upstream],
    )
    return result.rows as Row[]
  }

  const pins: PinStore = {
    async pinned(upstream) {
      return (await selectItems('barbican_pins', upstream)).map(toPinned)
    },
    async pending(upstream) {
      return (await selectItems('barbican_pending_changes', upstream)).map(toPending)
    },
    async pin(item) {
      await write(
        `INSERT INTO barbican_pins (upstream, key, kind, name, hash, definition, approved_at, approved_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (upstream, key) DO UPDATE SET kind = excluded.kind, name = excluded.name,
           hash = excluded.hash, definition = excluded.definition,
           approved_at = excluded.approved_at, approved_by = excluded.approved_by`,
        pinnedValues(item),
      )
    },
    async unpin(upstream, key) {
      await write('DELETE FROM barbican_pins WHERE upstream = $1 AND key = $2', [upstream, key])
    },
    async propose(c) {
      await write(
        `INSERT INTO barbican_pending_changes (upstream, key, kind, name, hash, definition,
           previous_hash, reason, findings, status, seen_at, decided_at, decided_by)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
         ON CONFLICT (upstream, key) DO UPDATE SET kind = excluded.kind, name = excluded.name,
           hash = excluded.hash, definition = excluded.definition,
           previous_hash = excluded.previous_hash, reason = excluded.reason,
           findings = excluded.findings, status = excluded.status, seen_at = excluded.seen_at,
           decided_at = excluded.decided_at, decided_by = excluded.decided_by`,
        pendingValues(c),
      )
    },
    async dismiss(upstream, key) {
      await write('DELETE FROM barbican_pending_changes WHERE upstream = $1 AND key = $2', [
        upstream,
        key,
      ])
    },
    async record(e) {
      await pool.query(
        `INSERT INTO barbican_pin_events (upstream, key, action, hash, previous_hash, actor, at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        eventValues(e),
      )
    },
    async history(filter = {}) {
      const clauses: string[] = []
      const values: string[] = []
      if (filter.upstream !== undefined) {
        values.push(filter.upstream)
        clauses.push(`upstream = $${values.length}`)
      }
      if (filter.key !== undefined) {
        values.push(filter.key)
        clauses.push(`key = $${values.length}`)
      }
      const where = clauses.length > 0 ? `WHERE ${clauses.join(' AND ')}` : ''
      const result = await pool.query(
        `SELECT * FROM barbican_pin_events ${where} ORDER BY id`,
        values,
      )
      return (result.rows as Row[]).map(toEvent)
    },
    revision() {
      // Concurrent calls that found the last read stale share this read (ADR 079): at c=16
      // each expiry of the trust guard's cache cost 16 identical queries.
      reading ??= pool
        .query("SELECT value FROM barbican_counters WHERE name = 'pins'")
        .then((result) => Number(result.rows[0]?.value ?? 0))
        .finally(() => {
          reading = undefined
        })
      return reading
    },
    localWrites() {
      return localWrites
    },
  }
  const baselines = postgresBaselines(pool)
  let closed = false
  return {
    pins,
    baselines,
    async close() {
      if (closed || !ownsPool) return
      closed = true
      await pool.end()
    },
  }
}
