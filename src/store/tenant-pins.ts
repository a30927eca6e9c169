/**
 * A tenant's view of the pin store (docs/tenants.md): two tenants may both name an upstream
 * `github`, so each tenant's pins are kept under the qualified name `TENANT.UPSTREAM`, which no
 * top-level upstream can have (names never contain a dot). The tenant's gateway sees its own
 * names and nothing of any other tenant's.
 */
import type { PinStore } from './store.ts'

/** The name an upstream of `tenant` is stored, linked and listed under outside its tenant. */
export function tenantQualified(tenant: string, upstream: string): string {
  return `${tenant}.${upstream}`
}

export function tenantPins(pins: PinStore, tenant: string): PinStore {
  const prefix = `${tenant}.`
  const outer = (upstream: string) => prefix + upstream
  const mine = <T extends { readonly upstream: string }>(items: readonly T[]): T[] => {
    const own: T[] = []
    for (const item of items) {
      if (item.upstream.startsWith(prefix)) {
        own.push({ ...item, upstream: item.upstream.slice(prefix.length) })
      }
    }
    return own
  }
  return {
    pinned: async (upstream) =>
      mine(await pins.pinned(upstream === undefined ? undefined : outer(upstream))),
    pending: async (upstream) =>
      mine(await pins.pending(upstream === undefined ? undefined : outer(upstream))),
    pin: (item) => pins.pin({ ...item, upstream: outer(item.upstream) }),
    unpin: (upstream, key) => pins.unpin(outer(upstream), key),
    propose: (change) => pins.propose({ ...change, upstream: outer(change.upstream) }),
    dismiss: (upstream, key) => pins.dismiss(outer(upstream), key),
    record: (event) => pins.record({ ...event, upstream: outer(event.upstream) }),
    history: async (filter) =>
      mine(
        await pins.history(
          filter?.upstream === undefined ? filter : { ...filter, upstream: outer(filter.upstream) },
        ),
      ),
    revision: () => pins.revision(),
    localWrites: () => pins.localWrites(),
  }
}
