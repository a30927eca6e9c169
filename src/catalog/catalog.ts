/**
 * A virtual server's catalog: the merged, filtered, renamed and namespaced view of its
 * upstreams' tools, prompts, resources and resource templates, with the map from every exposed
 * name back to (upstream, original name). Rebuilt from the upstreams' cached lists whenever one
 * of them changes; lookups are then map reads.
 */

import type { ToolExposure } from '../config/config.ts'
import { nameProblem } from '../protocol/item-names.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { type Namespacing, prefixName, prefixUri } from './names.ts'
import { tryJudged } from './resource-uri.ts'

/** Decides whether an upstream's item (by its original name or URI) is exposed. */
export type NameFilter = (name: string, upstream: string) => boolean

export interface ItemRules {
  readonly filter: NameFilter
  /** The exposed name (before namespacing) for an upstream's item, or `undefined` to keep it. */
  readonly rename: (name: string, upstream: string) => string | undefined
  /** A description override for an item, by its exposed name. */
  readonly description: (exposed: string) => string | undefined
}

export interface UpstreamLists {
  readonly name: string
  readonly tools: readonly JsonObject[]
  readonly prompts: readonly JsonObject[]
  readonly resources: readonly JsonObject[]
  readonly resourceTemplates: readonly JsonObject[]
}

export interface Target {
  readonly upstream: string
  /** The name (tools, prompts) or URI (resources) on the upstream. */
  readonly original: string
}

/** A name two upstreams both wanted; the later one was renamed away or dropped. */
export interface Conflict {
  readonly kind: 'tool' | 'prompt' | 'resource' | 'resourceTemplate'
  readonly name: string
  readonly upstreams: readonly string[]
}

/**
 * A tool or prompt whose exposed name breaks MCP's name rules: never shown to clients
 * (docs/decisions/023). An operator can expose it under a valid name with `rename`.
 */
export interface HeldBack {
  readonly kind: 'tool' | 'prompt'
  readonly upstream: string
  /** The upstream's own name, as it advertised it. */
  readonly original: string
  /** The name clients would have seen, after renames and namespacing. */
  readonly exposed: string
  readonly reason: string
}

export interface Catalog {
  readonly tools: readonly JsonObject[]
  readonly prompts: readonly JsonObject[]
  readonly resources: readonly JsonObject[]
  readonly resourceTemplates: readonly JsonObject[]
  readonly toolTargets: ReadonlyMap<string, Target>
  readonly promptTargets: ReadonlyMap<string, Target>
  readonly resourceTargets: ReadonlyMap<string, Target>
  readonly conflicts: readonly Conflict[]
  readonly heldBack: readonly HeldBack[]
  /**
   * Pin state, when trust is on: the tools and prompts (by `kind:exposed` key) let through
   * although they differ from their approval; every other tool and prompt is pinned. Absent:
   * trust is off, nothing is pinned.
   */
  readonly pins?: { readonly changed: ReadonlySet<string> } | undefined
}

export interface CatalogRules {
  readonly namespacing: Namespacing
  readonly tools: ItemRules
  readonly prompts: ItemRules
  readonly resources: ItemRules
  /** How clients are offered the catalog (`tools.mode`, tools-only); absent: as is. */
  readonly exposure?: ToolExposure | undefined
}

/** Builds the catalog; `lists` are in configuration order, which fixes the merged order. */
export function buildCatalog(lists: readonly UpstreamLists[], rules: CatalogRules): Catalog {
  const conflicts: Conflict[] = []
  const heldBack: HeldBack[] = []
  const { namespacing } = rules
  const named = { namespacing, conflicts, heldBack }
  const tools = mergeNamed(lists, 'tools', 'tool', rules.tools, named)
  const prompts = mergeNamed(lists, 'prompts', 'prompt', rules.prompts, named)
  const resources = mergeUris(
    lists,
    'resources',
    'uri',
    'resource',
    rules.resources,
    namespacing,
    conflicts,
  )
  const templates = mergeUris(
    lists,
    'resourceTemplates',
    'uriTemplate',
    'resourceTemplate',
    rules.resources,
    namespacing,
    conflicts,
  )
  return {
    tools: tools.items,
    prompts: prompts.items,
    resources: resources.items,
    resourceTemplates: templates.items,
    toolTargets: tools.targets,
    promptTargets: prompts.targets,
    resourceTargets: resources.targets,
    conflicts,
    heldBack,
  }
}

function needsPrefix(mode: Namespacing['mode'], count: number, clash: boolean): boolean {
  if (mode === 'always') return count > 0
  if (mode === 'on-conflict') return clash
  return false
}

function mergeNamed(
  lists: readonly UpstreamLists[],
  key: 'tools' | 'prompts',
  kind: HeldBack['kind'],
  rules: ItemRules,
  {
    namespacing,
    conflicts,
    heldBack,
  }: { namespacing: Namespacing; conflicts: Conflict[]; heldBack: HeldBack[] },
): { items: JsonObject[]; targets: Map<string, Target> } {
  // First pass: exposed base names per upstream, to find clashes for on-conflict mode.
  const owners = new Map<string, string[]>()
  const staged: { upstream: string; original: string; base: string; item: JsonObject }[] = []
  for (const list of lists) {
    for (const item of list[key]) {
      const original = item.name
      if (typeof original !== 'string' || !rules.filter(original, list.name)) continue
      const base = rules.rename(original, list.name) ?? original
      staged.push({ upstream: list.name, original, base, item })
      const o = owners.get(base)
      if (o) o.push(list.name)
      else owners.set(base, [list.name])
    }
  }
  const items: JsonObject[] = []
  const targets = new Map<string, Target>()
  for (const { upstream, original, base, item } of staged) {
    const clash = (owners.get(base)?.length ?? 0) > 1
    const exposed = needsPrefix(namespacing.mode, 1, clash)
      ? prefixName(upstream, base, namespacing.separator)
      : base
    // Checked on the exposed name: a valid name can outgrow 128 characters once namespaced.
    const problem = nameProblem(exposed)
    if (problem !== undefined) {
      const grown = exposed !== original && nameProblem(original) === undefined
      const reason = grown ? problem.replace('the name', 'the exposed name') : problem
      heldBack.push({ kind, upstream, original, exposed, reason })
      continue
    }
    if (targets.has(exposed)) {
      // Only reachable in mode `never`: the first upstream keeps the name; report, never shadow.
      const existing = conflicts.find((c) => c.kind === kind && c.name === exposed)
      if (existing) (existing.upstreams as string[]).push(upstream)
      else
        conflicts.push({
          kind,
          name: exposed,
          upstreams: [targets.get(exposed)!.upstream, upstream],
        })
      continue
    }
    targets.set(exposed, { upstream, original })
    const description = rules.description(exposed) ?? rules.description(base)
    const out: JsonObject = exposed === original ? item : { ...item, name: exposed }
    items.push(description === undefined ? out : { ...out, description })
  }
  return { items, targets }
}

function mergeUris(
  lists: readonly UpstreamLists[],
  key: 'resources' | 'resourceTemplates',
  field: 'uri' | 'uriTemplate',
  kind: Conflict['kind'],
  rules: ItemRules,
  namespacing: Namespacing,
  conflicts: Conflict[],
): { items: JsonObject[]; targets: Map<string, Target> } {
  // A resource is listed as its upstream wrote it but found by its normalised URI
  // (catalog/resource-uri.ts), the form clients' URIs are judged and looked up in; one that has
  // none is not listed. Templates are found by their text.
  const exposedUri = (uri: unknown): string | undefined => {
    if (typeof uri !== 'string') return undefined
    return key === 'resources' ? tryJudged(uri) : uri
  }
  const counts = new Map<string, number>()
  for (const list of lists) {
    for (const item of list[key]) {
      const uri = exposedUri(item[field])
      if (uri !== undefined) counts.set(uri, (counts.get(uri) ?? 0) + 1)
    }
  }
  const items: JsonObject[] = []
  const targets = new Map<string, Target>()
  for (const list of lists) {
    for (const item of list[key]) {
      const original = item[field]
      const uri = exposedUri(original)
      if (typeof original !== 'string' || uri === undefined || !rules.filter(uri, list.name))
        continue
      const prefix = needsPrefix(namespacing.mode, 1, (counts.get(uri) ?? 0) > 1)
      // Judging the prefixed URI again changes nothing (resource-uri.ts keeps a prefix as is).
      const exposed = prefix ? prefixUri(list.name, uri) : uri
      if (targets.has(exposed)) {
        conflicts.push({
          kind,
          name: exposed,
          upstreams: [targets.get(exposed)!.upstream, list.name],
        })
        continue
      }
      targets.set(exposed, { upstream: list.name, original })
      items.push(prefix ? { ...item, [field]: prefixUri(list.name, original) } : item)
    }
  }
  return { items, targets }
}

/** Exposed name → definition, per catalog, built at the first look-up into it. */
const definitions = new WeakMap<Catalog, ReadonlyMap<string, JsonObject>>()

/** The exposed definition of a tool (annotations and schemas included), by its exposed name. */
export function toolDefinition(
  catalog: Catalog | undefined,
  exposed: unknown,
): JsonObject | undefined {
  if (catalog === undefined || typeof exposed !== 'string') return undefined
  let byName = definitions.get(catalog)
  if (byName === undefined) {
    byName = new Map(catalog.tools.map((t) => [String(t.name), t]))
    definitions.set(catalog, byName)
  }
  return byName.get(exposed)
}
