/**
 * Where a benched gateway's audit log stands, read from outside the gateway: the journal files
 * it has not committed yet (batched mode: `audit.db-batch.<n>` beside the embedded SQLite log,
 * `audit-batch.<n>` in a PostgreSQL replica's `audit.journalDir`) and the records its store
 * holds. `bench/backend-instructions.ts --drain` counts a window of calls up to the moment the
 * last of their records is committed, so that a configuration that commits per window pays its
 * commits inside the count, as one that commits before every reply does.
 *
 * A journal file is removed only once its records are committed (audit-log.ts
 * `#commitJournalled`), and the next write opens a new one: no journal file means nothing waits.
 */
import { join } from 'node:path'
import { journalFiles, journalIn } from '../src/audit/journal.ts'
import { loadSqlite } from '../src/store/load-sqlite.ts'

/** The records committed after `afterSeq`: how many, in how many commits, and the last seq. */
export interface Committed {
  readonly records: number
  /** Distinct commit times: every record of one group commit has its batch's `at`. */
  readonly commits: number
  readonly lastSeq: number
}

export interface AuditWatch {
  /** Resolves once no journal file is left: every record written so far is committed. */
  settle(timeoutMs?: number): Promise<void>
  /**
   * Resolves once no journal file is left and the store holds `expected` records after `since`
   * (what it then holds after `since`); throws if it holds more, or not that many in time.
   */
  drain(since: Committed, expected: number, timeoutMs?: number): Promise<Committed>
  /** The records committed after `afterSeq` (0: all). */
  committed(afterSeq?: number): Promise<Committed>
  close(): Promise<void>
}

/**
 * The watch for a gateway started from `config` (the generated barbican.json's contents) in
 * `dir` (where that file is): the embedded default keeps its log in `dir/.barbican/audit.db`,
 * a PostgreSQL one in the store's database.
 */
export async function watchAudit(
  config: Record<string, unknown>,
  dir: string,
): Promise<AuditWatch> {
  const audit = (config.audit ?? {}) as { journalDir?: string }
  const postgresUrl = (config.store as { postgres?: { url?: string } } | undefined)?.postgres?.url
  const embedded = join(dir, '.barbican', 'audit.db')
  const journal =
    audit.journalDir !== undefined
      ? journalIn(audit.journalDir)
      : postgresUrl === undefined
        ? `${embedded}-batch`
        : undefined
  let query: (afterSeq: number) => Promise<Committed>
  let close: () => Promise<void>
  if (postgresUrl !== undefined) {
    const { default: pg } = await import('pg')
    const client = new pg.Client({ connectionString: postgresUrl })
    await client.connect()
    query = async (afterSeq) => {
      const { rows } = await client.query(
        `SELECT count(*)::int AS records, count(DISTINCT at)::int AS commits,
           coalesce(max(seq), $1)::bigint AS last FROM barbican_audit_records WHERE seq > $1`,
        [afterSeq],
      )
      const row = rows[0] as { records: number; commits: number; last: string }
      return { records: row.records, commits: row.commits, lastSeq: Number(row.last) }
    }
    close = () => client.end()
  } else {
    const { DatabaseSync } = await loadSqlite()
    // Opened per read: the gateway creates the file at its start, after this watch exists.
    query = async (afterSeq) => {
      const db = new DatabaseSync(embedded, { readOnly: true })
      try {
        const row = db
          .prepare(
            `SELECT count(*) AS records, count(DISTINCT at) AS commits,
               coalesce(max(seq), ?) AS last FROM audit_records WHERE seq > ?`,
          )
          .get(afterSeq, afterSeq) as { records: number; commits: number; last: number }
        return { records: row.records, commits: row.commits, lastSeq: Number(row.last) }
      } finally {
        db.close()
      }
    }
    close = async () => {}
  }
  const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
  // Only the directory is read while records wait: the store is asked once they are in.
  const settle = async (deadline: number) => {
    while (journal !== undefined && journalFiles(journal).length > 0) {
      if (performance.now() > deadline) throw new Error(`audit journal ${journal} not drained`)
      await pause(5)
    }
  }
  return {
    committed: (afterSeq = 0) => query(afterSeq),
    settle: (timeoutMs = 120_000) => settle(performance.now() + timeoutMs),
    async drain(since, expected, timeoutMs = 120_000) {
      const deadline = performance.now() + timeoutMs
      await settle(deadline)
      for (;;) {
        const now = await query(since.lastSeq)
        if (now.records >= expected) {
          if (now.records > expected) {
            throw new Error(`${now.records} audit records committed, ${expected} calls made`)
          }
          return now
        }
        if (performance.now() > deadline) {
          throw new Error(`${now.records} of ${expected} audit records committed`)
        }
        await pause(5)
      }
    },
    close: () => close(),
  }
}
