/**
 * Relaying a call that has exactly one upstream: only the params the method defines are kept
 * (protocol/methods.ts), the exposed name in the call (a tool, prompt, resource URI, task id or
 * completion reference, wherever the method table says it lives) is rewritten to the upstream's
 * own, and what comes back is rewritten to the name the client knows. Calls that create state
 * upstream (tasks, resource subscriptions) are recorded so what follows them reaches the same
 * upstream and client.
 */
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import {
  definedParams,
  isMethod,
  methodSpec,
  type Target,
  type UnicastMethod,
} from '../protocol/methods.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Client } from '../session/client.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import { forwardFor } from './forward.ts'

/** One relayed call: `params` are already cut to the method's own and renamed upstream. */
interface Relayed {
  /** The client: its forwarding facts, the tasks and subscriptions it keeps. */
  readonly client: Client
  readonly upstream: Upstream
  readonly request: Request
  /** The upstream's own name for what the request names. */
  readonly original: string
  readonly params: JsonObject
  readonly signal: AbortSignal
}

type Relay = (call: Relayed) => Promise<Result | ErrorReply>

const forward: Relay = ({ client, upstream, request, params, signal }) =>
  forwardFor(client, upstream, request, params, signal)

/** A resource subscription: recorded for routing `resources/updated` back to this client. */
const watch =
  (on: boolean): Relay =>
  async (call) => {
    const { client, upstream, request, original } = call
    const uri = request.params?.uri as string
    if (on) client.subscriptions.set(uri, { upstream: upstream.name, uri: original })
    else client.subscriptions.delete(uri)
    if (upstream.era === 'modern') {
      // 2026 has no resources/subscribe: the upstream watches through a listen stream.
      upstream.watchResource(original, on)
      return { kind: 'result', id: 0, resultType: 'complete', result: {} }
    }
    return await forward(call)
  }

/**
 * One row per method with a `target` in the method table: what relaying it does beyond
 * forwarding. The mapped type makes a new relayed method fail to compile until it has a row.
 */
const RELAYS: { readonly [M in UnicastMethod]: Relay } = {
  'tools/call': async (call) => {
    const reply = await forward(call)
    // A task-augmented call answers with a task; later task requests go to the same upstream.
    const task = reply.kind === 'result' ? reply.result.task : undefined
    const tool = call.request.params?.name
    if (isPlainObject(task) && typeof task.taskId === 'string' && typeof tool === 'string') {
      call.client.tasks.set(task.taskId, { upstream: call.upstream.name, tool })
    }
    return reply
  },
  'prompts/get': forward,
  'resources/read': async (call) => {
    const { original } = call
    const uri = call.request.params?.uri
    const reply = await forward(call)
    if (reply.kind === 'result' && Array.isArray(reply.result.contents) && original !== uri) {
      // Contents name the URI the client asked for, not the upstream's.
      reply.result = {
        ...reply.result,
        contents: reply.result.contents.map((c: unknown) =>
          isPlainObject(c) && c.uri === original ? { ...c, uri } : c,
        ),
      }
    }
    return reply
  },
  'resources/subscribe': watch(true),
  'resources/unsubscribe': watch(false),
  'completion/complete': forward,
  'tasks/get': forward,
  'tasks/result': forward,
  'tasks/cancel': forward,
}

/** The members of each completion reference type (PromptReference, ResourceTemplateReference). */
const REFERENCE_MEMBERS: Readonly<Record<string, readonly string[]>> = {
  'ref/prompt': ['type', 'name', 'title'],
  'ref/resource': ['type', 'uri'],
}

/** `params` with the target renamed to `original`, where the method's target param says. */
function renamed(target: Target, params: JsonObject, original: string): JsonObject {
  if (target.param !== 'ref') return { ...params, [target.param]: original }
  // The reference names the target; it is cut to its own members like params are.
  const ref = params.ref as JsonObject
  const kept: JsonObject = {}
  for (const key of REFERENCE_MEMBERS[ref.type as string] ?? []) {
    if (Object.hasOwn(ref, key)) kept[key] = ref[key]
  }
  kept[ref.type === 'ref/prompt' ? 'name' : 'uri'] = original
  return { ...params, ref: kept }
}

/**
 * Relays `request` to `upstream`, where `original` is the upstream's own name for what the
 * request names. Undefined (at once, not a promise of it) for a method that is not relayed to a
 * single upstream.
 */
export function relayUnicast(
  client: Client,
  upstream: Upstream,
  original: string,
  request: Request,
  signal: AbortSignal,
): Promise<Result | ErrorReply> | undefined {
  const { method } = request
  const target = methodSpec(method)?.target
  if (target === undefined || !isMethod(method) || !Object.hasOwn(RELAYS, method)) return undefined
  const params = renamed(target, definedParams(method, request.params) ?? {}, original)
  // The relay's own promise, not one more async function around it: every call passes here.
  return RELAYS[method as UnicastMethod]({
    client,
    upstream,
    request,
    original,
    params,
    signal,
  })
}
