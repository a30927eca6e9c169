/**
 * Streamable HTTP for MCP 2026-07-28: no sessions, every POST is one request with its own
 * short-lived Transport, closed once the response is written. The routing headers
 * (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`) must mirror the body, because intermediaries
 * route and authorize on them; any disagreement is refused with HTTP 400 and JSON-RPC -32020
 * (2026-07-28 streamable-http transport, "Standard Headers"). Closing the response stream
 * cancels the request, which the handler sees through `ReceiveInfo.signal`.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { requestIdentity } from '../auth/request-identity.ts'
import { jsonRpcCodeOf } from '../common/errors.ts'
import { HEADER_MISMATCH } from '../protocol/error-codes.ts'
import {
  errorResponse,
  INTERNAL_ERROR,
  INVALID_PARAMS,
  isErrorResponse,
  isPlainObject,
  isRequest,
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  METHOD_NOT_FOUND,
  serialize,
} from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import { headerRecord, sendEmpty, sendJson, sendRpcError, singleHeader } from './http-io.ts'
import type { ConnectionInfo, InboundHandler } from './inbound.ts'
import { formatEvent, SseConnection, type SseConnectionOptions } from './sse-writer.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

/** The `_meta` key by which a 2026-07-28 request names its protocol revision. */
export const PROTOCOL_VERSION_META = 'io.modelcontextprotocol/protocolVersion'

/** Methods whose target travels in `Mcp-Name`, and the params member it mirrors. */
const NAME_PARAM: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
  // The tasks extension routes on the task id the same way.
  'tasks/get': 'taskId',
  'tasks/update': 'taskId',
  'tasks/cancel': 'taskId',
}

/** The revision a message claims in `params._meta`, if it claims one. */
export function bodyVersionClaim(message: JsonRpcMessage): unknown {
  if (!('method' in message) || !isPlainObject(message.params)) return undefined
  const meta = message.params._meta
  return isPlainObject(meta) ? meta[PROTOCOL_VERSION_META] : undefined
}

/**
 * Decodes a header value that may use the `=?base64?…?=` form the 2026-07-28 spec prescribes for
 * values that are not header-safe. `undefined` for a malformed encoded value.
 */
export function decodeHeaderValue(value: string): string | undefined {
  const match = /^=\?base64\?([A-Za-z0-9+/]*={0,2})\?=$/.exec(value)
  if (!match) return value.startsWith('=?base64?') ? undefined : value
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(
      Buffer.from(match[1] as string, 'base64'),
    )
  } catch {
    return undefined
  }
}

/** Why a 2026-07-28 request lacks its required `_meta` fields; `undefined` when it has them. */
export function missingEnvelope(message: JsonRpcRequest): string | undefined {
  const meta = isPlainObject(message.params) ? message.params._meta : undefined
  if (!isPlainObject(meta)) return 'Missing required _meta in params'
  if (typeof meta[PROTOCOL_VERSION_META] !== 'string') {
    return `Missing required _meta field ${PROTOCOL_VERSION_META}`
  }
  if (!isPlainObject(meta['io.modelcontextprotocol/clientCapabilities'])) {
    return 'Missing required _meta field io.modelcontextprotocol/clientCapabilities'
  }
  return undefined
}

/** Why a 2026-07-28 request's headers disagree with its body; `undefined` when they agree. */
export function headerMismatch(req: IncomingMessage, message: JsonRpcRequest): string | undefined {
  const version = readHeader(req, 'mcp-protocol-version')
  const claim = bodyVersionClaim(message)
  if (typeof version !== 'string') {
    return version?.error ?? 'The MCP-Protocol-Version header is required'
  }
  if (claim !== version) {
    return `Header mismatch: MCP-Protocol-Version header value '${version}' does not match body value '${String(claim)}'`
  }
  const method = readHeader(req, 'mcp-method')
  if (typeof method !== 'string') return method?.error ?? 'The Mcp-Method header is required'
  if (method !== message.method) {
    return `Header mismatch: Mcp-Method header value '${method}' does not match body value '${message.method}'`
  }
  const param = NAME_PARAM[message.method]
  if (param === undefined) return undefined
  const name = readHeader(req, 'mcp-name')
  const bodyName = message.params?.[param]
  if (name === undefined && bodyName === undefined) return undefined // params error, not ours
  if (typeof name !== 'string') {
    return name?.error ?? `The Mcp-Name header is required for ${message.method}`
  }
  if (name !== bodyName) {
    return `Header mismatch: Mcp-Name header value '${name}' does not match body value '${String(bodyName)}'`
  }
  return undefined
}

/** A decoded header value, `undefined` when absent, or `{ error }` when malformed or repeated. */
function readHeader(req: IncomingMessage, name: string): string | undefined | { error: string } {
  if (req.headers[name] === undefined) return undefined
  const raw = singleHeader(req, name)
  const value = raw === undefined ? undefined : decodeHeaderValue(raw)
  return value === undefined ? { error: `Malformed ${name} header` } : value
}

/** The HTTP status the 2026-07-28 spec assigns to a JSON-RPC error answered as JSON. */
export function statusForReply(message: JsonRpcMessage): number {
  if (!isErrorResponse(message)) return 200
  const code = message.error.code
  if (code === METHOD_NOT_FOUND) return 404
  // -32020 header mismatch, -32021 missing client capability, -32022 unsupported version.
  if (code <= -32020 && code >= -32022) return 400
  // The whole HTTP request was refused by a rate limit (policies/rate-limit.ts).
  if (code === RATE_LIMITED) return 429
  return 200
}

const RATE_LIMITED = jsonRpcCodeOf('ERR_RATE_LIMITED')

/** The Retry-After header of a rate-limited reply, from the seconds its data carries. */
function retryAfterHeader(message: JsonRpcMessage): Record<string, string> {
  if (!isErrorResponse(message) || message.error.code !== RATE_LIMITED) return {}
  const data = message.error.data as { details?: { retryAfterSeconds?: unknown } } | undefined
  const seconds = data?.details?.retryAfterSeconds
  return typeof seconds === 'number' ? { 'retry-after': String(seconds) } : {}
}

export interface StatelessContext {
  readonly handler: InboundHandler
  readonly server: string
  readonly sse: Omit<SseConnectionOptions, 'headers'>
  readonly log: Logger
}

/** Answers one stateless POST whose body parsed to a single valid message. */
export function handleStatelessPost(
  req: IncomingMessage,
  res: ServerResponse,
  message: JsonRpcMessage,
  acceptsSse: boolean,
  ctx: StatelessContext,
): void {
  if (isResponse(message)) {
    sendRpcError(res, 400, 'Clients must not POST responses in MCP 2026-07-28')
    return
  }
  const info: ConnectionInfo = {
    kind: 'streamable-http-stateless',
    server: ctx.server,
    remoteAddress: req.socket.remoteAddress,
    headers: headerRecord(req),
    identity: requestIdentity(req),
  }
  if (!isRequest(message)) {
    // Notification POSTs have no header rules in 2026-07-28; accept and dispatch them.
    const transport = new StatelessTransport(res, undefined, false, ctx)
    ctx.handler.connect(transport, info)
    transport.dispatch(message, info.headers ?? {})
    sendEmpty(res, 202)
    void transport.close()
    return
  }
  // A request without the required _meta envelope is -32602 (HTTP 400) before any header check.
  const missing = missingEnvelope(message)
  if (missing !== undefined) {
    sendRpcError(res, 400, missing, { code: INVALID_PARAMS, id: message.id })
    return
  }
  const mismatch = headerMismatch(req, message)
  if (mismatch !== undefined) {
    sendRpcError(res, 400, mismatch, { code: HEADER_MISMATCH, id: message.id })
    return
  }
  const transport = new StatelessTransport(res, message, acceptsSse, ctx)
  ctx.handler.connect(transport, info)
  transport.dispatch(message, info.headers ?? {})
}

/** The Transport of one stateless request: lives until its response is written. */
export class StatelessTransport implements Transport {
  readonly sessionId: undefined = undefined
  readonly #res: ServerResponse
  readonly #request: JsonRpcRequest | undefined
  readonly #acceptsSse: boolean
  readonly #ctx: StatelessContext
  readonly #abort = new AbortController()
  #stream: SseConnection | undefined
  #answered = false
  #closed = false
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  constructor(
    res: ServerResponse,
    request: JsonRpcRequest | undefined,
    acceptsSse: boolean,
    ctx: StatelessContext,
  ) {
    this.#res = res
    this.#request = request
    this.#acceptsSse = acceptsSse
    this.#ctx = ctx
    res.on('close', () => {
      if (this.#answered || this.#request === undefined) return
      // The client closed the response stream before the answer: that cancels the request.
      this.#abort.abort(new Error('The client closed the response stream'))
      void this.close()
    })
  }

  start(): Promise<void> {
    return Promise.resolve()
  }

  /** Hands the request to the session the handler attached. */
  dispatch(message: JsonRpcMessage, headers: NonNullable<ReceiveInfo['headers']>): void {
    this.onmessage?.(message, { headers, signal: this.#abort.signal })
  }

  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('The request has already been answered'))
    const request = this.#request
    if (request !== undefined && isResponse(message) && message.id === request.id) {
      this.#answered = true
      if (this.#stream) {
        this.#stream.write(formatEvent(serialize(message)))
        this.#stream.end()
      } else {
        sendJson(this.#res, statusForReply(message), serialize(message), retryAfterHeader(message))
      }
      void this.close()
      return Promise.resolve()
    }
    // Everything else on this transport belongs to the one request (progress, log messages).
    if (!this.#acceptsSse || request === undefined) {
      this.#ctx.log.debug('dropping a message the client cannot receive on a JSON response', {
        method: 'method' in message ? message.method : undefined,
      })
      return Promise.resolve()
    }
    this.#stream ??= new SseConnection(this.#res, this.#ctx.sse)
    if (!this.#stream.write(formatEvent(serialize(message)))) {
      return Promise.reject(new Error('The response stream is closed'))
    }
    return Promise.resolve()
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.#closed = true
    if (!this.#answered && this.#request !== undefined) {
      this.#answered = true
      const reply = errorResponse(
        this.#request.id,
        INTERNAL_ERROR,
        'The request ended without a response',
      )
      if (this.#stream) {
        this.#stream.write(formatEvent(serialize(reply)))
        this.#stream.end()
      } else {
        sendJson(this.#res, 500, serialize(reply))
      }
    }
    this.onclose?.()
    return Promise.resolve()
  }
}
