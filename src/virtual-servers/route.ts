/**
 * Resolves where a client request goes before the policy chain runs, so every policy sees the
 * same answer: a merged list (fanout), one upstream (unicast), or Barbican itself (local).
 * Which of the three is read from the method table (protocol/methods.ts: `list`, `target`);
 * this module only knows how each kind of target finds its upstream.
 * A request that cannot be routed becomes an `unresolved` route, answered by the relay after
 * audit has seen it.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { methodSpec, type Target } from '../protocol/methods.ts'
import type { Request } from '../protocol/model.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import type { VirtualServer } from './virtual-server.ts'

/** Where a call goes, resolved before the chain runs so every policy sees the same answer. */
export type Route =
  /** Answered by Barbican itself (initialize, ping, discover, setLevel, …). */
  | { readonly kind: 'local' }
  /** One upstream: the exposed name or URI maps to `original` on `upstream`. */
  | {
      readonly kind: 'unicast'
      readonly upstream: string
      readonly original: string
      /** For a task: the exposed tool whose call created it, which policies judge it by. */
      readonly createdBy?: string
      /** For a tool: the catalog it was found in, where policies read its definition. */
      readonly catalog?: Catalog
    }
  /** A merged list over the virtual server's catalog. */
  | {
      readonly kind: 'fanout'
      readonly catalog: Catalog
      /** Upstreams left out of the merge because they could not be listed. */
      readonly degraded: readonly { readonly upstream: string; readonly error: string }[]
    }
  /** No route: the relay answers with this error, after audit has seen the call. */
  | { readonly kind: 'unresolved'; readonly error: Error }

/** Answered by Barbican itself: one object for every such call (routes are never changed). */
export const LOCAL_ROUTE: Route = Object.freeze({ kind: 'local' })

/** A task one session created: the upstream holding it and the exposed tool that created it. */
export interface SessionTask {
  readonly upstream: string
  readonly tool: string
}

/** Where a resource one session subscribed to (an exposed URI) lives upstream. */
export interface WatchTarget {
  readonly upstream: string
  readonly uri: string
}

/** Task id → task, for the tasks the calling session created. */
type SessionTasks = ReadonlyMap<string, SessionTask>

type Resolver = (
  server: VirtualServer,
  params: JsonObject | undefined,
  tasks: SessionTasks,
) => Promise<Route>

/** How each kind of target (protocol/methods.ts `Target`) finds the upstream that owns it. */
const RESOLVERS: { readonly [K in Target['kind']]: Resolver } = {
  // Every tools/call passes here: a `then` costs less than an async function and its await.
  tool: (server, params) => server.resolveTool(stringParam(params, 'name')).then(toolRoute),
  prompt: async (server, params) =>
    unicast(await server.resolvePrompt(stringParam(params, 'name'))),
  resource: async (server, params) =>
    unicast(await server.resolveResource(stringParam(params, 'uri'))),
  task: async (_server, params, tasks) => {
    const taskId = stringParam(params, 'taskId')
    const task = tasks.get(taskId)
    if (!task) {
      throw new BarbicanError('ERR_ROUTE_UNKNOWN', `Unknown task: ${taskId}`, { data: { taskId } })
    }
    return { kind: 'unicast', upstream: task.upstream, original: taskId, createdBy: task.tool }
  },
  reference: async (server, params) => {
    const ref = params?.ref
    if (isPlainObject(ref) && ref.type === 'ref/prompt' && typeof ref.name === 'string') {
      return unicast(await server.resolvePrompt(ref.name))
    }
    if (isPlainObject(ref) && ref.type === 'ref/resource' && typeof ref.uri === 'string') {
      // A template is routed by its text; a concrete URI is judged and forwarded normalised.
      const kind = ref.uri.includes('{') ? 'template' : 'resource'
      return unicast(await server.resolveResource(ref.uri, kind))
    }
    throw new BarbicanError(
      'ERR_INVALID_PARAMS',
      'completion/complete needs a "ref" of type ref/prompt with a name or ref/resource with a uri',
    )
  },
}

/**
 * Where `request` goes. A tool call on a catalog already at hand (`VirtualServer.keptView`) is
 * routed at once, not as a promise: every tool call passes here, and each await costs it a turn
 * of the microtask queue. Same route either way.
 */
export function resolveRoute(
  server: VirtualServer,
  request: Request,
  tasks: SessionTasks,
): Route | Promise<Route> {
  if (methodSpec(request.method)?.target?.kind === 'tool') {
    const view = server.keptView()
    if (view !== undefined) {
      try {
        return toolRoute(server.resolveToolIn(view, stringParam(request.params, 'name')))
      } catch (error) {
        return { kind: 'unresolved', error: error as Error }
      }
    }
  }
  return resolved(server, request, tasks)
}

async function resolved(
  server: VirtualServer,
  request: Request,
  tasks: SessionTasks,
): Promise<Route> {
  const spec = methodSpec(request.method)
  try {
    if (spec?.list !== undefined) {
      const { catalog, degraded } = await server.catalog()
      return { kind: 'fanout', catalog, degraded }
    }
    if (spec?.target !== undefined) {
      return await RESOLVERS[spec.target.kind](server, request.params, tasks)
    }
    return LOCAL_ROUTE
  } catch (error) {
    return { kind: 'unresolved', error: error as Error }
  }
}

function toolRoute(resolved: Awaited<ReturnType<VirtualServer['resolveTool']>>): Route {
  const { upstream, target, catalog } = resolved
  return { kind: 'unicast', upstream: upstream.name, original: target.original, catalog }
}

function unicast(resolved: { upstream: Upstream; target: { original: string } }): Route {
  return { kind: 'unicast', upstream: resolved.upstream.name, original: resolved.target.original }
}

/** A required string parameter, or ERR_INVALID_PARAMS naming it. */
export function stringParam(params: JsonObject | undefined, key: string): string {
  const value = params?.[key]
  if (typeof value !== 'string') {
    throw new BarbicanError('ERR_INVALID_PARAMS', `The "${key}" parameter must be a string`)
  }
  return value
}
