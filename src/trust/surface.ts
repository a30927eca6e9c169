/**
 * An upstream's surface: everything it advertises that can reach a model's context, cut into
 * the items that are pinned one by one. Each tool, prompt and resource template is one item
 * with its full definition (description, schemas, annotations, icons, `_meta`, …); the server's
 * instructions and its identity are one item each.
 */
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { PinKind } from '../store/store.ts'
import { canonicalHash } from './canonical.ts'

/** One pinnable item with its definition and hash. */
export interface SurfaceItem {
  readonly kind: PinKind
  readonly name: string
  /** `kind:name`, unique within the upstream. */
  readonly key: string
  readonly definition: unknown
  readonly hash: string
}

/** What one upstream advertises, as lists and the `initialize` result. */
export interface AdvertisedLists {
  readonly tools: readonly JsonObject[]
  readonly prompts: readonly JsonObject[]
  readonly resourceTemplates: readonly JsonObject[]
  readonly instructions?: string | undefined
  /** `serverInfo` from `initialize`. */
  readonly serverInfo?: JsonObject | undefined
}

/** The key of an item, as stored and as typed in `barbican pins approve`. */
export function itemKey(kind: PinKind, name: string): string {
  return `${kind}:${name}`
}

/** Builds the surface of one upstream; items without a usable name are skipped. */
export function surfaceOf(lists: AdvertisedLists): SurfaceItem[] {
  const items: SurfaceItem[] = []
  const add = (kind: PinKind, name: string, definition: unknown) =>
    items.push({
      kind,
      name,
      key: itemKey(kind, name),
      definition,
      hash: canonicalHash(definition),
    })
  for (const tool of lists.tools) if (typeof tool.name === 'string') add('tool', tool.name, tool)
  for (const prompt of lists.prompts)
    if (typeof prompt.name === 'string') add('prompt', prompt.name, prompt)
  for (const template of lists.resourceTemplates)
    if (typeof template.uriTemplate === 'string')
      add('resourceTemplate', template.uriTemplate, template)
  if (lists.instructions !== undefined) add('instructions', '', lists.instructions)
  if (lists.serverInfo !== undefined) add('identity', '', lists.serverInfo)
  return items
}
