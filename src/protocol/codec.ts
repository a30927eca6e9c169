/**
 * A codec turns one revision's wire messages into the neutral model and back. Codecs are pure
 * and stateless; session state (the negotiated revision, a legacy client's capabilities) lives
 * in the session, which passes what a codec needs.
 *
 * @example
 * const codec = codecFor('2026-07-28')
 * const neutral = codec.decode(wireMessage)
 * const wire = codecFor('2025-06-18').encode(neutral, { method: 'tools/call' })
 */
import type { JsonObject, JsonRpcMessage } from './jsonrpc.ts'
import type { Message, RequestEnvelope, Result } from './model.ts'
import type { Revision } from './revisions.ts'

export interface EncodeContext {
  /** Method of the request a result answers: decides cache hints and what may be encoded. */
  readonly method?: string
}

export interface Codec {
  readonly revision: Revision
  decode(message: JsonRpcMessage): Message
  encode(message: Message, context?: EncodeContext): JsonRpcMessage
  /** Request params alone (the examples corpus has params-only documents). */
  decodeParams(params: JsonObject): { params: JsonObject; envelope?: RequestEnvelope }
  encodeParams(params: JsonObject | undefined, envelope?: RequestEnvelope): JsonObject | undefined
  /** A result object alone. */
  decodeResult(result: JsonObject): Omit<Result, 'kind' | 'id'>
  encodeResult(result: Omit<Result, 'kind' | 'id'>, context?: EncodeContext): JsonObject
}

/** Raised when a neutral message has no representation in the target revision. */
export class UnrepresentableError extends Error {
  override readonly name = 'UnrepresentableError'
  readonly code = 'ERR_UNREPRESENTABLE'
}
