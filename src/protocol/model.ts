/**
 * The revision-neutral message model: the only shapes sessions, policies and the relay see.
 *
 * A neutral message is the wire message with the revision-specific framing lifted out: the
 * 2026-07-28 per-request `_meta` envelope, `resultType`, cache hints and `serverInfo`, and
 * revision-specific error codes. Everything else, including unknown members and the rest of
 * `_meta`, is kept as received, so a gateway never strips what it does not understand.
 */
import type { JsonObject, JsonRpcId } from './jsonrpc.ts'

/** What a 2026-07-28 client declares on every request; legacy sessions fill it from initialize. */
export interface RequestEnvelope {
  protocolVersion: string
  clientCapabilities: JsonObject
  clientInfo?: JsonObject
  /** Deprecated in 2026-07-28 but still defined. */
  logLevel?: string
}

export interface Request {
  readonly kind: 'request'
  id: JsonRpcId
  method: string
  /** Params without the lifted envelope keys; `undefined` when the wire message had none. */
  params: JsonObject | undefined
  envelope?: RequestEnvelope
}

export interface Notification {
  readonly kind: 'notification'
  method: string
  params: JsonObject | undefined
  /** 2026-07-28 listen streams tag each notification with the listen request's id. */
  subscriptionId?: JsonRpcId
}

/** `complete` and `input_required` are core; extensions add others (e.g. `task`). */
export type ResultType = 'complete' | 'input_required' | (string & {})

export type CacheScope = 'public' | 'private'

export interface CacheHint {
  ttlMs: number
  cacheScope: CacheScope
}

export interface Result {
  readonly kind: 'result'
  id: JsonRpcId
  /** The result members without `resultType`, cache hints and `_meta` serverInfo. */
  result: JsonObject
  resultType: ResultType
  cache?: CacheHint
  serverInfo?: JsonObject
}

/** Errors whose code differs by revision are tagged with what they mean. */
export type ErrorMeaning = 'resource-not-found' | 'url-elicitation-required'

export interface ErrorReply {
  readonly kind: 'error'
  id: JsonRpcId | null
  code: number
  message: string
  data?: unknown
  meaning?: ErrorMeaning
}

export type Message = Request | Notification | Result | ErrorReply

/** Well-known `_meta` keys of 2026-07-28. */
export const META = Object.freeze({
  protocolVersion: 'io.modelcontextprotocol/protocolVersion',
  clientCapabilities: 'io.modelcontextprotocol/clientCapabilities',
  clientInfo: 'io.modelcontextprotocol/clientInfo',
  logLevel: 'io.modelcontextprotocol/logLevel',
  serverInfo: 'io.modelcontextprotocol/serverInfo',
  subscriptionId: 'io.modelcontextprotocol/subscriptionId',
})
