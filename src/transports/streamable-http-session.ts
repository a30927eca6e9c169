/**
 * One legacy Streamable HTTP session (MCP 2025-03-26 … 2025-11-25) as a Transport.
 *
 * Each POST carrying requests is an exchange. Its answer is JSON unless something related to
 * one of its requests (a progress notification, a server→client request) must go out before
 * the response: then, if the client accepts it, the POST turns into an SSE stream at that
 * moment. Messages related to no open exchange go on the session's standalone GET stream. Every
 * stream is a ReplayableStream, so a client that lost a connection resumes with `Last-Event-ID`
 * and receives only that stream's missed events.
 */
import type { ServerResponse } from 'node:http'
import type { Identity } from '../auth/identity.ts'
import {
  errorResponse,
  INTERNAL_ERROR,
  INVALID_REQUEST,
  isErrorResponse,
  isRequest,
  isResponse,
  type JsonRpcId,
  type JsonRpcMessage,
  type ParsedItem,
  serialize,
} from '../protocol/jsonrpc.ts'
import { type Revision, TRAITS } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import { sendEmpty, sendJson, sendJsonText } from './http-io.ts'
import {
  ReplayableStream,
  type ReplayLimits,
  SseConnection,
  type SseConnectionOptions,
} from './sse-writer.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

export interface SessionOptions {
  readonly replay: ReplayLimits
  /** Finished POST streams kept for resumption, per session (oldest dropped first). */
  readonly retainedStreams: number
  readonly sse: Omit<SseConnectionOptions, 'headers'>
  readonly log: Logger
}

/** One POST with at least one request, waiting for its responses. */
interface Exchange {
  readonly res: ServerResponse
  readonly batch: boolean
  readonly acceptsSse: boolean
  /** Requests not answered yet, by id. */
  readonly outstanding: Set<JsonRpcId>
  /** Replies held back for a JSON answer (batch errors, early responses). */
  collected: JsonRpcMessage[]
  stream: ReplayableStream | undefined
  readonly initialize: boolean
}

/**
 * The client closed the POST while it waited for its first SSE event or its JSON answer: replies
 * can no longer reach it. Read from the response when needed (its `closed` turns true as its
 * 'close' is emitted) instead of a 'close' listener per POST; asked only while the exchange has
 * no stream, as the listener used to record it.
 */
function gone(exchange: Exchange): boolean {
  return exchange.res.closed
}

/** The Transport the gateway's session talks through; the HTTP endpoint feeds it requests. */
export class StreamableHttpSession implements Transport {
  readonly sessionId: string
  /** Who created the session; later requests from anyone else get 404. */
  readonly identity: string
  /** The virtual server the session was opened on. */
  readonly server: string
  readonly #options: SessionOptions
  readonly #onEnded: () => void
  /**
   * Open exchanges by the id of each of their unanswered requests. Ids are the keys themselves:
   * a Map tells 1 from "1" (SameValueZero), as the requests must be told apart.
   */
  readonly #exchanges = new Map<JsonRpcId, Exchange>()
  readonly #streams = new Map<string, ReplayableStream>()
  readonly #retained: string[] = []
  readonly #standalone: ReplayableStream
  #nextStream = 1
  #protocolVersion: Revision | undefined
  #closed = false
  /** Time of the last request or stream activity, for the idle sweep. */
  lastActivity = Date.now()
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  constructor(
    sessionId: string,
    identity: string,
    server: string,
    options: SessionOptions,
    onEnded: () => void,
  ) {
    this.sessionId = sessionId
    this.identity = identity
    this.server = server
    this.#options = options
    this.#onEnded = onEnded
    this.#standalone = new ReplayableStream('0', options.replay)
    this.#streams.set('0', this.#standalone)
  }

  /** Called by the session once `initialize` negotiated a revision; enables batches for 2025-03-26. */
  setProtocolVersion(revision: Revision): void {
    this.#protocolVersion = revision
  }

  get protocolVersion(): Revision | undefined {
    return this.#protocolVersion
  }

  get allowsBatch(): boolean {
    return this.#protocolVersion !== undefined && TRAITS[this.#protocolVersion].batching
  }

  get closed(): boolean {
    return this.#closed
  }

  /** True while a request of this session is unanswered (such a session is never evicted). */
  get working(): boolean {
    return this.#exchanges.size > 0
  }

  /** True while a request is unanswered or a client holds a stream open. */
  get busy(): boolean {
    if (this.#exchanges.size > 0) return true
    for (const stream of this.#streams.values()) if (stream.attached) return true
    return false
  }

  start(): Promise<void> {
    return Promise.resolve()
  }

  /**
   * Takes one parsed POST body. Answers 202 at once when it carries no request. `identity` is
   * who this POST's own credential stands for (the session's rights follow it).
   */
  receivePost(
    res: ServerResponse,
    items: readonly ParsedItem[],
    batch: boolean,
    acceptsSse: boolean,
    headers: NonNullable<ReceiveInfo['headers']>,
    identity: Identity | undefined,
    initialize = false,
  ): void {
    this.lastActivity = Date.now()
    const errors: JsonRpcMessage[] = []
    const messages: JsonRpcMessage[] = []
    const keys = new Set<JsonRpcId>()
    for (const item of items) {
      if (!item.ok) {
        errors.push(item.error)
        continue
      }
      const message = item.message
      if (isRequest(message)) {
        const id = message.id
        if (this.#exchanges.has(id) || keys.has(id)) {
          errors.push(errorResponse(id, INVALID_REQUEST, 'Request id is already in use'))
          continue
        }
        keys.add(id)
      }
      messages.push(message)
    }
    if (keys.size === 0) {
      if (errors.length === 0) sendEmpty(res, 202, this.#headers())
      else sendJson(res, 400, serialize(batch ? errors : (errors[0] as JsonRpcMessage)))
    } else {
      const exchange: Exchange = {
        res,
        batch,
        acceptsSse,
        outstanding: keys,
        collected: errors,
        stream: undefined,
        initialize,
      }
      for (const id of keys) this.#exchanges.set(id, exchange)
    }
    const info = batch ? { headers, batch: true, identity } : { headers, identity }
    for (const message of messages) this.onmessage?.(message, info)
  }

  /** Opens the standalone GET stream, or resumes the stream a `Last-Event-ID` names. */
  receiveGet(res: ServerResponse, lastEventId: string | undefined): void {
    this.lastActivity = Date.now()
    const position =
      lastEventId === undefined ? undefined : ReplayableStream.parseEventId(lastEventId)
    const resumed = position === undefined ? undefined : this.#streams.get(position.streamId)
    const stream = resumed ?? this.#standalone
    if (stream.attached) {
      sendJson(res, 409, serialize(errorResponse(null, INVALID_REQUEST, 'Stream already open')))
      return
    }
    const connection = new SseConnection(res, { ...this.#options.sse, headers: this.#headers() })
    const { lost } = stream.attach(connection, resumed ? position?.seq : undefined)
    if (lost > 0) {
      this.#options.log.warn('resumed SSE stream lost events evicted from the replay buffer', {
        sessionId: this.sessionId,
        stream: stream.id,
        lost,
      })
    }
  }

  send(message: JsonRpcMessage, options?: SendOptions): Promise<void> {
    if (this.#closed) return Promise.reject(new Error('The session is closed'))
    if (isResponse(message)) {
      const id = message.id
      const exchange = id === null ? undefined : this.#exchanges.get(id)
      if (exchange === undefined || id === null) {
        this.#options.log.warn('no open request for a response; dropped', { id })
        return Promise.resolve()
      }
      this.#exchanges.delete(id)
      exchange.outstanding.delete(id)
      this.#deliver(exchange, message)
      return Promise.resolve()
    }
    const related = options?.relatedRequestId
    const exchange = related === undefined ? undefined : this.#exchanges.get(related)
    if (exchange && (exchange.stream || (exchange.acceptsSse && !gone(exchange)))) {
      this.#deliver(exchange, message)
    } else {
      this.#standalone.push(serialize(message))
    }
    return Promise.resolve()
  }

  #deliver(exchange: Exchange, message: JsonRpcMessage): void {
    if (exchange.stream === undefined && !isResponse(message)) this.#openStream(exchange)
    if (exchange.stream) exchange.stream.push(serialize(message))
    else exchange.collected.push(message)
    if (exchange.outstanding.size > 0) return
    // Every request of the POST is answered.
    if (exchange.stream) {
      exchange.stream.finish()
      this.#retain(exchange.stream)
      return
    }
    const failedInit = exchange.initialize && isErrorResponse(message)
    if (!gone(exchange)) {
      const body = exchange.batch ? exchange.collected : exchange.collected[0]
      sendJsonText(
        exchange.res,
        200,
        serialize(body as JsonRpcMessage),
        failedInit ? undefined : this.sessionId,
      )
    }
    // A session whose initialize failed was never established; do not keep it.
    if (failedInit) void this.close()
  }

  #openStream(exchange: Exchange): void {
    const stream = new ReplayableStream((this.#nextStream++).toString(36), this.#options.replay)
    this.#streams.set(stream.id, stream)
    const attach = !gone(exchange)
    exchange.stream = stream
    if (attach) {
      const headers = this.#headers()
      stream.attach(new SseConnection(exchange.res, { ...this.#options.sse, headers }))
    }
    for (const held of exchange.collected) stream.push(serialize(held))
    exchange.collected = []
  }

  /** Keeps a finished stream for resumption, within the per-session cap. */
  #retain(stream: ReplayableStream): void {
    this.#retained.push(stream.id)
    while (this.#retained.length > this.#options.retainedStreams) {
      const id = this.#retained.shift() as string
      this.#streams.get(id)?.close()
      this.#streams.delete(id)
    }
  }

  #headers(): Record<string, string> {
    return { 'mcp-session-id': this.sessionId }
  }

  /** Ends the standalone GET stream's connection (shutdown) without ending the session. */
  endStreams(): void {
    this.#standalone.disconnect()
  }

  /** Ends the session: unanswered requests get an error reply, every stream closes. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.#closed = true
    for (const [id, exchange] of [...this.#exchanges]) {
      this.#exchanges.delete(id)
      exchange.outstanding.delete(id)
      this.#deliver(exchange, errorResponse(id, INTERNAL_ERROR, 'The session was closed'))
    }
    for (const stream of this.#streams.values()) stream.close()
    this.#streams.clear()
    this.#onEnded()
    this.onclose?.()
    return Promise.resolve()
  }
}
