/**
 * Turning one payload received from an upstream (a stdio line, an SSE event, a WebSocket frame,
 * an HTTP body) into JSON-RPC messages, shared by every outbound transport so that all of them
 * apply the same limits and report faults the same way.
 */

import { BarbicanError } from '../common/errors.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { type JsonRpcMessage, parsePayload } from '../protocol/jsonrpc.ts'

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
  if (Buffer.byteLength(text, 'utf8') > limits.maxMessageBytes) {
    return {
      messages: [],
      batch: false,
      faults: [protocolFault(`message exceeds ${limits.maxMessageBytes} bytes`)],
    }
  }
  const parsed = parsePayload(text, { limits, allowBatch })
  if (!parsed.ok) {
    return { messages: [], batch: false, faults: [protocolFault(parsed.error.error.message)] }
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

/** A short, single-line excerpt of untrusted text for logs. */
export function preview(text: string, max = 200): string {
  const flat = text.replace(/[\r\n\t]+/g, ' ')
  return flat.length > max ? `${flat.slice(0, max)}…` : flat
}
