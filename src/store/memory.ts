/**
 * The in-memory store: for tests and for gateways built in code without a config file, where
 * pins need not outlive the process. Values are copied in and out through JSON so callers can
 * never alias what the store holds, exactly as with a database.
 */
import type {
  Baseline,
  BaselineStore,
  PendingChange,
  PinEvent,
  PinnedItem,
  PinStore,
  Store,
} from './store.ts'

const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T
const slot = (upstream: string, key: string) => `${upstream}\u0000${key}`

function sorted<T extends { upstream: string; key: string }>(
  values: Iterable<T>,
  upstream?: string,
) {
  return [...values]
    .filter((v) => upstream === undefined || v.upstream === upstream)
    .sort((a, b) =>
      a.upstream === b.upstream ? compare(a.key, b.key) : compare(a.upstream, b.upstream),
    )
    .map(copy)
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0
}

/** A fresh, empty store held in this process. */
export function memoryStore(): Store {
  const pinnedItems = new Map<string, PinnedItem>()
  const pendingChanges = new Map<string, PendingChange>()
  const events: PinEvent[] = []
  const baselines = new Map<string, Baseline>()
  let revision = 0

  const pins: PinStore = {
    async pinned(upstream) {
      return sorted(pinnedItems.values(), upstream)
    },
    async pending(upstream) {
      return sorted(pendingChanges.values(), upstream)
    },
    async pin(item) {
      pinnedItems.set(slot(item.upstream, item.key), copy(item))
      revision++
    },
    async unpin(upstream, key) {
      if (pinnedItems.delete(slot(upstream, key))) revision++
    },
    async propose(change) {
      pendingChanges.set(slot(change.upstream, change.key), copy(change))
      revision++
    },
    async dismiss(upstream, key) {
      if (pendingChanges.delete(slot(upstream, key))) revision++
    },
    async record(event) {
      events.push(copy(event))
    },
    async history(filter = {}) {
      return events
        .filter(
          (e) =>
            (filter.upstream === undefined || e.upstream === filter.upstream) &&
            (filter.key === undefined || e.key === filter.key),
        )
        .map(copy)
    },
    async revision() {
      return revision
    },
    localWrites() {
      return revision
    },
  }
  const baselineStore: BaselineStore = {
    async get(name) {
      const b = baselines.get(name)
      return b === undefined ? undefined : copy(b)
    },
    async put(baseline) {
      baselines.set(baseline.name, copy(baseline))
    },
  }
  return { pins, baselines: baselineStore, async close() {} }
}
