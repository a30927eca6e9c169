/**
 * The audit log in PostgreSQL (ADR 055), shared by every replica. The chain stays one chain with
 * several writers: `append` takes a transaction-scoped advisory lock before it reads the head,
 * so appends from all replicas are serialized in the database and each builds on the record
 * the previous one committed. A group commit (audit-log.ts) makes that one transaction, with
 * one multi-row INSERT, per batch of calls, in two round trips. Durable when COMMIT returns (the server's fsync).
 */
import type { Pool } from 'pg'
import { inTransaction } from '../store/postgres-schema.ts'
import type { AuditQuery, AuditStore, ChainHead, Checkpoint } from './audit-store.ts'
import { bodyAgrees } from './query.ts'
import { GENESIS_HASH, searchableOf } from './record.ts'
import { checkpointOfRow, type Row, recordOfRow } from './sql-rows.ts'

/** The advisory lock key that serializes appends ("audi" in ASCII). */
const APPEND_LOCK = 0x61756469

const HEAD = `
  SELECT seq, hash FROM barbican_audit_records ORDER BY seq DESC LIMIT 1`
const PRUNE_HEAD = `
  SELECT seq, hash FROM barbican_audit_checkpoints WHERE reason = 'prune'
  ORDER BY seq DESC LIMIT 1`
/** The head in one statement: the last record, else what the last prune left. */
const HEAD_ONE = `
  SELECT seq, hash FROM ((${HEAD}) UNION ALL (${PRUNE_HEAD})) AS h ORDER BY seq DESC LIMIT 1`

/** The audit store over an open pool (store/postgres.ts openPostgresPool); `ownsPool`: close ends it. */
export function postgresAuditStore(pool: Pool, ownsPool: boolean): AuditStore {
  const head = async (client: Pick<Pool, 'query'>): Promise<ChainHead> => {
    const row = ((await client.query(HEAD)).rows[0] ?? (await client.query(PRUNE_HEAD)).rows[0]) as
      | Row
      | undefined
    return row ? { seq: Number(row.seq), hash: String(row.hash) } : { seq: 0, hash: GENESIS_HASH }
  }
  const insertCheckpoint = (client: Pick<Pool, 'query'>, c: Checkpoint) =>
    client.query(
      `INSERT INTO barbican_audit_checkpoints (seq, hash, at, reason, key_id, signature)
       VALUES ($1, $2, $3, $4, $5, $6)`,
      [c.seq, c.hash, c.at, c.reason, c.keyId, c.signature],
    )
  let closed = false
  return {
    async append(build) {
      // Two round trips per batch: lock and head, then rows and COMMIT. Both go as simple
      // (multi-statement) queries, so the rows are escaped literals (pg's escapeLiteral).
      const client = await pool.connect()
      try {
        const opened = (await client.query(
          `BEGIN; SELECT pg_advisory_xact_lock(${APPEND_LOCK}); ${HEAD_ONE}`,
        )) as unknown as { rows: Row[] }[]
        const row = opened[2]?.rows[0]
        const added = build(
          row ? { seq: Number(row.seq), hash: String(row.hash) } : { seq: 0, hash: GENESIS_HASH },
        )
        if (added.length === 0) {
          await client.query('COMMIT')
          return added
        }
        const text = (v: string | null | undefined) =>
          v === null || v === undefined ? 'NULL' : client.escapeLiteral(v)
        const rows = added.map((r) => {
          const s = r.searchable ?? searchableOf(r)
          const seq = Math.trunc(Number(r.seq))
          return `(${seq}, ${text(r.at)}, ${text(s.type)}, ${text(s.subject)}, ${text(s.target)}, ${text(s.outcome)}, ${text(r.prevHash)}, ${text(r.hash)}, ${text(r.body)})`
        })
        await client.query(
          `INSERT INTO barbican_audit_records
             (seq, at, type, subject, target, outcome, prev_hash, hash, body)
           VALUES ${rows.join(', ')}; COMMIT`,
        )
        return added
      } catch (err) {
        await client.query('ROLLBACK').catch(() => {})
        throw err
      } finally {
        client.release()
      }
    },
    head: () => head(pool),
    async read(query: AuditQuery = {}) {
      const clauses: string[] = []
      const values: unknown[] = []
      const where = (column: string, op: string, value: unknown) => {
        if (value === undefined) return
        values.push(value)
        clauses.push(`${column} ${op} $${values.length}`)
      }
      where('seq', '>', query.afterSeq)
      where('subject', '=', query.subject)
      where("(body::jsonb ->> 'tenant')", '=', query.tenant)
      where('target', '=', query.target)
      where('outcome', '=', query.outcome)
      where('at', '>=', query.since)
      where('at', '<=', query.until)
      const sql =
        'SELECT seq, at, prev_hash, hash, body FROM barbican_audit_records' +
        (clauses.length > 0 ? ` WHERE ${clauses.join(' AND ')}` : '') +
        ` ORDER BY seq ${query.newestFirst ? 'DESC' : 'ASC'}` +
        (query.limit === undefined ? '' : ` LIMIT ${Math.max(0, Math.floor(query.limit))}`)
      const records = ((await pool.query(sql, values)).rows as Row[]).map(recordOfRow)
      // The columns are an index; the hashed body is the truth a record is returned on.
      return records.filter((r) => bodyAgrees(r, query))
    },
    async addCheckpoint(checkpoint) {
      await insertCheckpoint(pool, checkpoint)
    },
    async checkpoints() {
      const result = await pool.query(
        'SELECT * FROM barbican_audit_checkpoints ORDER BY seq, at, id',
      )
      return (result.rows as Row[]).map(checkpointOfRow)
    },
    async prune(checkpoint) {
      return inTransaction(pool, async (client) => {
        // Under the append lock: a prune never races an append reading the head.
        await client.query('SELECT pg_advisory_xact_lock($1)', [APPEND_LOCK])
        const deleted = await client.query('DELETE FROM barbican_audit_records WHERE seq <= $1', [
          checkpoint.seq,
        ])
        await insertCheckpoint(client, checkpoint)
        return deleted.rowCount ?? 0
      })
    },
    async close() {
      if (closed || !ownsPool) return
      closed = true
      await pool.end()
    },
  }
}
