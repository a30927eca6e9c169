/** Rows of the audit tables as the SQL backends return them (SQLite and PostgreSQL alike). */
import type { Checkpoint } from './audit-store.ts'
import type { AuditRecord } from './record.ts'

export type Row = Record<string, unknown>

/** A record row with its indexed columns as stored (verify compares them with the body). */
export function recordOfRow(row: Row): AuditRecord {
  return {
    seq: Number(row.seq),
    at: String(row.at),
    prevHash: String(row.prev_hash),
    hash: String(row.hash),
    body: String(row.body),
    searchable: {
      type: String(row.type),
      subject: String(row.subject),
      target: row.target === null || row.target === undefined ? null : String(row.target),
      outcome: String(row.outcome),
    },
  }
}

/** The columns a record is read with: the chain's and the index's. */
export const RECORD_COLUMNS = 'seq, at, type, subject, target, outcome, prev_hash, hash, body'

export function checkpointOfRow(row: Row): Checkpoint {
  return {
    seq: Number(row.seq),
    hash: String(row.hash),
    at: String(row.at),
    reason: String(row.reason) as Checkpoint['reason'],
    ...(row.number === null || row.number === undefined
      ? {}
      : { number: Number(row.number), prev: String(row.prev) }),
    keyId: String(row.key_id),
    signature: String(row.signature),
  }
}
