/**
 * MCP over WebSocket at `/ws`: one JSON-RPC message (or 2025-03-26 batch) per text frame, under
 * the `mcp` subprotocol. Clients that do not offer `mcp` are refused during the handshake with a
 * plain reason, so a mis-configured client fails loudly rather than talking past us. Binary
 * frames close the connection with 1003 (unsupported data); oversize frames with 1009 (ws's
 * `maxPayload`). A peer that stops reading is dropped once its send buffer exceeds a bound.
 */
import type { IncomingMessage } from 'node:http'
import type { Duplex } from 'node:stream'
import type { WebSocket, WebSocketServer } from 'ws'
import type { AuthResult } from '../auth/authenticator.ts'
import type { Identity } from '../auth/identity.ts'
import { requestIdentity } from '../auth/request-identity.ts'
import { ws } from '../common/lazy-deps.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import {
  errorResponse,
  INTERNAL_ERROR,
  isNotification,
  isPlainObject,
  isRequest,
  isResponse,
  type JsonRpcMessage,
  type JsonRpcRequest,
  PARSE_ERROR,
  parsePayload,
  serialize,
} from '../protocol/jsonrpc.ts'
import { eraOf, isRevision, type Revision, TRAITS } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import { decodeUtf8, headerRecord } from './http-io.ts'
import type { InboundHandler } from './inbound.ts'
import type { SessionDirectory } from './session-directory.ts'
import { SessionLimits, sessionOwner } from './session-limits.ts'
import { bodyVersionClaim } from './streamable-http-stateless.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

/** The one subprotocol we speak. */
export const MCP_SUBPROTOCOL = 'mcp'

/** The limits the endpoint needs; `HttpInboundOptions` documents each. */
export interface WebSocketInboundOptions {
  readonly maxSessions: number
  readonly maxSessionsPerIdentity: number
  readonly wsMaxPayloadBytes: number
  readonly wsMaxBufferedBytes: number
  readonly wsPingIntervalMs: number
  readonly jsonLimits: JsonLimits
}

/**
 * Checks again the credential a connection was opened with (InboundAuthenticator.recheck);
 * synchronous when it can be, so messages need not wait for the event loop.
 */
export type CredentialCheck = () => AuthResult | Promise<AuthResult>

/**
 * The close code for a connection whose credential stopped being valid (expired, revoked, or no
 * longer carrying the server's scopes): 1008, policy violation (RFC 6455 §7.4.1), the code for
 * "the endpoint refuses this message under its policy"; the reason says which check failed.
 */
export const CREDENTIAL_CLOSE_CODE = 1008

/**
 * The close code for a connection evicted to make room under the session limits: 1008 as well
 * (the gateway's policy ends it); the reason tells it from a credential failure.
 */
export const EVICTED_CLOSE_CODE = 1008

/** RFC 6455 §5.5: a close frame's reason is at most 123 bytes of UTF-8. */
function closeReason(text: string): string {
  let reason = text
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1)
  return reason
}

/** Refuses an upgrade request with an HTTP status and a reason the client can show. */
export function rejectUpgrade(
  socket: Duplex,
  status: number,
  reason: string,
  headers: Readonly<Record<string, string>> = {},
): void {
  const body = serialize(errorResponse(null, -32600, reason))
  const statusText =
    {
      400: 'Bad Request',
      401: 'Unauthorized',
      403: 'Forbidden',
      404: 'Not Found',
      429: 'Too Many Requests',
      503: 'Service Unavailable',
    }[status] ?? 'Error'
  // Header values come from Barbican itself, but a CR or LF must never split the response.
  const extra = Object.entries(headers)
    .map(([name, value]) => `${name}: ${value.replace(/[\r\n]/g, '')}\r\n`)
    .join('')
  socket.on('error', () => {})
  socket.end(
    `HTTP/1.1 ${status} ${statusText}\r\nConnection: close\r\nContent-Type: application/json\r\n` +
      `${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  )
}

/**
 * Relays a 2026-07-28 retry whose state names a call another replica holds (ADR 088): resolves
 * true once the answer, or the error saying why there is none, went through `send`; false when
 * the retry is this replica's to serve.
 */
export type SocketRetryRelay = (
  request: JsonRpcRequest,
  identity: Identity | undefined,
  send: (message: JsonRpcMessage) => void,
  signal: AbortSignal,
) => Promise<boolean>

/** A 2026-07-28 request that resumes a held call: it carries a sealed `requestState`. */
function isModernRetry(message: JsonRpcMessage): message is JsonRpcRequest {
  if (!isRequest(message) || typeof message.params?.requestState !== 'string') return false
  const claim = bodyVersionClaim(message)
  return isRevision(claim) && eraOf(claim) === 'modern'
}

/** One WebSocket client as a Transport. */
export class WebSocketTransport implements Transport {
  readonly sessionId: undefined = undefined
  readonly #ws: WebSocket
  readonly #options: WebSocketInboundOptions
  readonly #log: Logger
  readonly #pending = new Set<string>()
  #protocolVersion: Revision | undefined
  #closeWhenIdle = false
  #closed = false
  #alive = true
  #ping: NodeJS.Timeout | undefined
  readonly #recheck: CredentialCheck | undefined
  readonly #onEnded: (() => void) | undefined
  /** The fleet's relay for retries, when this replica is in one (asked at each retry). */
  readonly #relay: (() => SocketRetryRelay | undefined) | undefined
  /** Retries being relayed to the replica holding their call, by request key. */
  readonly #relaying = new Map<string, AbortController>()
  /** Messages waiting for an asynchronous credential check, handled in arrival order. */
  #checking: Promise<void> | undefined
  /** Time of the last frame from the client, for eviction (the oldest idle goes first). */
  lastActivity = Date.now()
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  /**
   * `recheck`: the credential check run before every message (absent without inbound auth);
   * `onEnded`: called once when the connection ends, however it ends; `relay`: in a fleet,
   * where a retry of a call held by another replica goes.
   */
  constructor(
    ws: WebSocket,
    options: WebSocketInboundOptions,
    log: Logger,
    recheck?: CredentialCheck,
    onEnded?: () => void,
    relay?: () => SocketRetryRelay | undefined,
  ) {
    this.#ws = ws
    this.#options = options
    this.#log = log
    this.#recheck = recheck
    this.#onEnded = onEnded
    this.#relay = relay
    ws.on('message', (data, isBinary) => this.#receive(data as Buffer, isBinary))
    ws.on('close', () => this.#onClosed())
    ws.on('error', (err) => this.onerror?.(err))
    ws.on('pong', () => {
      this.#alive = true
    })
    if (options.wsPingIntervalMs > 0) {
      // A peer that vanished without a close frame is found by a missed pong.
      this.#ping = setInterval(() => {
        if (!this.#alive) {
          this.#log.info('WebSocket peer stopped answering pings; dropping it')
          ws.terminate()
          return
        }
        this.#alive = false
        ws.ping()
      }, options.wsPingIntervalMs)
      this.#ping.unref()
    }
  }

  /** Lets the session report the negotiated revision (batches only for 2025-03-26). */
  setProtocolVersion(revision: Revision): void {
    this.#protocolVersion = revision
  }

  start(): Promise<void> {
    return Promise.resolve()
  }

  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    if (this.#closed || this.#ws.readyState !== this.#ws.OPEN) {
      return Promise.reject(new Error('The WebSocket is closed'))
    }
    if (this.#ws.bufferedAmount > this.#options.wsMaxBufferedBytes) {
      this.#log.warn('WebSocket client reads too slowly; disconnecting it', {
        bufferedBytes: this.#ws.bufferedAmount,
        maxBufferedBytes: this.#options.wsMaxBufferedBytes,
      })
      this.#ws.terminate()
      return Promise.reject(new Error('The WebSocket client reads too slowly'))
    }
    if (isResponse(message) && message.id !== null) {
      this.#pending.delete(`${typeof message.id}:${message.id}`)
    }
    return new Promise((resolve, reject) => {
      this.#ws.send(serialize(message), (err) => {
        if (err) reject(err)
        else resolve()
        if (this.#closeWhenIdle && this.#pending.size === 0) {
          void this.close(1001, 'Server shutting down')
        }
      })
    })
  }

  /** True while no request of this connection is unanswered (only then may it be evicted). */
  get idle(): boolean {
    return this.#pending.size === 0
  }

  /** Shutdown: closes (1001) now, or as soon as the requests in progress are answered. */
  closeWhenIdle(): void {
    this.#closeWhenIdle = true
    if (this.#pending.size === 0) void this.close(1001, 'Server shutting down')
  }

  /** Drops the connection without a closing handshake (shutdown deadline). */
  terminate(): void {
    this.#ws.terminate()
    this.#onClosed()
  }

  close(code = 1000, reason = ''): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.#ws.close(code, reason)
    this.#onClosed()
    return Promise.resolve()
  }

  #receive(data: Buffer, isBinary: boolean): void {
    if (this.#closed) return
    this.lastActivity = Date.now()
    if (isBinary) {
      this.#log.info('WebSocket client sent a binary frame; closing with 1003')
      void this.close(1003, 'Binary frames are not supported; send JSON-RPC as text')
      return
    }
    if (this.#recheck === undefined) {
      this.#handle(data, undefined)
      return
    }
    if (this.#checking !== undefined) {
      this.#queue(this.#checking.then(() => this.#checkThenHandle(data)))
      return
    }
    const pending = this.#checkThenHandle(data)
    if (pending !== undefined) this.#queue(pending)
  }

  /** Keeps later messages behind `pending`, so they are handled in the order they came. */
  #queue(pending: Promise<void>): void {
    const tail = pending.finally(() => {
      if (this.#checking === tail) this.#checking = undefined
    })
    this.#checking = tail
  }

  /**
   * Checks the connection's credential again, then handles the message; a credential that is
   * no longer good closes the connection with a reason instead. Returns a promise only when the
   * check is asynchronous.
   */
  #checkThenHandle(data: Buffer): Promise<void> | undefined {
    if (this.#closed || this.#recheck === undefined) return undefined
    let verdict: AuthResult | Promise<AuthResult>
    try {
      verdict = this.#recheck()
    } catch (error) {
      verdict = Promise.reject(error)
    }
    if (!(verdict instanceof Promise)) {
      this.#admit(verdict, data)
      return undefined
    }
    return verdict.then(
      (result) => this.#admit(result, data),
      (error: unknown) => {
        this.#log.error('WebSocket credential check failed', { error })
        this.#admit(
          { ok: false, status: 503, message: 'Authentication failed', wwwAuthenticate: '' },
          data,
        )
      },
    )
  }

  #admit(result: AuthResult, data: Buffer): void {
    if (this.#closed) return
    if (result.ok) {
      this.#handle(data, result.identity)
      return
    }
    // Fail closed: whatever made the credential unusable (expiry, revocation, lost scopes, an
    // issuer that cannot be reached), the message is not handled and the connection ends.
    this.#log.info('WebSocket credential no longer valid; closing', {
      status: result.status,
      reason: result.message,
    })
    void this.close(CREDENTIAL_CLOSE_CODE, closeReason(`Credential rejected: ${result.message}`))
  }

  #handle(data: Buffer, identity: Identity | undefined): void {
    const text = decodeUtf8(data)
    const allowBatch = this.#protocolVersion !== undefined && TRAITS[this.#protocolVersion].batching
    const parsed =
      text === undefined
        ? { ok: false as const, error: errorResponse(null, PARSE_ERROR, 'Invalid UTF-8') }
        : parsePayload(text, { limits: this.#options.jsonLimits, allowBatch })
    if (!parsed.ok) {
      void this.send(parsed.error).catch(() => {})
      return
    }
    // The identity the credential check just confirmed: the session's rights follow it.
    const info = parsed.batch ? { batch: true, identity } : identity && { identity }
    for (const item of parsed.items) {
      if (!item.ok) {
        void this.send(item.error).catch(() => {})
        continue
      }
      const message = item.message
      if (isRequest(message)) this.#pending.add(`${typeof message.id}:${message.id}`)
      else if (this.#relaying.size > 0) this.#cancelRelay(message)
      const relay = this.#relay !== undefined && isModernRetry(message) ? this.#relay() : undefined
      if (relay === undefined) this.onmessage?.(message, info)
      else this.#relayRetry(relay, message as JsonRpcRequest, info)
    }
  }

  /**
   * Hands a retry to the fleet (ADR 088); the session gets it only when this replica holds the
   * call. The relayed answer goes out through `send`, like the session's would.
   */
  #relayRetry(
    relay: SocketRetryRelay,
    request: JsonRpcRequest,
    info: ReceiveInfo | undefined,
  ): void {
    const key = `${typeof request.id}:${request.id}`
    const controller = new AbortController()
    this.#relaying.set(key, controller)
    const send = (message: JsonRpcMessage) => {
      if (!controller.signal.aborted) void this.send(message).catch(() => {})
    }
    relay(request, info?.identity, send, controller.signal)
      .then(
        (relayed) => {
          if (!relayed) this.onmessage?.(request, info)
        },
        (error: unknown) => {
          this.#log.error('relaying a held call retry failed', { error })
          send(errorResponse(request.id, INTERNAL_ERROR, 'Internal error'))
        },
      )
      .finally(() => {
        if (this.#relaying.get(key) === controller) this.#relaying.delete(key)
        // Cancelled: no answer went out, so the request is no longer pending here.
        if (controller.signal.aborted && this.#pending.delete(key)) this.#idleNow()
      })
  }

  /** A client's `notifications/cancelled` for a relayed retry ends the relayed request. */
  #cancelRelay(message: JsonRpcMessage): void {
    if (!isNotification(message) || message.method !== 'notifications/cancelled') return
    const params = message.params
    const id = isPlainObject(params) ? params.requestId : undefined
    this.#relaying.get(`${typeof id}:${id}`)?.abort()
  }

  /** A request ended without an answer: a shutdown waiting for this connection may go on. */
  #idleNow(): void {
    if (this.#closeWhenIdle && this.#pending.size === 0)
      void this.close(1001, 'Server shutting down')
  }

  #onClosed(): void {
    if (this.#closed) return
    this.#closed = true
    if (this.#ping) clearInterval(this.#ping)
    for (const controller of this.#relaying.values()) controller.abort()
    this.#onEnded?.()
    this.onclose?.()
  }
}

/** Accepts upgrades on `/ws[/<server>]` and hands each connection to the handler. */
export class WebSocketEndpoint {
  readonly #handler: InboundHandler
  readonly #options: WebSocketInboundOptions
  readonly #log: Logger
  // Created on the first upgrade: most gateways never see one, and ws costs start-up time.
  #wss: WebSocketServer | undefined
  readonly #transports = new Set<WebSocketTransport>()
  readonly #limits: SessionLimits<WebSocketTransport>
  /** In a fleet: where retries of calls held by other replicas go (ADR 088). */
  directory: SessionDirectory | undefined

  constructor(handler: InboundHandler, options: WebSocketInboundOptions, log: Logger) {
    this.#handler = handler
    this.#options = options
    this.#log = log
    this.#limits = new SessionLimits(
      options,
      {
        idle: (transport) => transport.idle,
        lastActivity: (transport) => transport.lastActivity,
        evict: (transport, bound) =>
          void transport.close(
            EVICTED_CLOSE_CODE,
            bound === 'maxSessionsPerIdentity'
              ? 'Evicted: too many sessions for this caller; this was its oldest idle one'
              : 'Evicted: too many sessions; this was the oldest idle one',
          ),
      },
      'WebSocket',
      log,
    )
  }

  #server(): WebSocketServer {
    this.#wss ??= new (ws().WebSocketServer)({
      noServer: true,
      maxPayload: this.#options.wsMaxPayloadBytes,
      // Compression would let a small frame inflate past our limits' intent and costs CPU.
      perMessageDeflate: false,
      handleProtocols: (protocols) => (protocols.has(MCP_SUBPROTOCOL) ? MCP_SUBPROTOCOL : false),
    })
    return this.#wss
  }

  get connectionCount(): number {
    return this.#transports.size
  }

  /**
   * Completes (or refuses) one upgrade whose Host, Origin, path and credential were already
   * checked; `recheck` checks that credential again before every message.
   */
  upgrade(
    req: IncomingMessage,
    socket: Duplex,
    head: Buffer,
    server: string,
    recheck?: CredentialCheck,
  ): void {
    const offered = (req.headers['sec-websocket-protocol'] ?? '').split(',').map((p) => p.trim())
    if (!offered.includes(MCP_SUBPROTOCOL)) {
      const reason = `WebSocket clients must offer the "${MCP_SUBPROTOCOL}" subprotocol`
      this.#log.info('refused a WebSocket handshake', { reason, offered })
      rejectUpgrade(socket, 400, reason)
      return
    }
    const owner = sessionOwner(req)
    const admission = this.#limits.admit(owner)
    if (!admission.ok) {
      rejectUpgrade(socket, admission.status, admission.reason, { 'Retry-After': '5' })
      return
    }
    // Asked when a retry comes: a fleet may be joined after the connection opened.
    const relay = (): SocketRetryRelay | undefined => {
      const directory = this.directory
      if (directory?.relaySocketRetry === undefined) return undefined
      return (request, identity, send, signal) =>
        directory.relaySocketRetry?.(request, {
          server,
          headers: req.headers,
          identity: identity ?? requestIdentity(req),
          send,
          signal,
        }) ?? Promise.resolve(false)
    }
    this.#server().handleUpgrade(req, socket, head, (client) => {
      const transport: WebSocketTransport = new WebSocketTransport(
        client,
        this.#options,
        this.#log,
        recheck,
        () => {
          this.#limits.remove(transport)
          this.#transports.delete(transport)
        },
        relay,
      )
      this.#limits.add(owner, transport)
      this.#transports.add(transport)
      this.#handler.connect(transport, {
        kind: 'websocket',
        server,
        remoteAddress: req.socket.remoteAddress,
        headers: headerRecord(req),
        identity: requestIdentity(req),
      })
    })
  }

  /** Shutdown, step one: connections close once their requests in progress are answered. */
  closeWhenIdle(): void {
    for (const transport of this.#transports) transport.closeWhenIdle()
  }

  /** Shutdown, last step: drops every connection still open. */
  closeAll(): Promise<void> {
    for (const transport of this.#transports) transport.terminate()
    this.#transports.clear()
    this.#wss?.close()
    return Promise.resolve()
  }
}
