/**
 * `barbican check --pins`: what an upstream advertises now against its approved pins, without
 * pinning or proposing anything. Any item whose definition differs from its pin, or that has no
 * pin, is a mismatch: in a pipeline, a rug pull (a tool that changed after approval) then stops
 * the deployment rather than only the first call to that tool.
 */
import type { PinnedItem } from '../store/store.ts'
import { diffDefinitions, type FieldChange } from './diff.ts'
import { type AdvertisedLists, type SurfaceItem, surfaceOf } from './surface.ts'

export interface PinMismatch {
  readonly key: string
  /** `changed`: differs from its pin; `unpinned`: never approved; `gone`: pinned, no longer offered. */
  readonly kind: 'changed' | 'unpinned' | 'gone'
  readonly changes: readonly FieldChange[]
}

/** Every item of `lists` that does not match `pinned` exactly, in key order. */
export function comparePins(lists: AdvertisedLists, pinned: readonly PinnedItem[]): PinMismatch[] {
  const approved = new Map(pinned.map((p) => [p.key, p]))
  const advertised = new Map<string, SurfaceItem>(surfaceOf(lists).map((i) => [i.key, i]))
  const out: PinMismatch[] = []
  for (const item of advertised.values()) {
    const pin = approved.get(item.key)
    if (pin === undefined) {
      out.push({
        key: item.key,
        kind: 'unpinned',
        changes: diffDefinitions(undefined, item.definition),
      })
    } else if (pin.hash !== item.hash) {
      out.push({
        key: item.key,
        kind: 'changed',
        changes: diffDefinitions(pin.definition, item.definition),
      })
    }
  }
  for (const pin of approved.values()) {
    if (!advertised.has(pin.key)) out.push({ key: pin.key, kind: 'gone', changes: [] })
  }
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
}
