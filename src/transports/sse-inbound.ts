/**
 * The legacy HTTP+SSE transport (MCP 2024-11-05), still used by older clients: GET `/sse` opens
 * a stream whose first event, `endpoint`, names the URL to POST messages to; that URL carries a
 * CSPRNG session id. Each POST is answered 202 and every reply travels on the stream. The
 * stream's lifetime is the session's: when it closes, the Transport closes.
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { requestIdentity } from '../auth/request-identity.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import {
  isRequest,
  isResponse,
  type JsonRpcMessage,
  parsePayload,
  serialize,
} from '../protocol/jsonrpc.ts'
import { type Revision, TRAITS } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  accepts,
  headerRecord,
  readTextBody,
  sendEmpty,
  sendJson,
  sendRpcError,
} from './http-io.ts'
import type { InboundHandler } from './inbound.ts'
import type { SessionDirectory } from './session-directory.ts'
import { admitHttpSession, SessionLimits } from './session-limits.ts'
import { formatEvent, SseConnection } from './sse-writer.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

/** Where clients POST their messages; the endpoint event names it with `?sessionId=`. */
export const SSE_MESSAGES_PATH = '/messages'

/** The limits the endpoint needs; `HttpInboundOptions` documents each. */
export interface SseInboundOptions {
  readonly maxBodyBytes: number
  readonly jsonLimits: JsonLimits
  readonly maxSessions: number
  readonly maxSessionsPerIdentity: number
  readonly sseMaxQueuedBytes: number
  readonly sseKeepAliveMs: number
  readonly identityOf: (req: IncomingMessage) => string
}

/** One HTTP+SSE session: the open stream plus the identity that opened it. */
export class SseSessionTransport implements Transport {
  readonly sessionId: string
  readonly identity: string
  /** The virtual server the stream was opened on; its POSTs are authenticated for it. */
  readonly server: string
  readonly #connection: SseConnection
  readonly #onEnded: () => void
  #protocolVersion: Revision | undefined
  #closed = false
  /** Requests received and not yet answered, so shutdown can wait for their replies. */
  readonly #pending = new Set<string>()
  #closeWhenIdle = false
  /** Time of the last POSTed message, for eviction (the oldest idle session goes first). */
  lastActivity = Date.now()
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  constructor(
    sessionId: string,
    identity: string,
    server: string,
    connection: SseConnection,
    onEnded: () => void,
  ) {
    this.sessionId = sessionId
    this.identity = identity
    this.server = server
    this.#connection = connection
    this.#onEnded = onEnded
    connection.onclose = () => void this.close()
  }

  /** Lets the session report the negotiated revision (batches only for 2025-03-26). */
  setProtocolVersion(revision: Revision): void {
    this.#protocolVersion = revision
  }

  get allowsBatch(): boolean {
    return this.#protocolVersion !== undefined && TRAITS[this.#protocolVersion].batching
  }

  start(): Promise<void> {
    return Promise.resolve()
  }

  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    const event = formatEvent(serialize(message), { event: 'message' })
    if (this.#closed || !this.#connection.write(event)) {
      return Promise.reject(new Error('The SSE stream is closed'))
    }
    if (isResponse(message) && message.id !== null) {
      this.#pending.delete(`${typeof message.id}:${message.id}`)
      if (this.#closeWhenIdle && this.#pending.size === 0) void this.close()
    }
    return Promise.resolve()
  }

  /** True while no request of this session is unanswered (only then may it be evicted). */
  get idle(): boolean {
    return this.#pending.size === 0
  }

  /** Hands one client message to the session, remembering requests until they are answered. */
  receive(message: JsonRpcMessage, info: ReceiveInfo): void {
    this.lastActivity = Date.now()
    if (isRequest(message)) this.#pending.add(`${typeof message.id}:${message.id}`)
    this.onmessage?.(message, info)
  }

  /** Shutdown: closes now, or as soon as the requests in progress are answered. */
  closeWhenIdle(): void {
    this.#closeWhenIdle = true
    if (this.#pending.size === 0) void this.close()
  }

  /** Writes replies owed for invalid items of a POST body. */
  sendErrors(errors: readonly JsonRpcMessage[]): void {
    for (const error of errors) void this.send(error).catch(() => {})
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.#closed = true
    this.#connection.end()
    this.#onEnded()
    this.onclose?.()
    return Promise.resolve()
  }
}

/** Serves GET `/sse[/<server>]` and POST `/messages?sessionId=…`. */
export class SseEndpoint {
  readonly #handler: InboundHandler
  readonly #options: SseInboundOptions
  readonly #log: Logger
  readonly #sessions = new Map<string, SseSessionTransport>()
  readonly #limits: SessionLimits<SseSessionTransport>
  /** Told of every session opened and closed here when replicas share sessions (ADR 058). */
  directory: SessionDirectory | undefined

  constructor(handler: InboundHandler, options: SseInboundOptions, log: Logger) {
    this.#handler = handler
    this.#options = options
    this.#log = log
    this.#limits = new SessionLimits(
      options,
      {
        idle: (transport) => transport.idle,
        lastActivity: (transport) => transport.lastActivity,
        evict: (transport) => void transport.close(),
      },
      'legacy SSE',
      log,
    )
  }

  get sessionCount(): number {
    return this.#sessions.size
  }

  /** GET `/sse`: opens the stream and announces the POST endpoint. */
  open(req: IncomingMessage, res: ServerResponse, server: string): void {
    if (!accepts(req, 'text/event-stream')) {
      sendRpcError(res, 406, 'Accept must include text/event-stream')
      return
    }
    const owner = admitHttpSession(this.#limits, req, res)
    if (owner === undefined) return
    const id = randomBytes(24).toString('base64url')
    const connection = new SseConnection(res, {
      maxQueuedBytes: this.#options.sseMaxQueuedBytes,
      keepAliveMs: this.#options.sseKeepAliveMs,
      log: this.#log.child({ sessionId: id }),
    })
    const transport: SseSessionTransport = new SseSessionTransport(
      id,
      this.#options.identityOf(req),
      server,
      connection,
      () => {
        this.#sessions.delete(id)
        this.#limits.remove(transport)
        this.directory?.closed(id)
      },
    )
    this.#sessions.set(id, transport)
    this.#limits.add(owner, transport)
    this.directory?.opened(id)
    // Relative, so it resolves against whatever URL the client used to reach us (proxies).
    connection.write(formatEvent(`${SSE_MESSAGES_PATH}?sessionId=${id}`, { event: 'endpoint' }))
    try {
      this.#handler.connect(transport, {
        kind: 'sse',
        server,
        remoteAddress: req.socket.remoteAddress,
        headers: headerRecord(req),
        identity: requestIdentity(req),
      })
    } catch (err) {
      void transport.close()
      throw err
    }
  }

  /**
   * The virtual server of the live session `id` names, so the listener authenticates its POSTs
   * for that server (audience and step-up scopes); undefined for an unknown session.
   */
  /** Whether this replica holds the session `id`. */
  holds(id: string): boolean {
    return this.#sessions.has(id)
  }

  serverOf(id: string | null): string | undefined {
    return id === null ? undefined : this.#sessions.get(id)?.server
  }

  /** POST `/messages?sessionId=…`: 202, the replies go on the stream. */
  async post(req: IncomingMessage, res: ServerResponse, url: URL): Promise<void> {
    const id = url.searchParams.get('sessionId')
    if (id === null || id === '') {
      sendRpcError(res, 400, 'The sessionId query parameter is required')
      return
    }
    const transport = this.#sessions.get(id)
    if (transport === undefined || transport.identity !== this.#options.identityOf(req)) {
      sendRpcError(res, 404, 'Session not found')
      return
    }
    if (!/^application\/json(\s*;|$)/i.test(req.headers['content-type'] ?? '')) {
      sendRpcError(res, 415, 'Content-Type must be application/json')
      return
    }
    const text = await readTextBody(req, res, this.#options.maxBodyBytes)
    if (text === undefined) return
    const parsed = parsePayload(text, {
      limits: this.#options.jsonLimits,
      allowBatch: transport.allowsBatch,
    })
    if (!parsed.ok) return sendJson(res, 400, serialize(parsed.error))
    sendEmpty(res, 202)
    const headers = headerRecord(req)
    // The session's rights follow the credential of each POST (a refreshed token included).
    const identity = requestIdentity(req)
    const info = parsed.batch ? { headers, batch: true, identity } : { headers, identity }
    const errors: JsonRpcMessage[] = []
    for (const item of parsed.items) {
      if (item.ok) transport.receive(item.message, info)
      else errors.push(item.error)
    }
    transport.sendErrors(errors)
  }

  /** Shutdown, step one: sessions close once their requests in progress are answered. */
  closeWhenIdle(): void {
    for (const transport of this.#sessions.values()) transport.closeWhenIdle()
  }

  /** Shutdown, last step: closes every session and its stream. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.#sessions.values()].map((transport) => transport.close()))
  }
}
