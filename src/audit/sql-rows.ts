/** Rows of the audit tables as the SQL backends return them (SQLite and PostgreSQL alike). */
import type { Checkpoint } from './audit-store.ts'
import type { AuditRecord } from './record.ts'

export type Row = Record<string, unknown>

export function recordOfRow(row: Row): AuditRecord {
  return {
    seq: Number(row.seq),
    at: String(row.at),
    prevHash: String(row.prev_hash),
    hash: String(row.hash),
    body: String(row.body),
  }
}

export function checkpointOfRow(row: Row): Checkpoint {
  return {
    seq: Number(row.seq),
    hash: String(row.hash),
    at: String(row.at),
    reason: String(row.reason) as Checkpoint['reason'],
    keyId: String(row.key_id),
    signature: String(row.signature),
  }
}
