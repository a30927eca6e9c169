/**
 * Turning one payload received from an upstream (a stdio line, an SSE event, a WebSocket frame,
 * an HTTP body) into JSON-RPC messages, shared by every outbound transport so that all of them
 * apply the same limits and report faults the same way.
 */

import { BarbicanError } from '../common/errors.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { type JsonRpcId, type JsonRpcMessage, parsePayload } from '../protocol/jsonrpc.ts'
import { responseIdOf } from '../protocol/response-id.ts'

/** What one payload held: the valid messages, and one error per invalid part (if any). */
export interface DecodedPayload {
  readonly messages: readonly JsonRpcMessage[]
  readonly batch: boolean
  /** Why some or all of the payload was refused; empty when everything was valid. */
  readonly faults: readonly BarbicanError[]
}

/**
 * Parses `text` under `limits`. Never throws: an unparsable payload yields no messages and one
 * fault; in a batch, the valid elements are kept and each invalid one is a fault. Upstreams may
 * send batches only in 2025-03-26, but accepting them costs nothing and loses no answer.
 */
export function decodePayload(text: string, limits: JsonLimits, allowBatch = true): DecodedPayload {
  // A UTF-16 unit is one to three UTF-8 bytes, so most texts are decided without counting.
  const max = limits.maxMessageBytes
  if (text.length > max || (text.length * 3 > max && Buffer.byteLength(text, 'utf8') > max)) {
    const fault = lostReplyFault(oversizeReason(limits.maxMessageBytes), responseIdOf(text))
    return { messages: [], batch: false, faults: [fault] }
  }
  const parsed = parsePayload(text, { limits, allowBatch })
  if (!parsed.ok) {
    // A reply refused whole (a structural limit, bad syntax) still names the request it answers.
    const fault = lostReplyFault(parsed.error.error.message, responseIdOf(text))
    return { messages: [], batch: false, faults: [fault] }
  }
  const messages: JsonRpcMessage[] = []
  const faults: BarbicanError[] = []
  for (const item of parsed.items) {
    if (item.ok) messages.push(item.message)
    else faults.push(protocolFault(item.error.error.message))
  }
  return { messages, batch: parsed.batch, faults }
}

/** A protocol violation by the upstream: logged and counted, never fatal to the connection. */
export function protocolFault(reason: string, data?: unknown): BarbicanError {
  return new BarbicanError(
    'ERR_UPSTREAM_PROTOCOL',
    `Invalid message from upstream: ${reason}`,
    data === undefined ? undefined : { data },
  )
}

/** Why a message over the byte limit was refused, naming the setting that bounds it. */
export function oversizeReason(maxMessageBytes: number): string {
  return `message exceeds limits.maxMessageBytes (${maxMessageBytes} bytes)`
}

/**
 * A protocol fault that cost one request its reply: the upstream answered request `requestId`,
 * but the answer cannot be used. Reported through the transport's `onerror` like every fault,
 * so the request fails at once (upstreams/upstream-client.ts) instead of at its timeout.
 */
export class LostReplyFault extends BarbicanError {
  readonly requestId: JsonRpcId
  /** What was wrong with the reply. */
  readonly reason: string

  constructor(reason: string, requestId: JsonRpcId) {
    super('ERR_UPSTREAM_PROTOCOL', `Invalid message from upstream: ${reason}`)
    this.requestId = requestId
    this.reason = reason
  }
}

/** A LostReplyFault when the id of the lost reply is known, else a plain protocol fault. */
export function lostReplyFault(reason: string, requestId: JsonRpcId | undefined): BarbicanError {
  return requestId === undefined ? protocolFault(reason) : new LostReplyFault(reason, requestId)
}

/** A short, single-line excerpt of untrusted text for logs. */
export function preview(text: string, max = 200): string {
  const flat = text.replace(/[\r\n\t]+/g, ' ')
  return flat.length > max ? `${flat.slice(0, max)}…` : flat
}
