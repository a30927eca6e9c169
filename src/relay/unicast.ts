/**
 * Relaying a call that has exactly one upstream: the exposed name in the call (a tool, prompt,
 * resource URI or completion reference) is rewritten to the upstream's own, and what comes back
 * is rewritten to the name the client knows. Calls that create state upstream (tasks, resource
 * subscriptions) are recorded so what follows them reaches the same upstream and client.
 */
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import type { WatchTarget } from './listen-streams.ts'

/** What relaying needs from the session: its forwarding and its per-client bookkeeping. */
export interface UnicastHost {
  /** Forwards with the session's per-client rewriting (relay/forward.ts). */
  forward(
    upstream: Upstream,
    request: Request,
    params: JsonObject | undefined,
    signal: AbortSignal,
  ): Promise<Result | ErrorReply>
  /** Task id → upstream, for the tasks this client created. */
  readonly tasks: Map<string, string>
  /** Exposed URI → upstream target, for the resources this client subscribed to. */
  readonly subscriptions: Map<string, WatchTarget>
}

/**
 * Relays `request` to `upstream`, where `original` is the upstream's own name for what the
 * request names. Undefined for a method that is not relayed to a single upstream.
 */
export async function relayUnicast(
  host: UnicastHost,
  upstream: Upstream,
  original: string,
  request: Request,
  signal: AbortSignal,
): Promise<Result | ErrorReply | undefined> {
  const { method } = request
  const params = request.params ?? {}
  switch (method) {
    case 'tools/call': {
      const reply = await host.forward(upstream, request, { ...params, name: original }, signal)
      // A task-augmented call answers with a task; later task requests go to the same upstream.
      const task = reply.kind === 'result' ? reply.result.task : undefined
      if (isPlainObject(task) && typeof task.taskId === 'string') {
        host.tasks.set(task.taskId, upstream.name)
      }
      return reply
    }
    case 'prompts/get':
      return await host.forward(upstream, request, { ...params, name: original }, signal)
    case 'tasks/get':
    case 'tasks/result':
    case 'tasks/cancel':
      return await host.forward(upstream, request, params, signal)
    case 'resources/read': {
      const uri = params.uri as string
      const reply = await host.forward(upstream, request, { ...params, uri: original }, signal)
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
    }
    case 'resources/subscribe':
    case 'resources/unsubscribe': {
      const uri = params.uri as string
      if (method === 'resources/subscribe') {
        host.subscriptions.set(uri, { upstream: upstream.name, uri: original })
      } else {
        host.subscriptions.delete(uri)
      }
      if (upstream.era === 'modern') {
        // 2026 has no resources/subscribe: the upstream watches through a listen stream.
        upstream.watchResource(original, method === 'resources/subscribe')
        return { kind: 'result', id: 0, resultType: 'complete', result: {} }
      }
      return await host.forward(upstream, request, { ...params, uri: original }, signal)
    }
    case 'completion/complete': {
      const ref = params.ref as JsonObject
      const key = ref.type === 'ref/prompt' ? 'name' : 'uri'
      return await host.forward(
        upstream,
        request,
        { ...params, ref: { ...ref, [key]: original } },
        signal,
      )
    }
    default:
      return undefined
  }
}
