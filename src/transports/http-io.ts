/**
 * Small helpers shared by the inbound HTTP endpoints: reading a request body under a byte limit
 * without ever buffering more than the limit, and writing JSON / JSON-RPC error replies.
 */
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http'
import {
  errorResponse,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  type JsonRpcId,
  PARSE_ERROR,
  serialize,
} from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'

/**
 * How many bytes past the limit we read and throw away so the keep-alive connection stays
 * usable after a 413. A body larger than limit + this is cut off by closing the connection.
 */
export const DISCARD_LIMIT_BYTES = 1024 * 1024

export type BodyResult =
  | { readonly ok: true; readonly body: Buffer }
  | { readonly ok: false; readonly status: 413; readonly keepAlive: boolean; readonly size: number }
  | { readonly ok: false; readonly status: 400; readonly keepAlive: false; readonly size: number }

/**
 * Reads the whole body, keeping at most `maxBytes`. An oversize body is drained up to
 * DISCARD_LIMIT_BYTES more (so the next request on the connection works); beyond that the caller
 * must close the connection (`keepAlive: false`).
 */
export function readBody(req: IncomingMessage, maxBytes: number): Promise<BodyResult> {
  return new Promise((resolve) => readBodyThen(req, maxBytes, resolve))
}

/**
 * `readBody` with a callback, called once (from the request's 'end', 'error' or 'close', or at
 * once for a declared oversize body): the hot path takes no promise per body. `done` runs inside
 * the request's event: it must not throw.
 */
export function readBodyThen(
  req: IncomingMessage,
  maxBytes: number,
  done: (result: BodyResult) => void,
): void {
  const declared = Number(req.headers['content-length'])
  if (Number.isFinite(declared) && declared > maxBytes + DISCARD_LIMIT_BYTES) {
    done({ ok: false, status: 413, keepAlive: false, size: declared })
    return
  }
  const chunks: Buffer[] = []
  let size = 0
  let settled = false
  const finish = (result: BodyResult) => {
    if (settled) return
    settled = true
    req.off('data', onData)
    req.off('end', onEnd)
    req.off('error', onError)
    req.off('close', onClose)
    done(result)
  }
  const onData = (chunk: Buffer) => {
    size += chunk.length
    if (size <= maxBytes) {
      chunks.push(chunk)
      return
    }
    chunks.length = 0
    if (size > maxBytes + DISCARD_LIMIT_BYTES) {
      req.pause()
      finish({ ok: false, status: 413, keepAlive: false, size })
    }
  }
  const onEnd = () => {
    if (size > maxBytes) finish({ ok: false, status: 413, keepAlive: true, size })
    // A small body comes in one chunk, a Buffer of its own: used as it is, not copied.
    else
      finish({
        ok: true,
        body: chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size),
      })
  }
  const onError = () => finish({ ok: false, status: 400, keepAlive: false, size })
  const onClose = () => {
    if (!req.complete) finish({ ok: false, status: 400, keepAlive: false, size })
  }
  req.on('data', onData)
  req.on('end', onEnd)
  req.on('error', onError)
  req.on('close', onClose)
}

/**
 * How long, and how many more bytes, a connection closed after a refusal goes on reading what
 * the client is still sending. Closing a socket with unread data makes the kernel answer with a
 * reset, and a client still writing its body then sees EPIPE or ECONNRESET instead of the reply
 * (a "lingering close", as nginx and Apache do it).
 */
export const LINGER_MS = 2000
export const LINGER_BYTES = 64 * 1024 * 1024

/**
 * Answers a body `readBody` refused: 413 with the limit in the message. When the rest of the
 * body was not drained, the connection is closed after the reply rather than left desynchronised,
 * and closed gently: the reply and a FIN go out first, then what the client still sends is read
 * and thrown away for LINGER_MS (at most LINGER_BYTES) before the socket is destroyed.
 */
export function sendBodyRefusal(
  res: ServerResponse,
  result: Exclude<BodyResult, { ok: true }>,
  maxBytes: number,
): void {
  if (!result.keepAlive) lingerAfterReply(res)
  const headers: OutgoingHttpHeaders = result.keepAlive ? {} : { connection: 'close' }
  const message =
    result.status === 413
      ? `Request body exceeds the limit of ${maxBytes} bytes`
      : 'The request body could not be read'
  sendRpcError(res, result.status, message, { headers })
}

/**
 * Makes the server's close of this connection after the reply a lingering one. Node's HTTP server
 * ends a `connection: close` response with `socket.destroySoon()`, which destroys the socket as
 * soon as the reply is flushed; this socket's own `destroySoon` instead half-closes, keeps
 * reading (the request is resumed so its remaining body flows and is dropped), and destroys the
 * socket when the client closes its side, after LINGER_MS, or past LINGER_BYTES.
 */
function lingerAfterReply(res: ServerResponse): void {
  const socket = res.socket
  const req = res.req
  if (socket === null || socket.destroyed) return
  socket.destroySoon = function lingeringDestroySoon(this: typeof socket) {
    if (this.writable) this.end()
    let discarded = 0
    const stop = () => {
      clearTimeout(timer)
      this.destroy()
    }
    const timer = setTimeout(stop, LINGER_MS)
    timer.unref()
    this.once('end', stop)
    this.once('close', () => clearTimeout(timer))
    // The HTTP parser reads the socket itself; the bytes still arrive as the request's body.
    req.on('data', (chunk: Buffer) => {
      discarded += chunk.length
      if (discarded > LINGER_BYTES) stop()
    })
    req.resume()
  }
}

/** One strict decoder for every call: a non-streaming decode leaves no state behind. */
const UTF8 = new TextDecoder('utf-8', { fatal: true })

/** Decodes UTF-8 strictly: invalid bytes are a parse error, never silently replaced. */
export function decodeUtf8(body: Buffer): string | undefined {
  try {
    return UTF8.decode(body)
  } catch {
    return undefined
  }
}

/**
 * Reads a JSON-RPC POST body as text within `maxBytes`, answering the refusal itself (413, or 400
 * with -32700 for bytes that are not UTF-8); `undefined` when it did.
 */
export async function readTextBody(
  req: IncomingMessage,
  res: ServerResponse,
  maxBytes: number,
): Promise<string | undefined> {
  return textOrRefusal(res, await readBody(req, maxBytes), maxBytes)
}

/** The body's text, or undefined once its refusal (413, or 400 for bytes not UTF-8) is sent. */
function textOrRefusal(
  res: ServerResponse,
  body: BodyResult,
  maxBytes: number,
): string | undefined {
  if (!body.ok) {
    sendBodyRefusal(res, body, maxBytes)
    return undefined
  }
  const text = decodeUtf8(body.body)
  if (text === undefined) {
    sendRpcError(res, 400, 'The body is not valid UTF-8', { code: PARSE_ERROR })
  }
  return text
}

/**
 * `readTextBody` with a callback: `done` gets the text, or is not called when the refusal was
 * answered here. `done` runs inside the request's 'end' event: it must not throw.
 */
export function readTextBodyThen(
  req: IncomingMessage,
  res: ServerResponse,
  maxBytes: number,
  done: (text: string) => void,
): void {
  readBodyThen(req, maxBytes, (body) => {
    const text = textOrRefusal(res, body, maxBytes)
    if (text !== undefined) done(text)
  })
}

/**
 * Answers a request whose handling threw: logged, then 500 with -32603 when nothing was sent
 * yet, else the connection is cut (a reply half written cannot be completed).
 */
export function failRequest(
  log: Logger,
  req: IncomingMessage,
  res: ServerResponse,
  err: unknown,
): void {
  log.error('HTTP request failed', { error: err, url: req.url })
  if (!res.headersSent) sendRpcError(res, 500, 'Internal error', { code: INTERNAL_ERROR })
  else res.destroy()
}

/** Writes a reply without a body (202, 200 to DELETE) unless the response already started. */
export function sendEmpty(
  res: ServerResponse,
  status: number,
  headers: OutgoingHttpHeaders = {},
): void {
  if (res.headersSent || res.writableEnded || res.destroyed) return
  res.writeHead(status, { ...headers, 'content-length': 0 })
  res.end()
}

/** Writes a complete JSON reply unless the response has already started or ended. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: OutgoingHttpHeaders = {},
): void {
  if (res.headersSent || res.writableEnded || res.destroyed) return
  const text = typeof body === 'string' ? body : JSON.stringify(body)
  res.writeHead(status, {
    ...headers,
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
  })
  res.end(text)
}

/**
 * Writes a JSON-RPC reply already serialised, with its headers as a flat list (no header object
 * is built and copied per reply); `sessionId` adds `Mcp-Session-Id`. Nothing is written once the
 * response has started or ended.
 */
export function sendJsonText(
  res: ServerResponse,
  status: number,
  text: string,
  sessionId?: string,
): void {
  if (res.headersSent || res.writableEnded || res.destroyed) return
  const length = Buffer.byteLength(text)
  res.writeHead(
    status,
    sessionId === undefined
      ? ['content-type', 'application/json', 'content-length', length]
      : ['content-type', 'application/json', 'content-length', length, 'mcp-session-id', sessionId],
  )
  res.end(text)
}

/**
 * Answers an HTTP-level refusal with an id-less (or id-carrying) JSON-RPC error body, which MCP
 * clients can show and which the 2026-07-28 backward-compatibility probe relies on.
 */
export function sendRpcError(
  res: ServerResponse,
  status: number,
  message: string,
  options: { code?: number; id?: JsonRpcId | null; headers?: OutgoingHttpHeaders } = {},
): void {
  const reply = errorResponse(options.id ?? null, options.code ?? INVALID_REQUEST, message)
  sendJson(res, status, serialize(reply), options.headers)
}

/** Lower-cased request headers as a plain record (what ReceiveInfo and ConnectionInfo carry). */
export function headerRecord(
  req: IncomingMessage,
): Readonly<Record<string, string | string[] | undefined>> {
  return { ...req.headers }
}

/** One header's value; a repeated header yields `undefined` plus `repeated: true`. */
export function singleHeader(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name]
  if (Array.isArray(value)) return value.length === 1 ? value[0] : undefined
  return value
}

/**
 * Answers of `acceptsMedia` by media type, then Accept header: a client sends the same header on
 * every request, so its parse is done once. Keyed by the header itself (no key string is built
 * per request). Bounded; emptied when full.
 */
const ACCEPT_CACHE = new Map<string, Map<string, boolean>>()
const ACCEPT_CACHE_MAX = 256

/** True when the header names a media type, honouring `*\/*`, `type/*` and absent headers. */
export function accepts(req: IncomingMessage, mediaType: string): boolean {
  const accept = req.headers.accept
  if (accept === undefined || accept === '') return true
  let answers = ACCEPT_CACHE.get(mediaType)
  if (answers === undefined) {
    answers = new Map()
    ACCEPT_CACHE.set(mediaType, answers)
  }
  let answer = answers.get(accept)
  if (answer === undefined) {
    answer = acceptsMedia(accept, mediaType)
    if (answers.size >= ACCEPT_CACHE_MAX) answers.clear()
    answers.set(accept, answer)
  }
  return answer
}

function acceptsMedia(accept: string, mediaType: string): boolean {
  const [type] = mediaType.split('/')
  for (const part of accept.split(',')) {
    const [range = '', ...params] = part.trim().toLowerCase().split(';')
    // q=0 explicitly refuses the type.
    if (params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(p))) continue
    if (range === mediaType || range === '*/*' || range === `${type}/*`) return true
  }
  return false
}
