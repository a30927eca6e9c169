/**
 * Rows of the pin tables as the SQL backends return them (SQLite and PostgreSQL name their
 * columns alike), turned back into the store's records; and the other way, a record's values in
 * the order of the columns each backend's INSERT lists (the same order in both).
 */
import type {
  Baseline,
  ItemDefinition,
  PendingChange,
  PinEvent,
  PinKind,
  PinnedItem,
} from './store.ts'

export type Row = Record<string, unknown>

/** A column's value as both drivers take it. */
export type Value = string | null

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

export function toBaseline(row: Row): Baseline {
  return {
    name: String(row.name),
    hash: String(row.hash),
    document: JSON.parse(String(row.document)),
    approvedAt: String(row.approved_at),
    approvedBy: String(row.approved_by),
  }
}

/** upstream, key, kind, name, hash, definition. */
function itemValues(i: ItemDefinition): Value[] {
  return [i.upstream, i.key, i.kind, i.name, i.hash, JSON.stringify(i.definition ?? null)]
}

/** The item's columns, then approved_at, approved_by. */
export function pinnedValues(item: PinnedItem): Value[] {
  return [...itemValues(item), item.approvedAt, item.approvedBy]
}

/**
 * The item's columns, then previous_hash, reason, findings, status, seen_at, decided_at,
 * decided_by.
 */
export function pendingValues(c: PendingChange): Value[] {
  return [
    ...itemValues(c),
    c.previousHash,
    c.reason,
    JSON.stringify(c.findings),
    c.status,
    c.seenAt,
    c.decidedAt ?? null,
    c.decidedBy ?? null,
  ]
}

/** upstream, key, action, hash, previous_hash, actor, at. */
export function eventValues(e: PinEvent): Value[] {
  return [e.upstream, e.key, e.action, e.hash, e.previousHash, e.actor, e.at]
}

/** name, hash, document, approved_at, approved_by. */
export function baselineValues(b: Baseline): Value[] {
  return [b.name, b.hash, JSON.stringify(b.document ?? null), b.approvedAt, b.approvedBy]
}
