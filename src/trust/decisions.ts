/**
 * An operator's decisions on pending changes: approve (the definition becomes the pin), reject
 * (it stays hidden while the server advertises it), and the readable review of each change.
 * Used by `barbican pins` and by anything else that manages pins (an admin API, tests).
 */
import { BarbicanError } from '../common/errors.ts'
import type { PendingChange, PinnedItem, PinStore } from '../store/store.ts'
import { diffDefinitions, type FieldChange } from './diff.ts'

/** A pending change with what it changes relative to the approved pin. */
export interface ChangeReview {
  readonly change: PendingChange
  readonly approved: PinnedItem | undefined
  readonly changes: readonly FieldChange[]
}

/** Pending (and rejected) changes, of one upstream or all, with their field-by-field diffs. */
export async function reviewChanges(
  store: PinStore,
  filter: { readonly upstream?: string | undefined; readonly key?: string | undefined } = {},
): Promise<ChangeReview[]> {
  const pending = await store.pending(filter.upstream)
  const reviews: ChangeReview[] = []
  for (const change of pending) {
    if (filter.key !== undefined && change.key !== filter.key) continue
    const approved = (await store.pinned(change.upstream)).find((p) => p.key === change.key)
    reviews.push({
      change,
      approved,
      changes: diffDefinitions(approved?.definition, change.definition),
    })
  }
  return reviews
}

async function find(store: PinStore, upstream: string, key: string): Promise<PendingChange> {
  const change = (await store.pending(upstream)).find((p) => p.key === key)
  if (!change) {
    throw new BarbicanError(
      'ERR_INVALID_PARAMS',
      `No pending change for ${key} of upstream "${upstream}" (see: barbican pins list)`,
    )
  }
  return change
}

/** Makes the pending definition the approved pin; the item is served again at the next list. */
export async function approveChange(
  store: PinStore,
  upstream: string,
  key: string,
  actor: string,
  now = new Date(),
): Promise<PinnedItem> {
  const change = await find(store, upstream, key)
  const pin: PinnedItem = {
    upstream,
    key,
    kind: change.kind,
    name: change.name,
    hash: change.hash,
    definition: change.definition,
    approvedAt: now.toISOString(),
    approvedBy: actor,
  }
  await store.pin(pin)
  await store.dismiss(upstream, key)
  await store.record({
    upstream,
    key,
    action: 'approved',
    hash: change.hash,
    previousHash: change.previousHash,
    actor,
    at: pin.approvedAt,
  })
  return pin
}

/** Rejects the pending definition: it stays quarantined, and is not proposed again. */
export async function rejectChange(
  store: PinStore,
  upstream: string,
  key: string,
  actor: string,
  now = new Date(),
): Promise<void> {
  const change = await find(store, upstream, key)
  const at = now.toISOString()
  await store.propose({ ...change, status: 'rejected', decidedAt: at, decidedBy: actor })
  await store.record({
    upstream,
    key,
    action: 'rejected',
    hash: change.hash,
    previousHash: change.previousHash,
    actor,
    at,
  })
}
