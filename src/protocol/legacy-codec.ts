/**
 * Codec for the handshake revisions 2024-11-05 … 2025-11-25. Their requests carry no per-request
 * envelope and their results no `resultType`, so decoding is nearly free; encoding strips the
 * 2026-only members and maps error codes these revisions define differently.
 */
import { type Codec, type EncodeContext, UnrepresentableError } from './codec.ts'
import {
  INTERNAL_ERROR,
  INVALID_PARAMS,
  isModernOnlyCode,
  LEGACY_RESOURCE_NOT_FOUND,
  UNSUPPORTED_PROTOCOL_VERSION,
  URL_ELICITATION_REQUIRED,
} from './error-codes.ts'
import {
  errorResponse,
  type JsonObject,
  type JsonRpcErrorObject,
  type JsonRpcMessage,
} from './jsonrpc.ts'
import type { ErrorReply, Message, Result } from './model.ts'
import type { Revision } from './revisions.ts'

export function legacyCodec(revision: Revision): Codec {
  const urlElicitation = revision === '2025-11-25'

  function decodeResult(result: JsonObject): Omit<Result, 'kind' | 'id'> {
    return { result, resultType: 'complete' }
  }

  function encodeResult(result: Omit<Result, 'kind' | 'id'>, context?: EncodeContext): JsonObject {
    if (result.resultType !== 'complete') {
      throw new UnrepresentableError(
        `A "${result.resultType}" result${context?.method ? ` to ${context.method}` : ''} has no form in MCP ${revision}`,
      )
    }
    return result.result
  }

  function decodeError(error: JsonRpcErrorObject, id: ErrorReply['id']): ErrorReply {
    const reply: ErrorReply = { kind: 'error', id, code: error.code, message: error.message }
    if ('data' in error) reply.data = error.data
    if (error.code === LEGACY_RESOURCE_NOT_FOUND) reply.meaning = 'resource-not-found'
    else if (urlElicitation && error.code === URL_ELICITATION_REQUIRED) {
      reply.meaning = 'url-elicitation-required'
    }
    return reply
  }

  function encodeErrorCode(reply: ErrorReply): number {
    if (reply.meaning === 'resource-not-found') return LEGACY_RESOURCE_NOT_FOUND
    if (reply.meaning === 'url-elicitation-required') {
      return urlElicitation ? URL_ELICITATION_REQUIRED : INVALID_PARAMS
    }
    if (reply.code === URL_ELICITATION_REQUIRED) {
      return urlElicitation ? URL_ELICITATION_REQUIRED : INVALID_PARAMS
    }
    // -32020 … -32022 describe a 2026 HTTP hop; a legacy peer cannot act on them. A header or
    // capability fault is the request's fault (-32602); an unsupported version is ours (-32603).
    if (isModernOnlyCode(reply.code)) {
      return reply.code === UNSUPPORTED_PROTOCOL_VERSION ? INTERNAL_ERROR : INVALID_PARAMS
    }
    return reply.code
  }

  return {
    revision,
    decode(message: JsonRpcMessage): Message {
      if ('method' in message) {
        if ('id' in message) {
          return { kind: 'request', id: message.id, method: message.method, params: message.params }
        }
        return { kind: 'notification', method: message.method, params: message.params }
      }
      if ('result' in message)
        return { kind: 'result', id: message.id, ...decodeResult(message.result) }
      return decodeError(message.error, message.id)
    },
    encode(message: Message, context?: EncodeContext): JsonRpcMessage {
      switch (message.kind) {
        case 'request':
          return message.params === undefined
            ? { jsonrpc: '2.0', id: message.id, method: message.method }
            : { jsonrpc: '2.0', id: message.id, method: message.method, params: message.params }
        case 'notification':
          return message.params === undefined
            ? { jsonrpc: '2.0', method: message.method }
            : { jsonrpc: '2.0', method: message.method, params: message.params }
        case 'result':
          return { jsonrpc: '2.0', id: message.id, result: encodeResult(message, context) }
        case 'error':
          return errorResponse(message.id, encodeErrorCode(message), message.message, message.data)
      }
    },
    decodeParams(params: JsonObject) {
      return { params }
    },
    encodeParams(params: JsonObject | undefined) {
      return params
    },
    decodeResult,
    encodeResult,
  }
}
