/**
 * The permission each client request needs, method by method. Every request needs a grant on
 * the virtual server; a request that acts on one item (a tool, prompt or resource) needs a
 * grant on that item too, and a list answers only with what the caller may use. The `authorize`
 * policy enforces this table, docs/security.md prints it, and method-permissions.test.ts checks
 * that every client request of protocol/methods.ts has an entry, so a newly routed method
 * cannot reach an upstream unjudged.
 */

import { judgedResource, judgedUri } from '../catalog/resource-uri.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import type { ClientRequestMethod } from '../protocol/methods.ts'
import type { Request } from '../protocol/model.ts'
import type { Route } from '../virtual-servers/route.ts'

/** The kinds of item a permission rule names (`tools`, `prompts`, `resources`). */
export type ItemKind = 'tool' | 'prompt' | 'resource'

/**
 * One item a call acts on, as clients name it: a tool or prompt by its exposed name, a resource
 * by its judged exposed URI (or a template's stand-in, catalog/resource-uri.ts).
 */
export interface Item {
  readonly kind: ItemKind
  readonly name: string
}

export interface MethodPermission {
  /** What the caller needs, in the words of docs/security.md's method table. */
  readonly needs: string
  /**
   * The item the request acts on, judged before anything reaches an upstream; undefined when
   * the request names none (malformed: refused unless it was never routed upstream).
   */
  readonly item?: (request: Request, route: Route) => Item | undefined
  /** The reply is a merged list: the catalog it is paged from is narrowed to the caller's. */
  readonly list?: true
  /** The request asks to watch resources: those the caller may not read are left out. */
  readonly watches?: true
}

const SERVER = 'a grant on the virtual server'

const named =
  (kind: 'tool' | 'prompt') =>
  (request: Request): Item | undefined => {
    const name = request.params?.name
    return typeof name === 'string' ? { kind, name } : undefined
  }

/** The resource a request names by `uri`, judged as the session judged it before routing. */
function resource(request: Request): Item | undefined {
  const uri = request.params?.uri
  return typeof uri === 'string' ? judged(uri, judgedUri) : undefined
}

/** A completion names a prompt, or a resource (usually a template) it completes values for. */
function completed(request: Request): Item | undefined {
  const ref = request.params?.ref
  if (!isPlainObject(ref)) return undefined
  if (ref.type === 'ref/prompt' && typeof ref.name === 'string') {
    return { kind: 'prompt', name: ref.name }
  }
  if (ref.type === 'ref/resource' && typeof ref.uri === 'string') {
    return judged(ref.uri, judgedResource)
  }
  return undefined
}

function judged(uri: string, judge: (uri: string) => string): Item | undefined {
  try {
    return { kind: 'resource', name: judge(uri) }
  } catch {
    return undefined
  }
}

/**
 * A task is judged by the tool whose call created it (recorded by the session, carried by the
 * route), so a caller whose rights shrank since cannot collect the result of a tool it may no
 * longer call. Task ids are routed only within the session that created them.
 */
function task(_request: Request, route: Route): Item | undefined {
  return route.kind === 'unicast' && route.createdBy !== undefined
    ? { kind: 'tool', name: route.createdBy }
    : undefined
}

const TASK =
  "the tool whose `tools/call` created the task, by `tools` (only the caller's own tasks)"

/** Every client request, by method: a method added to protocol/methods.ts needs its entry here. */
export const METHOD_PERMISSIONS: Readonly<Record<ClientRequestMethod, MethodPermission>> = {
  initialize: { needs: SERVER },
  ping: { needs: SERVER },
  'server/discover': { needs: SERVER },
  'logging/setLevel': { needs: SERVER },
  'tools/list': { needs: `${SERVER}; lists only the tools granted by \`tools\``, list: true },
  'tools/call': { needs: 'the tool, by `tools`', item: named('tool') },
  'prompts/list': {
    needs: `${SERVER}; lists only the prompts granted by \`prompts\``,
    list: true,
  },
  'prompts/get': { needs: 'the prompt, by `prompts`', item: named('prompt') },
  'resources/list': {
    needs: `${SERVER}; lists only the resources granted by \`resources\``,
    list: true,
  },
  'resources/templates/list': {
    needs: `${SERVER}; lists only the templates granted by \`resources\``,
    list: true,
  },
  'resources/read': { needs: 'the resource, by `resources`', item: resource },
  'resources/subscribe': { needs: 'the resource, by `resources`', item: resource },
  'resources/unsubscribe': { needs: 'the resource, by `resources`', item: resource },
  'completion/complete': {
    needs:
      'the prompt (`ref/prompt`, by `prompts`) or resource template (`ref/resource`, by `resources`)',
    item: completed,
  },
  'tasks/get': { needs: TASK, item: task },
  'tasks/result': { needs: TASK, item: task },
  'tasks/cancel': { needs: TASK, item: task },
  'tasks/list': { needs: `${SERVER}; lists only the caller's own tasks` },
  'subscriptions/listen': {
    needs: `${SERVER}; resource subscriptions only for resources granted by \`resources\` (others are left out of the acknowledgement)`,
    watches: true,
  },
}

/** The entry of `method`; undefined for what is not a client request (never routed). */
export function permissionOf(method: string): MethodPermission | undefined {
  return Object.hasOwn(METHOD_PERMISSIONS, method)
    ? METHOD_PERMISSIONS[method as ClientRequestMethod]
    : undefined
}
