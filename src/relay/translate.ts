/**
 * The era translation of one relayed call, where a client and its upstream speak different
 * revisions (docs/bridging.md). The machinery lives in src/bridge (held calls, the shim, sealed
 * `requestState`); this module decides, call by call, which of it applies:
 *
 * - a 2026-07-28 upstream is told who the client is (`upstreamEnvelope`);
 * - a 2026-07-28 client's call that may ask for input is held across the client's rounds
 *   (`holdsCall`, then `bridge.modernCall` in forward.ts), whatever the upstream's era;
 * - a legacy client's call to a 2026-07-28 upstream gets its questions asked of the client in
 *   between, and its errors in the legacy meaning (`toLegacyClient`).
 */
import { modernCapabilities, type UpstreamEnvelope } from '../bridge/envelope.ts'
import type { ClientRequester } from '../bridge/held-call.ts'
import { MRTR_METHODS, type MrtrBridge } from '../bridge/mrtr.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Upstream } from '../upstreams/upstream.ts'

/** What the session knows about its client, for requests that carry no envelope of their own. */
export interface ClientFacts {
  readonly clientCapabilities: JsonObject
  /** The level set with `logging/setLevel`, if any. */
  readonly logLevel: string | undefined
  /** Barbican's own serverInfo, standing in for a client that did not name itself. */
  readonly serverInfo: JsonObject
}

/** What a 2026-07-28 upstream is told about the client of `request`. */
export function upstreamEnvelope(request: Request, facts: ClientFacts): UpstreamEnvelope {
  const e = request.envelope
  if (e) {
    return {
      clientCapabilities: e.clientCapabilities,
      clientInfo: e.clientInfo ?? facts.serverInfo,
      logLevel: e.logLevel,
    }
  }
  return {
    clientCapabilities: modernCapabilities(facts.clientCapabilities),
    clientInfo: facts.serverInfo,
    // Legacy servers log unless told otherwise; 2026 ones only when asked per request.
    logLevel: facts.logLevel ?? 'debug',
  }
}

/**
 * Whether the bridge holds `request` across its client's rounds: a 2026-07-28 request (it has
 * an envelope) of a method that may answer `input_required`.
 */
export function holdsCall(bridge: MrtrBridge | undefined, request: Request): bridge is MrtrBridge {
  return bridge !== undefined && request.envelope !== undefined && MRTR_METHODS.has(request.method)
}

/**
 * A legacy client's reply from a 2026-07-28 upstream: the questions of an `input_required`
 * answer are asked of the client and the call retried with its answers (the shim); an unknown
 * resource keeps the legacy meaning. Anything else passes as is.
 */
export function toLegacyClient(
  bridge: MrtrBridge | undefined,
  upstream: Upstream,
  request: Request,
  first: Result | ErrorReply,
  params: JsonObject | undefined,
  retry: (params: JsonObject) => Promise<Result | ErrorReply>,
  client: ClientRequester,
): Result | ErrorReply | Promise<Result | ErrorReply> {
  // Decided without a promise: most calls have nothing to translate, and every call passes here.
  if (bridge === undefined || request.envelope !== undefined || upstream.era !== 'modern') {
    return first
  }
  return legacyShimmed(bridge, request, first, params, retry, client)
}

async function legacyShimmed(
  bridge: MrtrBridge,
  request: Request,
  first: Result | ErrorReply,
  params: JsonObject | undefined,
  retry: (params: JsonObject) => Promise<Result | ErrorReply>,
  client: ClientRequester,
): Promise<Result | ErrorReply> {
  let reply = first
  if (reply.kind === 'result' && reply.resultType === 'input_required') {
    reply = await bridge.legacyShim(reply, params, retry, client, request.id)
  }
  // 2026 says -32602 for an unknown resource; legacy clients know -32002.
  if (request.method === 'resources/read' && reply.kind === 'error' && reply.code === -32602) {
    reply.meaning = 'resource-not-found'
  }
  return reply
}
