/**
 * The exchange: one request of a client, from the message it sent to the reply it gets, in
 * order — decode (the codec of the revision it claims or the session negotiated), the steps of
 * steps.ts (checks, route, the policy chain and, after the last policy, the relay of answer.ts),
 * encode. The client (session/client.ts: a session, or one stateless request) holds what lives
 * across requests; everything one request needs for itself lives in its `Exchange` and dies
 * with it.
 */
import { errorData, jsonRpcCodeOf, toBarbicanError } from '../common/errors.ts'
import type { Codec } from '../protocol/codec.ts'
import { codecFor } from '../protocol/codecs.ts'
import type { JsonRpcRequest } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Request } from '../protocol/model.ts'
import { callOutcome, logCall } from '../session/call-line.ts'
import type { Client } from '../session/client.ts'
import { endSpan, replyOutcome, startClientSpan, tracingOn } from '../telemetry/tracing.ts'
import type { ReceiveInfo } from '../transports/transport.ts'
import { type Exchange, NO_META_TOOL } from './exchange-types.ts'
import { claimedRevision, isModernClaim, unsupportedRevision } from './request-checks.ts'
import { callLineWritten, RequestLog } from './request-log.ts'
import { runSteps } from './steps.ts'

/**
 * Runs one request `wire` of `client` to its reply, which it sends. Never rejects: a
 * failure becomes the client's error reply, and a failure to send it is logged.
 */
export function exchange(client: Client, wire: JsonRpcRequest, info?: ReceiveInfo): void {
  run(client, wire, info).catch((err: unknown) =>
    client.deps.log.error('unhandled request failure', { error: err }),
  )
}

async function run(client: Client, wire: JsonRpcRequest, info?: ReceiveInfo): Promise<void> {
  // Decode: a request claiming a revision of its own speaks it; the others the session's.
  const claimed = claimedRevision(wire)
  const modern = claimed !== undefined
  let codec: Codec
  if (modern) {
    if (!isModernClaim(claimed)) {
      const refusal = unsupportedRevision(wire.id, claimed)
      await client.send(codecFor('2026-07-28').encode(refusal), wire.id)
      return
    }
    codec = codecFor(claimed)
  } else {
    codec = client.codecForLegacy()
  }
  const request = codec.decode(wire) as Request
  const controller = new AbortController()
  info?.signal?.addEventListener('abort', () => controller.abort(), { once: true })
  client.inflight.set(wire.id, controller)
  // Every line about this request carries its id and trace id; one line sums it up, when call
  // lines are written at all (their level is fixed for the gateway's logger).
  const line = callLineWritten(client.deps.log, wire.method)
  const startedAt = line ? performance.now() : 0
  const x: Exchange = {
    client,
    request,
    modern,
    signal: controller.signal,
    headers: info?.headers,
    log: new RequestLog(client.deps.log, wire.id, info?.headers, wire.params),
    facts: { outcome: 'ok' },
    clock: undefined,
    meta: NO_META_TOOL,
    call: undefined,
  }
  // The request's span (tracing on only): upstream requests made for it become its children.
  const span = tracingOn()
    ? startClientSpan({
        method: wire.method,
        id: wire.id,
        params: request.params,
        sessionId: client.transport.sessionId,
        protocolVersion: modern ? claimed : client.revision,
        transport: client.info.kind,
        headers: info?.headers,
      })
    : undefined
  if (span) {
    client.spans ??= new Map()
    client.spans.set(wire.id, span)
  }
  try {
    const reply = await runSteps(x)
    // Encode: the client's id back, in the client's revision.
    reply.id = wire.id
    x.facts.outcome = callOutcome(reply)
    const encoded = codec.encode(reply, { method: request.method })
    endSpan(span, replyOutcome(reply))
    client.answered(wire.id, controller)
    await client.send(encoded, wire.id)
  } catch (err) {
    const reply = failed(x, wire, err)
    endSpan(span, { rpcCode: reply.code, errorType: x.facts.outcome })
    client.answered(wire.id, controller)
    await client.send(codec.encode(reply), wire.id)
  } finally {
    client.answered(wire.id, controller)
    if (line) {
      const { upstream, outcome } = x.facts
      logCall(x.log, { method: wire.method, params: wire.params, upstream, outcome, startedAt })
    }
    if (span) client.spans?.delete(wire.id)
  }
}

/**
 * The error reply for a request that failed with `err`. A failure from below (it has a cause)
 * is logged with its cause chain under a reference the client also gets, so what the client
 * reports leads to the line that says why.
 */
function failed(x: Exchange, wire: JsonRpcRequest, err: unknown): ErrorReply {
  const e = toBarbicanError(err)
  const reply: ErrorReply = {
    kind: 'error',
    id: wire.id,
    code: jsonRpcCodeOf(e.code),
    message: e.message,
    data: errorData(e),
  }
  x.facts.outcome = e.code
  if (e.code === 'ERR_INTERNAL' || e.cause !== undefined) {
    const reference = x.client.nextFailureReference()
    const fields = { method: wire.method, code: e.code, reference, error: e }
    if (e.code === 'ERR_INTERNAL') x.log.error('request failed', fields)
    else x.log.warn('request failed', fields)
    reply.message = `${e.message} (reference ${reference} in the gateway log)`
    reply.data = { ...errorData(e), reference }
  }
  return reply
}
