/**
 * The PostgreSQL schema, as numbered migrations (ADR 055). One database holds what the embedded
 * installation keeps in three SQLite files: pins and baselines, the audit log, linked tokens.
 * Applying them is idempotent and safe with several replicas starting at once: the runner holds
 * a transaction-scoped advisory lock, so one applies each step and the others find it done.
 * A migration is never edited once released, only followed by a new one.
 */
import type { Pool, PoolClient } from 'pg'
import { BarbicanError } from '../common/errors.ts'

export interface PostgresMigration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

/** The advisory lock key of schema changes (any constant; "barbican" in ASCII, truncated). */
const MIGRATION_LOCK = 0x62617262

export const POSTGRES_MIGRATIONS: readonly PostgresMigration[] = [
  {
    version: 1,
    name: 'pins, baselines, audit log, linked tokens',
    sql: `
      CREATE TABLE barbican_pins (
        upstream TEXT NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        hash TEXT NOT NULL,
        definition TEXT NOT NULL,
        approved_at TEXT NOT NULL,
        approved_by TEXT NOT NULL,
        PRIMARY KEY (upstream, key)
      );
      CREATE TABLE barbican_pending_changes (
        upstream TEXT NOT NULL,
        key TEXT NOT NULL,
        kind TEXT NOT NULL,
        name TEXT NOT NULL,
        hash TEXT NOT NULL,
        definition TEXT NOT NULL,
        previous_hash TEXT,
        reason TEXT NOT NULL,
        findings TEXT NOT NULL,
        status TEXT NOT NULL,
        seen_at TEXT NOT NULL,
        decided_at TEXT,
        decided_by TEXT,
        PRIMARY KEY (upstream, key)
      );
      CREATE TABLE barbican_pin_events (
        id BIGSERIAL PRIMARY KEY,
        upstream TEXT NOT NULL,
        key TEXT NOT NULL,
        action TEXT NOT NULL,
        hash TEXT NOT NULL,
        previous_hash TEXT,
        actor TEXT NOT NULL,
        at TEXT NOT NULL
      );
      CREATE INDEX barbican_pin_events_by_key ON barbican_pin_events (upstream, key, id);
      CREATE TABLE barbican_baselines (
        name TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        document TEXT NOT NULL,
        approved_at TEXT NOT NULL,
        approved_by TEXT NOT NULL
      );
      CREATE TABLE barbican_counters (
        name TEXT PRIMARY KEY,
        value BIGINT NOT NULL
      );
      INSERT INTO barbican_counters (name, value) VALUES ('pins', 0);
      CREATE TABLE barbican_audit_records (
        seq BIGINT PRIMARY KEY,
        at TEXT NOT NULL,
        type TEXT NOT NULL,
        subject TEXT NOT NULL,
        target TEXT,
        outcome TEXT NOT NULL,
        prev_hash TEXT NOT NULL,
        hash TEXT NOT NULL,
        body TEXT NOT NULL
      );
      CREATE INDEX barbican_audit_by_subject ON barbican_audit_records (subject, seq);
      CREATE INDEX barbican_audit_by_target ON barbican_audit_records (target, seq);
      CREATE INDEX barbican_audit_by_at ON barbican_audit_records (at);
      CREATE TABLE barbican_audit_checkpoints (
        id BIGSERIAL PRIMARY KEY,
        seq BIGINT NOT NULL,
        hash TEXT NOT NULL,
        at TEXT NOT NULL,
        reason TEXT NOT NULL,
        key_id TEXT NOT NULL,
        signature TEXT NOT NULL
      );
      CREATE TABLE barbican_upstream_tokens (
        slot TEXT PRIMARY KEY,
        sealed TEXT NOT NULL,
        updated_at TEXT NOT NULL
      );
    `,
  },
  {
    version: 2,
    name: 'API keys (hashes)',
    sql: `
      CREATE TABLE barbican_api_keys (
        id TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        subject TEXT NOT NULL,
        tenant TEXT,
        scopes TEXT NOT NULL,
        created_at TEXT NOT NULL
      );
      INSERT INTO barbican_counters (name, value) VALUES ('api_keys', 0);
    `,
  },
  {
    version: 3,
    name: 'audit append in one prepared statement',
    // ADR 086. Takes the append lock (src/audit/postgres.ts APPEND_LOCK, 0x61756469), reads the
    // head, and inserts the rows only when the head is the one they were built on; otherwise it
    // writes nothing and fails with SQLSTATE BA001 (src/audit/postgres.ts HEAD_MOVED). Under READ
    // COMMITTED each statement in it takes a fresh snapshot, so the head read after the lock is
    // granted sees every append committed before. A procedure: a CALL answers no rows, so the
    // gateway parses no row description per batch. It chains nothing: the gateway hashed the rows.
    sql: `
      CREATE PROCEDURE barbican_audit_append(
        expected_seq BIGINT, expected_hash TEXT, seqs BIGINT[], ats TEXT[], types TEXT[],
        subjects TEXT[], targets TEXT[], outcomes TEXT[], prev_hashes TEXT[], hashes TEXT[],
        bodies TEXT[]
      ) LANGUAGE plpgsql AS $fn$
      DECLARE
        head_seq BIGINT;
        head_hash TEXT;
      BEGIN
        PERFORM pg_advisory_xact_lock(1635083369);
        SELECT h.seq, h.hash INTO head_seq, head_hash FROM (
          (SELECT r.seq, r.hash FROM barbican_audit_records r ORDER BY r.seq DESC LIMIT 1)
          UNION ALL
          (SELECT c.seq, c.hash FROM barbican_audit_checkpoints c WHERE c.reason = 'prune'
           ORDER BY c.seq DESC LIMIT 1)
        ) AS h ORDER BY h.seq DESC LIMIT 1;
        IF NOT FOUND THEN
          head_seq := 0;
          head_hash := expected_hash;
        END IF;
        IF head_seq <> expected_seq OR head_hash <> expected_hash THEN
          RAISE EXCEPTION 'the audit chain head moved to %', head_seq USING ERRCODE = 'BA001';
        END IF;
        INSERT INTO barbican_audit_records
          (seq, at, type, subject, target, outcome, prev_hash, hash, body)
        SELECT * FROM unnest(seqs, ats, types, subjects, targets, outcomes, prev_hashes, hashes,
          bodies);
      END
      $fn$;
    `,
  },
  {
    version: 4,
    name: 'numbered, chained audit checkpoints',
    // ADR 102. Each checkpoint names its number and the hash of the one before it; the columns
    // stay null on checkpoints signed before (verify checks those as version 1).
    sql: `
      ALTER TABLE barbican_audit_checkpoints ADD COLUMN number BIGINT;
      ALTER TABLE barbican_audit_checkpoints ADD COLUMN prev TEXT;
    `,
  },
]

/** The newest schema version this build knows. */
export const POSTGRES_SCHEMA_VERSION = Math.max(...POSTGRES_MIGRATIONS.map((m) => m.version))

/** Runs `work` in one transaction on one pooled connection. */
export async function inTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const result = await work(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

async function currentVersion(client: Pool | PoolClient): Promise<number> {
  const exists = await client.query("SELECT to_regclass('barbican_schema_version') AS t")
  if (exists.rows[0]?.t === null) return 0
  const row = await client.query('SELECT MAX(version) AS v FROM barbican_schema_version')
  return Number(row.rows[0]?.v ?? 0)
}

/**
 * Applies every migration above the database's version; returns the versions applied (none when
 * up to date). Each runs in its own transaction under the migration lock.
 */
export async function migratePostgres(pool: Pool): Promise<number[]> {
  const applied: number[] = []
  for (const m of POSTGRES_MIGRATIONS) {
    const done = await inTransaction(pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK])
      await client.query(
        'CREATE TABLE IF NOT EXISTS barbican_schema_version (version INTEGER PRIMARY KEY, ' +
          'name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
      )
      if ((await currentVersion(client)) >= m.version) return false
      await client.query(m.sql)
      await client.query('INSERT INTO barbican_schema_version (version, name) VALUES ($1, $2)', [
        m.version,
        m.name,
      ])
      return true
    })
    if (done) applied.push(m.version)
  }
  return applied
}

/**
 * Refuses a database whose schema is not this build's (older: run `barbican migrate`; newer: a
 * newer Barbican migrated it), so a replica never writes to tables it does not understand.
 */
export async function assertSchemaCurrent(pool: Pool): Promise<void> {
  const version = await currentVersion(pool)
  if (version === POSTGRES_SCHEMA_VERSION) return
  throw new BarbicanError(
    'ERR_STORE_UNAVAILABLE',
    version < POSTGRES_SCHEMA_VERSION
      ? `the PostgreSQL schema is at version ${version}, this Barbican needs ${POSTGRES_SCHEMA_VERSION}: run \`barbican migrate\` (or set store.postgres.migrate: true)`
      : `the PostgreSQL schema is at version ${version}, newer than this Barbican knows (${POSTGRES_SCHEMA_VERSION}): upgrade Barbican`,
  )
}
