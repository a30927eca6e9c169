/**
 * JSON-RPC 2.0 envelopes as MCP uses them: parsing untrusted text under explicit limits,
 * validating the envelope, and serializing. Pure: no I/O.
 */
import { type JsonLimits, type JsonLimitViolation, scanJson } from './json-limits.ts'

/** A JSON object as it arrives on the wire; unknown members are kept untouched. */
export type JsonObject = { [key: string]: unknown }

/** MCP request ids: a string or an integer, never null (MCP narrows JSON-RPC here). */
export type JsonRpcId = string | number

export interface JsonRpcRequest {
  jsonrpc: '2.0'
  id: JsonRpcId
  method: string
  params?: JsonObject
}

export interface JsonRpcNotification {
  jsonrpc: '2.0'
  method: string
  params?: JsonObject
}

export interface JsonRpcResultResponse {
  jsonrpc: '2.0'
  id: JsonRpcId
  result: JsonObject
}

export interface JsonRpcErrorObject {
  code: number
  message: string
  data?: unknown
}

export interface JsonRpcErrorResponse {
  jsonrpc: '2.0'
  /** `null` only when the request's id could not be read (parse errors, invalid requests). */
  id: JsonRpcId | null
  error: JsonRpcErrorObject
}

export type JsonRpcResponse = JsonRpcResultResponse | JsonRpcErrorResponse
export type JsonRpcMessage = JsonRpcRequest | JsonRpcNotification | JsonRpcResponse

/** The standard JSON-RPC error codes, shared by every MCP revision. */
export const PARSE_ERROR = -32700
export const INVALID_REQUEST = -32600
export const METHOD_NOT_FOUND = -32601
export const INVALID_PARAMS = -32602
export const INTERNAL_ERROR = -32603

export function isRequest(m: JsonRpcMessage): m is JsonRpcRequest {
  return 'method' in m && 'id' in m
}
export function isNotification(m: JsonRpcMessage): m is JsonRpcNotification {
  return 'method' in m && !('id' in m)
}
export function isResponse(m: JsonRpcMessage): m is JsonRpcResponse {
  return !('method' in m)
}
export function isErrorResponse(m: JsonRpcMessage): m is JsonRpcErrorResponse {
  return 'error' in m && !('method' in m)
}

/** One element of a parsed payload: a valid message, or the error reply owed for an invalid one. */
export type ParsedItem =
  | { readonly ok: true; readonly message: JsonRpcMessage }
  | { readonly ok: false; readonly error: JsonRpcErrorResponse }

/** The outcome of parsing one payload (an HTTP body, a stdio line, a WebSocket frame). */
export type ParseResult =
  | { readonly ok: true; readonly batch: boolean; readonly items: readonly ParsedItem[] }
  | { readonly ok: false; readonly error: JsonRpcErrorResponse }

export interface ParseOptions {
  readonly limits: JsonLimits
  /** Accept a JSON array of messages. Only MCP 2025-03-26 allows batches. */
  readonly allowBatch: boolean
}

/**
 * Parses one payload of untrusted text into JSON-RPC messages. Never throws: every fault becomes
 * the error response the sender is owed (-32700 for bytes that are not JSON or break a limit,
 * -32600 for a JSON value that is not a valid JSON-RPC message, -32602 for non-object params).
 */
export function parsePayload(text: string, options: ParseOptions): ParseResult {
  const { limits } = options
  // Transports check bytes before decoding; this guards direct callers. A UTF-16 unit is at
  // least one and at most three UTF-8 bytes, so most texts are decided without counting.
  const max = limits.maxMessageBytes
  if (text.length > max || (text.length * 3 > max && Buffer.byteLength(text, 'utf8') > max)) {
    return fail(null, PARSE_ERROR, `Message exceeds the limit of ${max} bytes`)
  }
  const violation = scanJson(text, limits)
  if (violation) return fail(null, PARSE_ERROR, describeViolation(violation))
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return fail(null, PARSE_ERROR, `Parse error: ${(err as Error).message}`)
  }
  if (Array.isArray(value)) {
    if (!options.allowBatch) {
      return fail(null, INVALID_REQUEST, 'Batches are not allowed in this protocol revision')
    }
    if (value.length === 0) return fail(null, INVALID_REQUEST, 'Empty batch')
    return { ok: true, batch: true, items: value.map(validateEnvelope) }
  }
  const item = validateEnvelope(value)
  if (!item.ok) return { ok: false, error: item.error }
  return { ok: true, batch: false, items: [item] }
}

/** Checks that a parsed JSON value is one valid JSON-RPC 2.0 message under MCP's rules. */
export function validateEnvelope(value: unknown): ParsedItem {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return invalid(null, 'A JSON-RPC message must be an object')
  }
  const m = value as JsonObject
  const hasId = 'id' in m
  const id = m.id
  const idOk = hasId && isValidId(id)
  // Only a request's id may be echoed. A message without `method` is a response: its id names a
  // request of the *receiver* (on WebSocket or stdio, possibly one the sender still has in
  // flight), so an error about it carries `null` and can never be taken for that answer.
  const replyId = idOk && 'method' in m ? (id as JsonRpcId) : null
  if (m.jsonrpc !== '2.0') return invalid(replyId, 'The "jsonrpc" member must be exactly "2.0"')

  if ('method' in m) {
    if (typeof m.method !== 'string' || m.method.length === 0) {
      return invalid(replyId, 'The "method" member must be a non-empty string')
    }
    if ('result' in m || 'error' in m) {
      return invalid(replyId, 'A message cannot carry both "method" and "result" or "error"')
    }
    if (hasId && !idOk) return invalid(null, describeBadId(id))
    if ('params' in m && !isPlainObject(m.params)) {
      if (!hasId) return invalid(null, 'The "params" member must be an object')
      return {
        ok: false,
        error: errorResponse(replyId, INVALID_PARAMS, 'The "params" member must be an object'),
      }
    }
    return { ok: true, message: m as unknown as JsonRpcMessage }
  }

  // A response.
  const hasResult = 'result' in m
  const hasError = 'error' in m
  if (hasResult === hasError) {
    return invalid(replyId, 'A message needs "method", or exactly one of "result" and "error"')
  }
  if (hasResult) {
    if (!idOk) return invalid(null, hasId ? describeBadId(id) : 'A result needs an "id"')
    if (!isPlainObject(m.result)) return invalid(replyId, 'The "result" member must be an object')
    return { ok: true, message: m as unknown as JsonRpcMessage }
  }
  if (hasId && !(id === null || idOk)) return invalid(null, describeBadId(id))
  const e = m.error
  if (
    !isPlainObject(e) ||
    typeof e.code !== 'number' ||
    !Number.isInteger(e.code) ||
    typeof e.message !== 'string'
  ) {
    return invalid(
      replyId,
      'The "error" member must be an object with an integer "code" and a string "message"',
    )
  }
  // MCP 2025-11-25 and later let an error response leave out an id it could not read; the
  // model says `null` for that, as JSON-RPC 2.0 does.
  const message = hasId ? m : { ...m, id: null }
  return { ok: true, message: message as unknown as JsonRpcMessage }
}

function isValidId(id: unknown): id is JsonRpcId {
  return typeof id === 'string' || (typeof id === 'number' && Number.isSafeInteger(id))
}

function describeBadId(id: unknown): string {
  if (id === null) return 'The "id" member must not be null'
  if (typeof id === 'number') return 'The "id" member must be an integer or a string'
  return `The "id" member must be a string or an integer, not ${Array.isArray(id) ? 'an array' : typeof id}`
}

export function isPlainObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v)
}

function describeViolation(v: JsonLimitViolation): string {
  switch (v.kind) {
    case 'depth':
      return `Message nesting exceeds the limit of ${v.limit} levels`
    case 'string-length':
      return `A string exceeds the limit of ${v.limit} characters`
    case 'array-length':
      return `An array exceeds the limit of ${v.limit} elements`
    case 'object-keys':
      return `An object exceeds the limit of ${v.limit} keys`
    case 'duplicate-key':
      return `Duplicate key "${v.key}"${v.path === '' ? ' in the JSON-RPC envelope' : ''}`
    case 'case-variant-key':
      return `Keys "${v.other}" and "${v.key}" differ only by case in the JSON-RPC envelope`
  }
}

function invalid(id: JsonRpcId | null, message: string): ParsedItem {
  return { ok: false, error: errorResponse(id, INVALID_REQUEST, message) }
}

function fail(id: JsonRpcId | null, code: number, message: string): ParseResult {
  return { ok: false, error: errorResponse(id, code, message) }
}

export function errorResponse(
  id: JsonRpcId | null,
  code: number,
  message: string,
  data?: unknown,
): JsonRpcErrorResponse {
  const error: JsonRpcErrorObject = data === undefined ? { code, message } : { code, message, data }
  return { jsonrpc: '2.0', id, error }
}

export function resultResponse(id: JsonRpcId, result: JsonObject): JsonRpcResultResponse {
  return { jsonrpc: '2.0', id, result }
}

/** Serializes one message or a batch. Messages never contain raw newlines (stdio framing). */
export function serialize(message: JsonRpcMessage | readonly JsonRpcMessage[]): string {
  return JSON.stringify(message)
}
