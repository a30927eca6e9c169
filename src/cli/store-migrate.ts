/**
 * `barbican migrate` brings the PostgreSQL schema up to date (ADR 055), and `barbican store
 * migrate --from sqlite:PATH --to postgres://…` moves an embedded installation into PostgreSQL:
 * pins, pending changes, their history, baselines, and the audit log with its chain and signed
 * checkpoints, row for row, so `barbican audit verify` still accepts it (with the same
 * audit-key.pem); with `--tokens sqlite:PATH`, the linked upstream tokens and dynamic client
 * registrations of that file, still sealed, so replicas given the same BARBICAN_SECRET_KEY read
 * them (each is sealed to its slot name, which moves with it). The copy is one transaction, into
 * a database that holds no Barbican data yet: a half-moved or merged installation is never left
 * behind.
 */
import { existsSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import type { DatabaseSync } from 'node:sqlite'
import type { PoolClient } from 'pg'
import { POSTGRES_SCHEMES, redactUrl, urlProblem } from '../common/backend-urls.ts'
import { pg } from '../common/lazy-deps.ts'
import { AUDIT_FILE } from '../gateway/audit-setup.ts'
import { loadSqlite } from '../store/load-sqlite.ts'
import { openPostgresPool, withDefaultUser } from '../store/postgres.ts'
import {
  inTransaction,
  migratePostgres,
  POSTGRES_SCHEMA_VERSION,
} from '../store/postgres-schema.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

/** `barbican migrate`: the configured PostgreSQL store's schema, brought up to date. */
export async function runMigrate(options: CommandOptions, io: CliIo): Promise<number> {
  const loaded = await loadForCommand(options, io, false)
  if (!loaded) return 1
  const store = loaded.config.store
  if (store?.kind !== 'postgres') {
    io.stderr(
      'barbican: no PostgreSQL store is configured (store.postgres.url or BARBICAN_POSTGRES_URL); the embedded SQLite store migrates itself\n',
    )
    return 1
  }
  const pool = new (pg().Pool)({ connectionString: withDefaultUser(store.url), max: 1 })
  pool.on('error', () => {})
  try {
    const applied = await migratePostgres(pool)
    io.stdout(
      applied.length === 0
        ? `ok    ${redactUrl(store.url)}: schema up to date (version ${POSTGRES_SCHEMA_VERSION})\n`
        : `ok    ${redactUrl(store.url)}: applied migration(s) ${applied.join(', ')}; schema at version ${POSTGRES_SCHEMA_VERSION}\n`,
    )
    return 0
  } catch (err) {
    io.stderr(`barbican: migrate ${redactUrl(store.url)}: ${(err as Error).message}\n`)
    return 1
  } finally {
    await pool.end()
  }
}

/** The tables moved, SQLite name → PostgreSQL name, with the serial id column if any. */
const TABLES: readonly {
  from: string
  to: string
  file: 'store' | 'audit' | 'tokens'
  serial?: string
}[] = [
  { from: 'pins', to: 'barbican_pins', file: 'store' },
  { from: 'pending_changes', to: 'barbican_pending_changes', file: 'store' },
  { from: 'pin_events', to: 'barbican_pin_events', file: 'store', serial: 'id' },
  { from: 'baselines', to: 'barbican_baselines', file: 'store' },
  { from: 'audit_records', to: 'barbican_audit_records', file: 'audit' },
  { from: 'audit_checkpoints', to: 'barbican_audit_checkpoints', file: 'audit', serial: 'id' },
  // Linked tokens and dynamic client registrations share one table (credentials/).
  { from: 'barbican_upstream_tokens', to: 'barbican_upstream_tokens', file: 'tokens' },
]

/** Slots of dynamic client registrations (credentials/client-registration.ts); the rest are links. */
const REGISTRATION_SLOT = 'client:'

/** The SQLite files a move reads, each open read-only; absent when there is none to move. */
type Sources = Record<'store' | 'audit' | 'tokens', DatabaseSync | undefined>

/** Where `store migrate` reads and writes, from its flags. */
interface MoveTargets {
  /** The store file. */
  readonly from: string
  /** The auth.tokens.sqlite file (`--tokens`). */
  readonly tokensPath: string | undefined
  /** The PostgreSQL URL. */
  readonly to: string
}

/** `barbican store migrate --from sqlite:PATH --to postgres://…`. */
export async function runStoreMigrate(
  args: readonly string[],
  values: {
    readonly from?: string | undefined
    readonly to?: string | undefined
    readonly tokens?: string | undefined
  },
  io: CliIo,
): Promise<number> {
  if (args[0] !== 'migrate') {
    io.stderr('barbican: usage: barbican store migrate --from sqlite:PATH --to postgres://…\n')
    return 2
  }
  const targets = moveTargetsOf(values, io)
  if (typeof targets === 'number') return targets
  const { from, tokensPath, to } = targets
  const { DatabaseSync } = await loadSqlite()
  const auditPath = join(dirname(from), AUDIT_FILE)
  const sources: Sources = {
    store: new DatabaseSync(from, { readOnly: true }),
    audit: existsSync(auditPath) ? new DatabaseSync(auditPath, { readOnly: true }) : undefined,
    tokens: tokensPath === undefined ? undefined : new DatabaseSync(tokensPath, { readOnly: true }),
  }
  let pool: Awaited<ReturnType<typeof openPostgresPool>> | undefined
  try {
    pool = await openPostgresPool(to, { migrate: true })
    const moved = await inTransaction(pool, async (client) => {
      await refuseHeldData(client, sources, to)
      const counts = await copyTables(client, sources)
      // Running replicas notice the new pins at their next revision read.
      await client.query("UPDATE barbican_counters SET value = value + 1 WHERE name = 'pins'")
      return counts
    })
    io.stdout(`ok    moved ${moved.join(', ')} from ${from} to ${redactUrl(to)}\n`)
    notesAfterMove(from, sources, io)
    return 0
  } catch (err) {
    io.stderr(`barbican: store migrate: ${(err as Error).message}\n`)
    return 1
  } finally {
    sources.store?.close()
    sources.audit?.close()
    sources.tokens?.close()
    await pool?.end()
  }
}

/** The flags, checked: the files must exist, the URL be PostgreSQL's; else the exit code. */
function moveTargetsOf(
  values: {
    readonly from?: string | undefined
    readonly to?: string | undefined
    readonly tokens?: string | undefined
  },
  io: CliIo,
): MoveTargets | number {
  const from = values.from?.startsWith('sqlite:') ? resolve(values.from.slice(7)) : undefined
  if (from === undefined) {
    io.stderr(
      'barbican: --from must be sqlite:PATH, the store file (e.g. sqlite:.barbican/barbican.db)\n',
    )
    return 2
  }
  if (!existsSync(from)) {
    io.stderr(`barbican: --from: ${from} does not exist\n`)
    return 1
  }
  const tokensPath =
    values.tokens === undefined
      ? undefined
      : values.tokens.startsWith('sqlite:')
        ? resolve(values.tokens.slice(7))
        : ''
  if (tokensPath === '') {
    io.stderr('barbican: --tokens must be sqlite:PATH, the auth.tokens.sqlite file\n')
    return 2
  }
  if (tokensPath !== undefined && !existsSync(tokensPath)) {
    io.stderr(`barbican: --tokens: ${tokensPath} does not exist\n`)
    return 1
  }
  const to = values.to ?? ''
  const problem = urlProblem(to, POSTGRES_SCHEMES)
  if (problem !== undefined) {
    io.stderr(`barbican: --to ${problem}\n`)
    return 2
  }
  return { from, tokensPath, to }
}

/** Throws when a table to be filled already holds rows: a move never merges installations. */
async function refuseHeldData(client: PoolClient, sources: Sources, to: string): Promise<void> {
  for (const t of TABLES) {
    // Tokens already linked in PostgreSQL are no obstacle when none are being moved.
    if (t.file === 'tokens' && sources.tokens === undefined) continue
    const held = await client.query(`SELECT 1 FROM ${t.to} LIMIT 1`)
    if ((held.rowCount ?? 0) > 0) {
      throw new Error(`${redactUrl(to)} already holds data (${t.to}): move into an empty database`)
    }
  }
}

/** Copies every table row for row, in rowid order; what was moved, counted for the report. */
async function copyTables(client: PoolClient, sources: Sources): Promise<string[]> {
  const counts: string[] = []
  for (const t of TABLES) {
    const db = sources[t.file]
    if (db === undefined) continue
    const rows = db.prepare(`SELECT * FROM ${t.from} ORDER BY rowid`).all() as Record<
      string,
      unknown
    >[]
    for (const row of rows) {
      const columns = Object.keys(row)
      const params = columns.map((_, i) => `$${i + 1}`)
      await client.query(
        `INSERT INTO ${t.to} (${columns.join(', ')}) VALUES (${params.join(', ')})`,
        columns.map((c) => row[c]),
      )
    }
    if (t.serial !== undefined && rows.length > 0) {
      // The next id continues after the copied ones.
      await client.query(
        `SELECT setval(pg_get_serial_sequence('${t.to}', '${t.serial}'), (SELECT MAX(${t.serial}) FROM ${t.to}))`,
      )
    }
    if (t.file === 'tokens') {
      const registrations = rows.filter((r) => String(r.slot).startsWith(REGISTRATION_SLOT))
      counts.push(
        `${rows.length - registrations.length} linked upstream tokens`,
        `${registrations.length} client registrations`,
      )
    } else counts.push(`${rows.length} ${t.from.replace(/_/g, ' ')}`)
  }
  return counts
}

/** What the operator does next: the audit key and secret key to share, the API keys to redo. */
function notesAfterMove(from: string, sources: Sources, io: CliIo): void {
  if (sources.audit !== undefined) {
    io.stdout(
      `note  the audit log is signed with ${join(dirname(from), 'audit-key.pem')}: give every replica that key, BARBICAN_AUDIT_KEY="$(cat ${join(dirname(from), 'audit-key.pem')})" (docs/deploy.md)\n`,
    )
  }
  io.stdout(
    sources.tokens === undefined
      ? 'note  no --tokens file given: linked tokens (auth.tokens.sqlite) are not moved, users link again\n'
      : 'note  linked tokens and client registrations stay sealed: give every replica the same BARBICAN_SECRET_KEY\n',
  )
  io.stdout(
    'note  API keys of a keys file are not moved: create them again with barbican keys create (kept in PostgreSQL)\n',
  )
}
