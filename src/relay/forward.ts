/**
 * Forwarding one client call to its upstream: the per-client parts rewritten (the progress
 * token made gateway-unique), the call owner recorded so upstream→client requests find their
 * way back, and the era translation (translate.ts) applied when the client and the upstream
 * speak different revisions. Each upstream request gets a span of its own when tracing is on.
 */
import type { Span } from '@opentelemetry/api'
import type { Caller } from '../auth/context.ts'
import type { UpstreamEnvelope } from '../bridge/envelope.ts'
import type { ClientRequester } from '../bridge/held-call.ts'
import type { MrtrBridge } from '../bridge/mrtr.ts'
import type { ProgressRouter, ProgressSink } from '../bridge/progress.ts'
import { ProgressRelay } from '../bridge/progress-relay.ts'
import { subjectOf } from '../bridge/request-state.ts'
import { toBarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Client } from '../session/client.ts'
import type { RequestLogs } from '../session/request-logs.ts'
import { endSpan, replyOutcome, startUpstreamSpan, traceparentOf } from '../telemetry/tracing.ts'
import type { ModernRequestOptions, Upstream } from '../upstreams/upstream.ts'
import type { CallOwner, UpstreamReply } from '../upstreams/upstream-client.ts'
import { holdsCall, toLegacyClient, upstreamEnvelope } from './translate.ts'

/** What forwarding needs from the client (a session or a stateless request). */
export interface ForwardContext {
  /** The client: receives progress, answers the bridge's requests, owns the upstream call. */
  readonly client: ProgressSink & ClientRequester
  /** Who the call is for: identity, request headers, declared capabilities. */
  readonly caller: Caller
  readonly progress: ProgressRouter
  /** Multi-round-trip translation between eras; absent: relayed as is. */
  readonly bridge: MrtrBridge | undefined
  /** Where a 2026 request asking for logs is tracked while it is in flight. */
  readonly logs: RequestLogs
  /** What a 2026-07-28 upstream is told about the client of this request (translate.ts). */
  readonly envelope: UpstreamEnvelope
  /** The client request's span (tracing on): the parent of each upstream request's span. */
  readonly span?: Span | undefined
}

/**
 * Sends `request` of `client` to `upstream` with `params` (cut to the method's own and
 * renamed upstream, unicast.ts) and returns the upstream's reply.
 */
export function forwardFor(
  client: Client,
  upstream: Upstream,
  request: Request,
  params: JsonObject | undefined,
  signal: AbortSignal,
): Promise<Result | ErrorReply> {
  const { deps } = client
  const context: ForwardContext = {
    client,
    caller: {
      identity: client.identity,
      headers: client.info.headers,
      clientCapabilities: client.clientCapabilities,
    },
    progress: deps.progress,
    bridge: deps.bridge,
    logs: client.requestLogs,
    envelope: envelopeFor(client, request),
    span: client.spans?.get(request.id),
  }
  return forwardToUpstream(context, upstream, request, params, signal)
}

/**
 * What a 2026-07-28 upstream is told about the client of `request`. A request without its own
 * envelope (a legacy client) gets the session's, built again only when the capabilities or the
 * log level it comes from changed.
 */
function envelopeFor(client: Client, request: Request): UpstreamEnvelope {
  const { clientCapabilities } = client
  const logLevel = client.notifications.logLevel
  const own = request.envelope === undefined
  const kept = client.keptEnvelope
  if (own && kept?.clientCapabilities === clientCapabilities && kept.logLevel === logLevel) {
    return kept.envelope
  }
  const envelope = upstreamEnvelope(request, {
    clientCapabilities,
    logLevel,
    serverInfo: client.deps.serverInfo,
  })
  if (own) client.keptEnvelope = { clientCapabilities, logLevel, envelope }
  return envelope
}

/** Sends a request upstream on the client's behalf and returns the upstream's reply. */
export async function forwardToUpstream(
  ctx: ForwardContext,
  upstream: Upstream,
  request: Request,
  params: JsonObject | undefined,
  signal: AbortSignal,
): Promise<Result | ErrorReply> {
  let release: (() => boolean) | undefined
  let relay: ProgressRelay | undefined
  let outParams = params
  const meta = params?._meta
  const { bridge, client } = ctx
  const held = holdsCall(bridge, request)
  if (
    isPlainObject(meta) &&
    (typeof meta.progressToken === 'string' || typeof meta.progressToken === 'number')
  ) {
    const token = meta.progressToken
    // A call the bridge may hold across rounds gets a relay it owns and can re-point.
    const unregister = () => registration.release()
    if (held) relay = new ProgressRelay({ sink: client, token, requestId: request.id }, unregister)
    const registration = ctx.progress.register(relay ?? client, token, request.id)
    if (!held) release = registration.release
    outParams = { ...params, _meta: { ...meta, progressToken: registration.upstreamToken } }
  }
  const logLevel = request.envelope?.logLevel
  if (logLevel !== undefined) ctx.logs.track(request.id, upstream.name, logLevel)
  try {
    const { envelope, caller } = ctx
    const { identity } = caller
    const owner: CallOwner = { session: client, requestId: request.id, caller }
    // Per-identity upstream sessions (when the upstream is configured so) key on this.
    const sessionKey = identity.method === 'anonymous' ? undefined : subjectOf(identity)
    const heldEnvelope = request.envelope
    if (held && heldEnvelope !== undefined) {
      await upstream.connect().catch((error: unknown) => {
        relay?.release()
        throw error
      })
      return await bridge.modernCall({
        identity,
        method: request.method,
        params: outParams,
        clientCapabilities: heldEnvelope.clientCapabilities,
        signal,
        upstream: upstream.name,
        upstreamEra: upstream.era ?? 'legacy',
        progress: relay,
        send: (p, heldCall, s) =>
          tracedRequest(ctx.span, upstream, request.method, p, {
            signal: s,
            owner: heldCall ? { session: heldCall, requestId: request.id, caller } : owner,
            envelope,
            sessionKey,
          }),
      })
    }
    const send = (p: JsonObject | undefined) =>
      tracedRequest(ctx.span, upstream, request.method, p, { signal, owner, envelope, sessionKey })
    const reply = await send(outParams)
    const legacy = toLegacyClient(bridge, upstream, request, reply, outParams, send, client)
    return legacy instanceof Promise ? await legacy : legacy
  } finally {
    release?.()
    ctx.logs.untrack(request.id)
  }
}

/**
 * One request to an upstream, in a span of its own when tracing is on: a child of the client
 * request's span, whose trace context the upstream receives in `params._meta.traceparent` and, over
 * HTTP, in the `traceparent` header (the client's `tracestate` goes along unchanged).
 */
function tracedRequest(
  parent: Span | undefined,
  upstream: Upstream,
  method: string,
  params: JsonObject | undefined,
  options: ModernRequestOptions & { readonly owner: CallOwner },
): Promise<UpstreamReply> {
  const span = startUpstreamSpan({ upstream: upstream.name, method, params }, parent)
  if (span === undefined) return upstream.request(method, params, options)
  const traceparent = traceparentOf(span)
  const meta = isPlainObject(params?._meta) ? params._meta : undefined
  const headers: Record<string, string> = { traceparent }
  const tracestate = options.owner.caller.headers?.tracestate
  if (typeof tracestate === 'string') headers.tracestate = tracestate
  return upstream
    .request(
      method,
      { ...params, _meta: { ...meta, traceparent } },
      {
        ...options,
        owner: { ...options.owner, traceparent },
        send: { ...options.send, headers: { ...options.send?.headers, ...headers } },
      },
    )
    .then(
      (reply) => {
        endSpan(span, replyOutcome(reply))
        return reply
      },
      (error: unknown) => {
        endSpan(span, { errorType: toBarbicanError(error).code })
        throw error
      },
    )
}
