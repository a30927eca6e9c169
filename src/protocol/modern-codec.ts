/**
 * Codec for 2026-07-28. Requests carry their envelope (version, client capabilities, client info,
 * log level) in `params._meta`; results carry `resultType`, cache hints on cacheable methods and
 * `serverInfo` in `_meta`; listen-stream notifications carry their subscription id in `_meta`.
 * Decoding lifts these into the neutral model; encoding puts them back. Nothing else is touched.
 */
import type { Codec, EncodeContext } from './codec.ts'
import {
  INTERNAL_ERROR,
  INVALID_PARAMS,
  LEGACY_RESOURCE_NOT_FOUND,
  URL_ELICITATION_REQUIRED,
} from './error-codes.ts'
import {
  errorResponse,
  isPlainObject,
  type JsonObject,
  type JsonRpcErrorObject,
  type JsonRpcId,
  type JsonRpcMessage,
} from './jsonrpc.ts'
import { methodSpec } from './methods.ts'
import {
  type CacheHint,
  type ErrorReply,
  META,
  type Message,
  type RequestEnvelope,
  type Result,
} from './model.ts'
import type { Revision } from './revisions.ts'

/** Safe default for cacheable results whose source gave no hint: stale at once, never shared. */
const DEFAULT_CACHE: CacheHint = Object.freeze({ ttlMs: 0, cacheScope: 'private' }) as CacheHint

function decodeParams(params: JsonObject): { params: JsonObject; envelope?: RequestEnvelope } {
  const meta = params._meta
  if (!isPlainObject(meta)) return { params }
  const protocolVersion = meta[META.protocolVersion]
  const clientCapabilities = meta[META.clientCapabilities]
  // Only a complete, well-typed envelope is lifted. Anything less stays in `_meta` as sent,
  // so the session sees no envelope and answers -32602 (missing required `_meta` field)
  // while nothing the client sent is lost or invented.
  if (typeof protocolVersion !== 'string' || !isPlainObject(clientCapabilities)) {
    return { params }
  }
  const envelope: RequestEnvelope = { protocolVersion, clientCapabilities }
  const clientInfo = meta[META.clientInfo]
  if (isPlainObject(clientInfo)) envelope.clientInfo = clientInfo
  const logLevel = meta[META.logLevel]
  if (typeof logLevel === 'string') envelope.logLevel = logLevel
  const rest = copyWithout(
    meta,
    META.protocolVersion,
    META.clientCapabilities,
    envelope.clientInfo === undefined ? undefined : META.clientInfo,
    envelope.logLevel === undefined ? undefined : META.logLevel,
  )
  return { params: withMeta(params, rest), envelope }
}

function encodeParams(
  params: JsonObject | undefined,
  envelope?: RequestEnvelope,
): JsonObject | undefined {
  if (!envelope) return params
  const meta: JsonObject = isPlainObject(params?._meta) ? { ...params._meta } : {}
  meta[META.protocolVersion] = envelope.protocolVersion
  meta[META.clientCapabilities] = envelope.clientCapabilities
  if (envelope.clientInfo !== undefined) meta[META.clientInfo] = envelope.clientInfo
  if (envelope.logLevel !== undefined) meta[META.logLevel] = envelope.logLevel
  return { ...params, _meta: meta }
}

function decodeResult(wire: JsonObject): Omit<Result, 'kind' | 'id'> {
  const { resultType, ttlMs, cacheScope, ...result } = wire
  // A result from an older peer has no resultType: the spec says treat it as complete.
  const decoded: Omit<Result, 'kind' | 'id'> = {
    result,
    resultType: typeof resultType === 'string' ? resultType : 'complete',
  }
  if (
    Number.isSafeInteger(ttlMs) &&
    (ttlMs as number) >= 0 &&
    (cacheScope === 'public' || cacheScope === 'private')
  ) {
    decoded.cache = { ttlMs: ttlMs as number, cacheScope }
  } else {
    // Keep malformed hints as they were rather than inventing or losing data.
    if (ttlMs !== undefined) result.ttlMs = ttlMs
    if (cacheScope !== undefined) result.cacheScope = cacheScope
  }
  const meta = result._meta
  const serverInfo = isPlainObject(meta) ? meta[META.serverInfo] : undefined
  if (isPlainObject(meta) && isPlainObject(serverInfo)) {
    decoded.serverInfo = serverInfo
    decoded.result = withMeta(result, copyWithout(meta, META.serverInfo))
  }
  return decoded
}

function encodeResult(decoded: Omit<Result, 'kind' | 'id'>, context?: EncodeContext): JsonObject {
  const out: JsonObject = { resultType: decoded.resultType, ...decoded.result }
  const complete = decoded.resultType === 'complete'
  const cacheable = context?.method !== undefined && methodSpec(context.method)?.cacheable === true
  const cache = decoded.cache ?? (complete && cacheable ? DEFAULT_CACHE : undefined)
  if (cache) {
    out.ttlMs = cache.ttlMs
    out.cacheScope = cache.cacheScope
  }
  if (decoded.serverInfo) {
    const meta = isPlainObject(out._meta) ? { ...out._meta } : {}
    meta[META.serverInfo] = decoded.serverInfo
    out._meta = meta
  }
  return out
}

function decodeError(error: JsonRpcErrorObject, id: JsonRpcId | null): ErrorReply {
  const reply: ErrorReply = { kind: 'error', id, code: error.code, message: error.message }
  if ('data' in error) reply.data = error.data
  // Old servers may still send -32002; modern clients are told to accept it.
  if (error.code === LEGACY_RESOURCE_NOT_FOUND) reply.meaning = 'resource-not-found'
  return reply
}

function encodeErrorCode(reply: ErrorReply): number {
  if (reply.meaning === 'resource-not-found') return INVALID_PARAMS
  // 2026-07-28 forbids emitting -32002 and -32042.
  if (reply.code === LEGACY_RESOURCE_NOT_FOUND) return INVALID_PARAMS
  if (reply.code === URL_ELICITATION_REQUIRED || reply.meaning === 'url-elicitation-required') {
    return INVALID_PARAMS
  }
  // -32000 … -32019 carry no meaning in 2026; keep them, the receiver ignores the meaning.
  return reply.code === 0 ? INTERNAL_ERROR : reply.code
}

/** The 2026-07-28 codec. The helpers above hold no state of a revision: every codec shares them. */
export function modernCodec(revision: Revision): Codec {
  return {
    revision,
    decode(message: JsonRpcMessage): Message {
      if ('method' in message) {
        if ('id' in message) {
          if (message.params === undefined) {
            return { kind: 'request', id: message.id, method: message.method, params: undefined }
          }
          const { params, envelope } = decodeParams(message.params)
          const request: Message = {
            kind: 'request',
            id: message.id,
            method: message.method,
            params,
          }
          if (envelope) request.envelope = envelope
          return request
        }
        const params = message.params
        const meta = params?._meta
        const subscriptionId = isPlainObject(meta) ? meta[META.subscriptionId] : undefined
        if (
          isPlainObject(meta) &&
          (typeof subscriptionId === 'string' || Number.isSafeInteger(subscriptionId))
        ) {
          return {
            kind: 'notification',
            method: message.method,
            params: withMeta(params as JsonObject, copyWithout(meta, META.subscriptionId)),
            subscriptionId: subscriptionId as JsonRpcId,
          }
        }
        return { kind: 'notification', method: message.method, params }
      }
      if ('result' in message) {
        return { kind: 'result', id: message.id, ...decodeResult(message.result) }
      }
      return decodeError(message.error, message.id)
    },
    encode(message: Message, context?: EncodeContext): JsonRpcMessage {
      switch (message.kind) {
        case 'request': {
          const params = encodeParams(message.params, message.envelope)
          return params === undefined
            ? { jsonrpc: '2.0', id: message.id, method: message.method }
            : { jsonrpc: '2.0', id: message.id, method: message.method, params }
        }
        case 'notification': {
          let params = message.params
          if (message.subscriptionId !== undefined) {
            const meta = isPlainObject(params?._meta) ? { ...params._meta } : {}
            meta[META.subscriptionId] = message.subscriptionId
            params = { ...params, _meta: meta }
          }
          return params === undefined
            ? { jsonrpc: '2.0', method: message.method }
            : { jsonrpc: '2.0', method: message.method, params }
        }
        case 'result':
          return { jsonrpc: '2.0', id: message.id, result: encodeResult(message, context) }
        case 'error':
          return errorResponse(message.id, encodeErrorCode(message), message.message, message.data)
      }
    },
    decodeParams,
    encodeParams,
    decodeResult,
    encodeResult,
  }
}

/**
 * A copy of `source` without the named keys, or undefined when nothing is left. Built by a loop
 * rather than `delete`, which would push V8 objects that policies read later into slow mode;
 * `__proto__` is defined, not assigned, so a key of that name stays plain data.
 */
function copyWithout(
  source: JsonObject,
  a: string,
  b?: string,
  c?: string,
  d?: string,
): JsonObject | undefined {
  let out: JsonObject | undefined
  for (const key of Object.keys(source)) {
    if (key === a || key === b || key === c || key === d) continue
    out ??= {}
    setMember(out, key, source[key])
  }
  return out
}

/** A copy of `params` whose `_meta` is `meta`, in the same place, or left out when undefined. */
function withMeta(params: JsonObject, meta: JsonObject | undefined): JsonObject {
  const out: JsonObject = {}
  for (const key of Object.keys(params)) {
    if (key === '_meta') {
      if (meta !== undefined) out._meta = meta
    } else {
      setMember(out, key, params[key])
    }
  }
  return out
}

function setMember(target: JsonObject, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, {
      value,
      enumerable: true,
      writable: true,
      configurable: true,
    })
  } else {
    target[key] = value
  }
}
