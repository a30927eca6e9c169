/**
 * Applies a trust verdict to a virtual server's catalog: quarantined tools and prompts leave the
 * merged lists and their exposed names are kept aside, so a call names the change instead of
 * failing as unknown; quarantined resource templates leave the lists before the merge.
 */
import type { Catalog, Target, UpstreamLists } from '../catalog/catalog.ts'
import { itemKey } from './surface.ts'
import type { Quarantine, TrustVerdict } from './trust-guard.ts'

/** Removes quarantined resource templates from each upstream's lists (before the merge). */
export function withoutQuarantinedTemplates(
  lists: readonly UpstreamLists[],
  verdict: TrustVerdict,
): UpstreamLists[] {
  return lists.map((l) => {
    const hidden = verdict.quarantined.get(l.name)
    if (!hidden) return l
    const resourceTemplates = l.resourceTemplates.filter(
      (t) =>
        typeof t.uriTemplate !== 'string' ||
        !hidden.has(itemKey('resourceTemplate', t.uriTemplate)),
    )
    return { ...l, resourceTemplates }
  })
}

/**
 * The key a withheld item is kept under: its kind and its exposed name, so a quarantined tool
 * `dup` never withholds a prompt `dup` (kinds are separate namespaces in MCP).
 */
export function quarantineKey(kind: 'tool' | 'prompt', exposed: string): string {
  return itemKey(kind, exposed)
}

/** The catalog without quarantined tools and prompts, and their quarantine keys → why. */
export function quarantineCatalog(
  catalog: Catalog,
  verdict: TrustVerdict,
): { catalog: Catalog; quarantined: Map<string, Quarantine> } {
  const quarantined = new Map<string, Quarantine>()
  const changed = new Set<string>()
  const split = (targets: ReadonlyMap<string, Target>, kind: 'tool' | 'prompt') => {
    const kept = new Map<string, Target>()
    for (const [exposed, target] of targets) {
      const key = itemKey(kind, target.original)
      const q = verdict.quarantined.get(target.upstream)?.get(key)
      if (q) quarantined.set(quarantineKey(kind, exposed), q)
      else kept.set(exposed, target)
      if (verdict.changed.get(target.upstream)?.has(key)) changed.add(quarantineKey(kind, exposed))
    }
    return kept
  }
  const toolTargets = split(catalog.toolTargets, 'tool')
  const promptTargets = split(catalog.promptTargets, 'prompt')
  const pins = { changed }
  if (quarantined.size === 0) return { catalog: { ...catalog, pins }, quarantined }
  return {
    catalog: {
      ...catalog,
      pins,
      tools: catalog.tools.filter((t) => typeof t.name !== 'string' || toolTargets.has(t.name)),
      prompts: catalog.prompts.filter(
        (p) => typeof p.name !== 'string' || promptTargets.has(p.name),
      ),
      toolTargets,
      promptTargets,
    },
    quarantined,
  }
}
