/**
 * The `cedar` policy: judges every request against the operator's Cedar policies (ADR 034,
 * docs/policy.md), after `authorize`. Which action a method is and what it acts on come from the
 * method → permission table (method-permissions.ts), so no routed method goes unjudged:
 * server-level requests and lists need `list` on the server, an item request needs its action
 * on the item, and lists show only the items the caller may use (`call` a tool, `get` a prompt,
 * `read` a resource or template), so a hidden tool is also uncallable. In shadow mode a would-be
 * denial is logged and recorded, and the call goes on.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { quarantineKey } from '../trust/quarantine.ts'
import type {
  CedarAction,
  CedarDecision,
  CedarEngine,
  CedarTarget,
  PinState,
} from './cedar-engine.ts'
import { type Item, type ItemKind, permissionOf } from './method-permissions.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'
import { contextKey, type SecureContexts } from './secure-contexts.ts'
import { narrowCatalog, watchable } from './visible.ts'

export type CedarMode = 'enforce' | 'shadow'

/** The action each item request is, by method; other methods act on the server (`list`). */
const ITEM_ACTIONS: Readonly<Record<string, CedarAction>> = {
  'tools/call': 'call',
  'prompts/get': 'get',
  'resources/read': 'read',
  'resources/subscribe': 'subscribe',
  'resources/unsubscribe': 'subscribe',
  'completion/complete': 'complete',
  'tasks/get': 'call',
  'tasks/result': 'call',
  'tasks/cancel': 'call',
}

/** The action that lets a caller see an item in a list. */
const USE: Readonly<Record<ItemKind, CedarAction>> = {
  tool: 'call',
  prompt: 'get',
  resource: 'read',
}

/**
 * Where decisions on the server itself are cached: they read nothing of a catalog, so one cache
 * serves for the engine's life (the engine is rebuilt with the configuration).
 */
const SERVER_ONLY = {}

/** Most narrowed views one catalog keeps (one per identity); beyond, they are rebuilt. */
const VIEWS_PER_CATALOG = 1000

/**
 * `contexts`: the secure contexts the confirm policy tracks, for item labels (`resource.labels`)
 * and the caller's context labels (`context.labels`); absent, both are empty.
 */
export function cedarPolicy(
  engine: CedarEngine,
  mode: CedarMode,
  contexts?: SecureContexts,
): Policy {
  /** Each identity's view of a catalog, by identity key; dropped with the catalog. */
  const views = new WeakMap<Catalog, Map<string, Catalog>>()
  const targets = new WeakMap<Catalog, Map<string, CedarTarget>>()
  /** What Cedar sees of an item, built once per catalog and item. */
  const targetOf = (item: Item, catalog: Catalog | undefined): CedarTarget => {
    if (catalog === undefined) return describe(item, undefined, contexts)
    let byItem = targets.get(catalog)
    if (byItem === undefined) {
      byItem = new Map()
      targets.set(catalog, byItem)
    }
    const key = `${item.kind}:${item.name}`
    let target = byItem.get(key)
    if (target === undefined) {
      target = describe(item, catalog, contexts)
      byItem.set(key, target)
    }
    return target
  }
  /** The caller's context labels, read only when some policy reads `context.labels`. */
  const sessionLabels = (call: Call): string[] | undefined =>
    engine.readsSessionLabels && contexts
      ? contexts.held(contextKey(call.peer?.sessionId, call.identity))
      : undefined
  return {
    name: 'cedar',
    async handle(call: Call, next: Next): Promise<Reply> {
      const { request, route } = call
      const permission = permissionOf(request.method)
      const item = permission?.item?.(request, route)
      if (permission?.item && item === undefined && route.kind === 'unicast') {
        call.decisions?.push({ policy: 'cedar', effect: 'deny' })
        throw new BarbicanError('ERR_POLICY_DENIED', `${request.method} names nothing to judge`)
      }
      const action = (item && ITEM_ACTIONS[request.method]) || 'list'
      const catalog = item || permission?.list ? await call.catalog?.() : undefined
      const target: CedarTarget = item ? targetOf(item, catalog) : { kind: 'server' }
      const args = request.method === 'tools/call' ? request.params?.arguments : undefined
      const decision = engine.decide(
        {
          identity: call.identity,
          server: call.server,
          action,
          target,
          transport: call.transport,
          method: request.method,
          arguments: isPlainObject(args) ? args : undefined,
          sessionLabels: sessionLabels(call),
        },
        catalog ?? SERVER_ONLY,
      )
      const where = decision.reasons.join(', ') || undefined
      if (!decision.allowed) {
        const what = item ? `${action} "${item.name}"` : `${action} on the server "${call.server}"`
        const message = `Cedar policy: ${call.identity.subject} may not ${what}`
        if (mode === 'shadow') {
          call.log.warn('cedar shadow mode: would deny', {
            subject: call.identity.subject,
            method: request.method,
            action,
            ...(item ? { item: item.name } : {}),
            policies: decision.reasons,
            ...(decision.errors.length > 0 ? { errors: decision.errors } : {}),
          })
          call.decisions?.push({
            policy: 'cedar',
            effect: 'allow',
            rule: `shadow: would deny${where ? ` by ${where}` : ''}`,
          })
          return await next(call)
        }
        call.decisions?.push({ policy: 'cedar', effect: 'deny', rule: where })
        throw new BarbicanError('ERR_POLICY_DENIED', message)
      }
      call.decisions?.push({ policy: 'cedar', effect: 'allow', rule: where })
      if (mode === 'enforce' && permission?.list && route.kind === 'fanout') {
        const view = viewOf(route.catalog, call, views, (it) =>
          engine.decide(
            {
              identity: call.identity,
              server: call.server,
              action: USE[it.kind],
              target: targetOf(it, route.catalog),
              transport: call.transport,
              method: request.method,
              sessionLabels: sessionLabels(call),
            },
            route.catalog,
          ),
        )
        return await next({ ...call, route: { ...route, catalog: view } })
      }
      if (mode === 'enforce' && permission?.watches) {
        const params = watchable(
          request.params,
          (item) =>
            engine.decide(
              {
                identity: call.identity,
                server: call.server,
                action: 'subscribe',
                target: targetOf(item, catalog),
                transport: call.transport,
                method: request.method,
                sessionLabels: sessionLabels(call),
              },
              catalog,
            ).allowed,
        )
        return await next({ ...call, request: { ...request, params } })
      }
      return await next(call)
    },
  }
}

/**
 * What Cedar sees of an item: its upstream, pin state and labels, and, for a tool, its
 * annotations.
 */
function describe(
  item: Item,
  catalog: Catalog | undefined,
  contexts: SecureContexts | undefined,
): CedarTarget {
  if (catalog === undefined) return { kind: item.kind, name: item.name }
  const targets =
    item.kind === 'tool'
      ? catalog.toolTargets
      : item.kind === 'prompt'
        ? catalog.promptTargets
        : catalog.resourceTargets
  const upstream = targets.get(item.name)?.upstream
  let annotations: JsonObject | undefined
  if (item.kind === 'tool') {
    const entry = toolsOf(catalog).get(item.name)
    annotations = isPlainObject(entry?.annotations) ? entry.annotations : undefined
  }
  const pinState: PinState =
    catalog.pins === undefined || item.kind === 'resource'
      ? 'unpinned'
      : catalog.pins.changed.has(quarantineKey(item.kind, item.name))
        ? 'changed'
        : 'pinned'
  const labels =
    upstream === undefined || contexts === undefined
      ? []
      : item.kind === 'tool'
        ? [...contexts.labelsOf(upstream, item.name)]
        : [...contexts.upstreamLabels(upstream)]
  const upstreamLabels =
    upstream === undefined || contexts === undefined ? [] : [...contexts.upstreamLabels(upstream)]
  return {
    kind: item.kind,
    name: item.name,
    upstream,
    annotations,
    pinState,
    labels: labels.sort(),
    upstreamLabels: upstreamLabels.sort(),
  }
}

const toolsByName = new WeakMap<Catalog, Map<unknown, JsonObject>>()

/** A catalog's tools by name, indexed once per catalog (a call must not scan the list). */
function toolsOf(catalog: Catalog): Map<unknown, JsonObject> {
  let tools = toolsByName.get(catalog)
  if (tools === undefined) {
    tools = new Map(catalog.tools.map((t) => [t.name, t]))
    toolsByName.set(catalog, tools)
  }
  return tools
}

/**
 * The catalog as one caller may see it, kept per catalog and identity: lists are frequent, and
 * a new catalog (a list changed) starts fresh views. Time-dependent policies are applied to
 * calls, not to views already built.
 */
function viewOf(
  catalog: Catalog,
  call: Call,
  views: WeakMap<Catalog, Map<string, Catalog>>,
  decide: (item: Item) => CedarDecision,
): Catalog {
  let byIdentity = views.get(catalog)
  if (byIdentity === undefined) {
    byIdentity = new Map()
    views.set(catalog, byIdentity)
  }
  const { identity } = call
  const key = JSON.stringify([
    identity.subject,
    identity.tenant,
    identity.client,
    identity.scopes,
    identity.claims,
    call.transport,
  ])
  let view = byIdentity.get(key)
  if (view === undefined) {
    view = narrowCatalog(catalog, (item) => decide(item).allowed)
    if (byIdentity.size >= VIEWS_PER_CATALOG) byIdentity.clear()
    byIdentity.set(key, view)
  }
  return view
}
