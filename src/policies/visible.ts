/**
 * What a caller may see, whichever policy judges it: a catalog with only the items it may use,
 * and `subscriptions/listen` parameters with only the resources it may watch. A URI without a
 * judged form (catalog/resource-uri.ts) is never visible.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { judgedTemplate, judgedUri } from '../catalog/resource-uri.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { Item, ItemKind } from './method-permissions.ts'

/** The catalog's lists with only the items `may` allows (the maps back stay whole). */
export function narrowCatalog(catalog: Catalog, may: (item: Item) => boolean): Catalog {
  const byName = (kind: ItemKind) => (entry: JsonObject) =>
    typeof entry.name === 'string' && may({ kind, name: entry.name })
  const byUri =
    (field: 'uri' | 'uriTemplate', judge: (uri: string) => string) => (entry: JsonObject) => {
      const uri = entry[field]
      return typeof uri === 'string' && mayJudged(uri, judge, may)
    }
  return {
    ...catalog,
    tools: catalog.tools.filter(byName('tool')),
    prompts: catalog.prompts.filter(byName('prompt')),
    resources: catalog.resources.filter(byUri('uri', judgedUri)),
    resourceTemplates: catalog.resourceTemplates.filter(byUri('uriTemplate', judgedTemplate)),
  }
}

/** Listen parameters without the resource subscriptions `may` refuses. */
export function watchable(
  params: JsonObject | undefined,
  may: (item: Item) => boolean,
): JsonObject | undefined {
  const notifications = params?.notifications
  if (!isPlainObject(notifications) || !Array.isArray(notifications.resourceSubscriptions)) {
    return params
  }
  const resourceSubscriptions = notifications.resourceSubscriptions.filter(
    (uri) => typeof uri === 'string' && mayJudged(uri, judgedUri, may),
  )
  return { ...params, notifications: { ...notifications, resourceSubscriptions } }
}

function mayJudged(
  uri: string,
  judge: (uri: string) => string,
  may: (item: Item) => boolean,
): boolean {
  let name: string
  try {
    name = judge(uri)
  } catch {
    return false // a URI without a judged form is never visible
  }
  return may({ kind: 'resource', name })
}
