/**
 * The SQL schema as numbered migrations. A backend applies, in one transaction each, every
 * migration above the version recorded in `schema_version`; a migration is never edited once
 * released, only followed by a new one. Plain SQL that SQLite and PostgreSQL both accept.
 */

/** One step of the schema; `version` is its position, starting at 1. */
export interface Migration {
  readonly version: number
  readonly name: string
  readonly sql: string
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: 'pins',
    sql: `
      CREATE TABLE pins (
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
      CREATE TABLE pending_changes (
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
      CREATE TABLE pin_events (
        id INTEGER PRIMARY KEY,
        upstream TEXT NOT NULL,
        key TEXT NOT NULL,
        action TEXT NOT NULL,
        hash TEXT NOT NULL,
        previous_hash TEXT,
        actor TEXT NOT NULL,
        at TEXT NOT NULL
      );
      CREATE INDEX pin_events_by_key ON pin_events (upstream, key, id);
      CREATE TABLE baselines (
        name TEXT PRIMARY KEY,
        hash TEXT NOT NULL,
        document TEXT NOT NULL,
        approved_at TEXT NOT NULL,
        approved_by TEXT NOT NULL
      );
      CREATE TABLE counters (
        name TEXT PRIMARY KEY,
        value INTEGER NOT NULL
      );
      INSERT INTO counters (name, value) VALUES ('pins', 0);
    `,
  },
]
