/**
 * Rows of the pin tables as the SQL backends return them (SQLite and PostgreSQL name their
 * columns alike), turned back into the store's records.
 */
import type { ItemDefinition, PendingChange, PinEvent, PinKind, PinnedItem } from './store.ts'

export type Row = Record<string, unknown>

/** The columns pins and pending changes share: which item, and the definition seen for it. */
export function toItem(row: Row): ItemDefinition {
  return {
    upstream: String(row.upstream),
    key: String(row.key),
    kind: String(row.kind) as PinKind,
    name: String(row.name),
    hash: String(row.hash),
    definition: JSON.parse(String(row.definition)),
  }
}

export function toPinned(row: Row): PinnedItem {
  return {
    ...toItem(row),
    approvedAt: String(row.approved_at),
    approvedBy: String(row.approved_by),
  }
}

export function toPending(row: Row): PendingChange {
  return {
    ...toItem(row),
    previousHash: row.previous_hash === null ? null : String(row.previous_hash),
    reason: String(row.reason) as PendingChange['reason'],
    findings: JSON.parse(String(row.findings)) as unknown[],
    status: String(row.status) as PendingChange['status'],
    seenAt: String(row.seen_at),
    ...(row.decided_at === null ? {} : { decidedAt: String(row.decided_at) }),
    ...(row.decided_by === null ? {} : { decidedBy: String(row.decided_by) }),
  }
}

export function toEvent(row: Row): PinEvent {
  return {
    upstream: String(row.upstream),
    key: String(row.key),
    action: String(row.action) as PinEvent['action'],
    hash: String(row.hash),
    previousHash: row.previous_hash === null ? null : String(row.previous_hash),
    actor: String(row.actor),
    at: String(row.at),
  }
}
