/**
 * Builders for gateway plans in tests: in-process upstreams made with the official SDK's server
 * on a memory transport pair, and default catalog rules.
 */

import type { CatalogRules, ItemRules } from '../../src/catalog/catalog.ts'
import type { NamespaceMode } from '../../src/catalog/names.ts'
import type { ServerPlan, UpstreamPlan } from '../../src/gateway/gateway.ts'
import { memoryPair } from '../../src/transports/memory.ts'

export const allowAll: ItemRules = {
  filter: () => true,
  rename: () => undefined,
  description: () => undefined,
}

export function rules(mode: NamespaceMode, tools: Partial<ItemRules> = {}): CatalogRules {
  return {
    namespacing: { mode, separator: '__' },
    tools: { ...allowAll, ...tools },
    prompts: allowAll,
    resources: allowAll,
  }
}

/** Anything with the SDK server's `connect(transport)`. */
export interface Connectable {
  connect(transport: never): Promise<void>
}

/**
 * An upstream plan whose every connection attempt builds a fresh SDK server with `build()` and
 * connects it in-process. `servers` collects the instances so tests can drive them.
 */
export function inProcessUpstream<S extends Connectable>(
  name: string,
  build: () => S,
  servers: S[] = [],
): UpstreamPlan {
  return {
    name,
    lazy: false,
    requestTimeoutMs: 5_000,
    createTransport: () => {
      const [ours, theirs] = memoryPair()
      const server = build()
      servers.push(server)
      void server.connect(theirs as never)
      return ours
    },
  }
}

export function serverPlan(
  name: string,
  upstreams: string[],
  catalogRules: CatalogRules,
): ServerPlan {
  return { name, upstreams, rules: catalogRules }
}
