/**
 * Barbican talking to a Streamable HTTP upstream (MCP 2025-03-26 onwards, 2026-07-28 included):
 * one POST per message over a keep-alive pool per origin, answers as JSON or as an SSE stream,
 * the legacy session id captured and echoed, dropped streams resumed with `Last-Event-ID`.
 *
 * Every request the caller sends gets one answer on `onmessage` (unless the caller cancels it):
 * the upstream's, or a JSON-RPC error made here when the exchange fails (HTTP error, timeout,
 * unreachable host, stream lost), so a caller never waits on an HTTP failure. Other messages
 * (notifications, responses to the server's requests) have no one to answer: their failures
 * reject `send` instead.
 */
import type { Dispatcher } from 'undici'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { undici } from '../common/lazy-deps.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import {
  isRequest,
  isResponse,
  type JsonRpcId,
  type JsonRpcMessage,
  serialize,
} from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  DeadlineSweep,
  Exchange,
  type ExchangeStart,
  type PushBody,
} from './http-outbound-exchange.ts'
import {
  ANSWERED_STREAM_LINGER_MS,
  SseStreams,
  type StreamState,
  streamState,
} from './http-outbound-streams.ts'
import {
  abortError,
  Deadline,
  type ExchangeDeadline,
  failureResponse,
  headerValue,
  httpStatusError,
  mergeHeaders,
  networkError,
  refusalReply,
} from './http-outbound-support.ts'
import { decodePayload, preview } from './outbound-payload.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

export interface HttpOutboundOptions {
  readonly name: string
  readonly url: string | URL
  readonly log: Logger
  readonly limits: JsonLimits
  /** Sent on every request (e.g. the upstream's own credentials from the config). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** A shared keep-alive pool; by default the transport owns one and closes it with itself. */
  readonly dispatcher?: Dispatcher | undefined
  /** How long one exchange may take, from POST to the request's answer (default 60 s). */
  readonly requestTimeoutMs?: number | undefined
  /** Initial `MCP-Protocol-Version` header; settable later through `protocolVersion`. */
  readonly protocolVersion?: string | undefined
  /** Open the standalone GET stream once `notifications/initialized` is accepted (true). */
  readonly standaloneStream?: boolean | undefined
  /** Consecutive failed reconnections of one SSE stream before giving up (default 3). */
  readonly maxReconnects?: number | undefined
  /** Wait before reconnecting when the server sent no `retry:` (default 1000 ms). */
  readonly defaultRetryMs?: number | undefined
  /**
   * How long an SSE answer may stay open after it carried the request's answer before it is cut
   * (default 2000 ms). Servers end it at once; reading to the end keeps the connection pooled.
   */
  readonly answeredStreamLingerMs?: number | undefined
}

/** Per-message options: the headers the 2026-07-28 hop needs, a deadline, cancellation. */
export interface HttpSendOptions extends SendOptions {
  /** Overrides `requestTimeoutMs` for this message. */
  readonly timeoutMs?: number | undefined
  /** Aborting closes this POST's stream, which is how 2026-07-28 cancels a request. */
  readonly signal?: AbortSignal | undefined
}

/**
 * What `sendOrDetectLegacy` found at the URL: a Streamable HTTP answer ('sent'), the refusal of
 * a legacy HTTP+SSE server ('legacy'), or no HTTP answer at all ('failed', already reported as
 * for `send`), which proves nothing about the server.
 */
export type HttpProbeOutcome = 'sent' | 'legacy' | 'failed'

/** Where `#post` leaves what a probe found. */
interface Probe {
  outcome: HttpProbeOutcome
}

const POST_BASE: Readonly<Record<string, string>> = Object.freeze({
  accept: 'application/json, text/event-stream',
  'content-type': 'application/json',
})

/** A Streamable HTTP connection to one upstream endpoint. */
export class HttpOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly name: string
  readonly url: URL

  readonly #options: HttpOutboundOptions
  readonly #origin: string
  readonly #path: string
  #protocolVersion: string | undefined
  /** The headers of a POST, made again only when the session id or the version changes. */
  #postHeaders: Record<string, string> | undefined
  /** The same as a flat name/value list, which undici takes without listing an object's keys. */
  #postHeaderList: string[] | undefined
  readonly #log: Logger
  readonly #dispatcher: Dispatcher
  readonly #ownsDispatcher: boolean
  #sessionId: string | undefined
  #sessionExpired = false
  #closed = false
  #closing: Promise<void> | undefined
  #standalone: 'none' | 'open' | 'unsupported' = 'none'
  readonly #closeController = new AbortController()
  readonly #deadlines = new DeadlineSweep()
  readonly #background = new Set<Promise<void>>()
  readonly #streams: SseStreams

  /** Called once the handshake chose a revision: later requests carry it in the header. */
  setProtocolVersion(revision: Revision): void {
    this.protocolVersion = revision
  }

  /** Sent as `MCP-Protocol-Version` on every request once set (after initialize). */
  get protocolVersion(): string | undefined {
    return this.#protocolVersion
  }
  set protocolVersion(version: string | undefined) {
    if (version !== this.#protocolVersion) this.#forgetPostHeaders()
    this.#protocolVersion = version
  }

  constructor(options: HttpOutboundOptions) {
    this.#options = options
    this.name = options.name
    this.url = new URL(options.url)
    this.#origin = this.url.origin
    this.#path = `${this.url.pathname}${this.url.search}`
    this.#protocolVersion = options.protocolVersion
    this.#log = options.log.child({ upstream: options.name })
    this.#ownsDispatcher = options.dispatcher === undefined
    this.#dispatcher =
      options.dispatcher ??
      new (undici().Agent)({ keepAliveTimeout: 10_000, keepAliveMaxTimeout: 60_000 })
    this.#streams = new SseStreams({
      name: this.name,
      url: this.url,
      dispatcher: this.#dispatcher,
      log: this.#log,
      maxEventBytes: options.limits.maxMessageBytes,
      maxReconnects: options.maxReconnects ?? 3,
      defaultRetryMs: options.defaultRetryMs ?? 1000,
      answeredLingerMs: options.answeredStreamLingerMs ?? ANSWERED_STREAM_LINGER_MS,
      headers: (base) => this.#headers(base),
      receive: (text, state) => this.#receive(text, state),
    })
  }

  /** The legacy session id the server assigned, once known. */
  get sessionId(): string | undefined {
    return this.#sessionId
  }
  get closed(): boolean {
    return this.#closed
  }

  /** Nothing to connect: every message is its own HTTP exchange. */
  async start(): Promise<void> {
    if (this.#closed) throw this.#closedError()
  }

  /**
   * POSTs one message. Resolves once the upstream's response headers arrive (the answer is read
   * in the background and delivered to `onmessage`). Rejects only when the transport is closed,
   * or when a message that is not a request (a notification, a response) fails.
   */
  send(message: JsonRpcMessage, options: HttpSendOptions = {}): Promise<void> {
    // #post's own promise, not an async wrapper around it: one promise and its microtasks less
    // per call. Only a probe needs the outcome, and it asks for it.
    return this.#post(message, options, undefined)
  }

  /**
   * Sends the first message of a connection like `send`, but answers 'legacy' (having sent
   * nothing to `onmessage`) when the endpoint refuses the POST with 400, 404 or 405 and no
   * JSON-RPC body: the sign of a legacy HTTP+SSE server, as the MCP fallback rule describes.
   */
  async sendOrDetectLegacy(
    message: JsonRpcMessage,
    options: HttpSendOptions = {},
  ): Promise<HttpProbeOutcome> {
    const probe: Probe = { outcome: 'sent' }
    await this.#post(message, options, probe)
    return probe.outcome
  }

  /** POSTs `message`; with a `probe`, tells it what was found at the URL (see HttpProbeOutcome). */
  async #post(
    message: JsonRpcMessage,
    options: HttpSendOptions,
    probe: Probe | undefined,
  ): Promise<void> {
    if (this.#closed) throw this.#closedError()
    const id = isRequest(message) ? message.id : undefined
    const exchange = new Exchange(
      options.timeoutMs ?? this.#options.requestTimeoutMs ?? 60_000,
      this.#options.limits.maxMessageBytes,
      options.signal,
    )
    exchange.watch(this.#deadlines)
    let response: ExchangeStart
    try {
      response = await exchange.start(this.#dispatcher, {
        origin: this.#origin,
        path: this.#path,
        method: 'POST',
        headers:
          options.headers === undefined
            ? this.#basePostHeaderList()
            : mergeHeaders(this.#basePostHeaders(), options.headers),
        body: serialize(message),
        headersTimeout: 0,
        bodyTimeout: 0,
      })
    } catch (err) {
      exchange.dispose()
      this.#failExchange(id, err, exchange)
      if (probe !== undefined) probe.outcome = 'failed'
      return
    }
    const status = response.statusCode
    if (status >= 200 && status < 300) {
      const sessionId = headerValue(response.headers, 'mcp-session-id')
      if (sessionId !== undefined && sessionId !== this.#sessionId) {
        this.#sessionId = sessionId
        this.#forgetPostHeaders()
      }
      const body = response.body
      if (body.kind === 'stream') {
        this.#inBackground(this.#follow(body.stream, id, exchange))
      } else {
        exchange.onBody((error, text) => this.#consumed(error, text, id, status, exchange))
      }
      if ('method' in message && message.method === 'notifications/initialized') {
        if (this.#options.standaloneStream ?? true) this.openStandaloneStream()
      }
      return
    }
    await this.#refused(status, exchange, id, probe)
  }

  /** Handles an HTTP error status to a POST. */
  async #refused(
    status: number,
    exchange: Exchange,
    id: JsonRpcId | undefined,
    probe: Probe | undefined,
  ): Promise<void> {
    // An unreadable error body changes nothing: the status decides.
    const text = await new Promise<string>((resolve) => {
      exchange.onBody((_error, body) => resolve(body))
    })
    exchange.dispose()
    const reply = refusalReply(text, id, this.#options.limits)
    if (
      probe !== undefined &&
      reply === undefined &&
      (status === 400 || status === 404 || status === 405)
    ) {
      probe.outcome = 'legacy'
      return
    }
    const expired = status === 404 && reply === undefined && this.#sessionId !== undefined
    const error = expired
      ? upstreamClosed(this.name, 'ended the session', { data: { httpStatus: status } })
      : httpStatusError(status, this.name)
    this.#log.warn('upstream refused a message', { status, body: preview(text) })
    if (id === undefined) {
      if (expired) this.#expire()
      throw error
    }
    this.onerror?.(error)
    this.#deliver(reply ? { jsonrpc: '2.0', id, error: reply.error } : failureResponse(id, error))
    if (expired) this.#expire()
  }

  /** A 2xx answer collected whole (JSON, or nothing): makes sure a request gets its reply. */
  #consumed(
    error: Error | undefined,
    text: string,
    id: JsonRpcId | undefined,
    status: number,
    exchange: Exchange,
  ): void {
    exchange.dispose()
    const state = streamState(id)
    try {
      if (error !== undefined) throw error
      if (text.trim() !== '') this.#receive(text, state)
      if (id !== undefined && !state.answered) {
        throw new BarbicanError(
          'ERR_UPSTREAM_PROTOCOL',
          `Upstream "${this.name}" answered HTTP ${status} without a response`,
        )
      }
    } catch (err) {
      if (state.answered) return
      // `later`: reported through onmessage or onerror, never thrown.
      this.#failExchange(id, err, exchange, true)
    }
  }

  /** Reads an SSE answer (resuming it if it breaks) and makes sure a request gets its reply. */
  async #follow(stream: PushBody, id: JsonRpcId | undefined, exchange: Exchange) {
    const state = streamState(id)
    try {
      await this.#streams.follow(stream, state, exchange)
    } catch (err) {
      if (state.answered) return
      this.#failExchange(id, err, exchange, true)
    } finally {
      exchange.dispose()
    }
  }

  #receive(text: string, state: StreamState): void {
    const decoded = decodePayload(text, this.#options.limits)
    for (const fault of decoded.faults) {
      this.#log.warn('upstream sent an invalid message', { reason: fault.message })
      this.onerror?.(fault)
    }
    for (const message of decoded.messages) {
      if (state.requestId !== undefined && isResponse(message) && message.id === state.requestId) {
        state.answered = true
      }
      this.#deliver(message)
    }
  }

  #deliver(message: JsonRpcMessage): void {
    try {
      this.onmessage?.(message)
    } catch (err) {
      this.#log.error('message handler failed', { error: err })
    }
  }

  /** Reports what `exchange` threw: its abort reason (deadline, cancel, close) or a network error. */
  #failExchange(id: JsonRpcId | undefined, err: unknown, exchange: Exchange, later = false) {
    this.#fail(id, abortError(exchange, this.name) ?? networkError(err, this.name), exchange, later)
  }

  /**
   * Reports a failed exchange. A request gets an error reply (the caller stops waiting); a
   * message that is not a request rejects its `send`, or, once `send` has resolved, goes to `onerror`.
   * Nothing is reported for a request its caller cancelled, and `send` rejects once closed.
   */
  #fail(
    id: JsonRpcId | undefined,
    error: BarbicanError,
    deadline: ExchangeDeadline,
    later = false,
  ) {
    if (deadline.reason === 'close' || deadline.reason === 'cancel') {
      if (later || (id !== undefined && deadline.reason === 'cancel')) return
      throw error
    }
    // Debug: the error reaches the caller (a request's error reply, a rejected send) or, for a
    // message already sent, onerror; each is reported once there, not per layer (ADR 120).
    this.#log.debug('upstream exchange failed', { code: error.code, error: error.message })
    if (id === undefined) {
      if (!later) throw error
      this.onerror?.(error)
      return
    }
    this.#deliver(failureResponse(id, error))
  }

  /**
   * Opens the standalone GET stream on which a legacy server sends requests and notifications
   * unrelated to any POST. A 405 means the server has none; a broken stream is reopened (with
   * `Last-Event-ID`) until it fails `maxReconnects` times in a row.
   */
  openStandaloneStream(): void {
    if (this.#closed || this.#standalone !== 'none') return
    this.#standalone = 'open'
    this.#inBackground(
      this.#streams
        .standalone(this.#closeController.signal, (error) => this.onerror?.(error))
        .then((end) => {
          // A lost stream may be opened again later; a server without one never has it.
          this.#standalone = end === 'unsupported' ? 'unsupported' : 'none'
        }),
    )
  }

  /** Ends the session (DELETE, when there is one), aborts every exchange, frees the pool. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown()
    return this.#closing
  }

  async #shutdown(): Promise<void> {
    this.#closed = true
    this.#closeController.abort()
    this.#deadlines.abortAll('close')
    if (this.#sessionId !== undefined && !this.#sessionExpired) await this.#deleteSession()
    await Promise.allSettled([...this.#background])
    if (this.#ownsDispatcher) await this.#dispatcher.destroy().catch(() => {})
    this.onclose?.()
  }

  async #deleteSession(): Promise<void> {
    const deadline = new Deadline(2000)
    try {
      const response = await undici().request(this.url, {
        dispatcher: this.#dispatcher,
        method: 'DELETE',
        headers: this.#headers({}),
        headersTimeout: 0,
        bodyTimeout: 0,
        signal: deadline.signal,
      })
      await response.body.dump().catch(() => {})
      // 405: the server does not let clients end sessions; it will expire the session itself.
      this.#log.debug('upstream session deleted', { status: response.statusCode })
    } catch (err) {
      this.#log.debug('upstream session delete failed', { error: err })
    } finally {
      deadline.dispose()
    }
  }

  /** The server forgot the session (404): this connection is over; the client must reconnect. */
  #expire(): void {
    this.#sessionExpired = true
    this.#log.warn('upstream session expired')
    void this.close()
  }

  #headers(base: Record<string, string>, extra?: Readonly<Record<string, string>>) {
    return mergeHeaders(
      this.#options.headers,
      base,
      {
        ...(this.#sessionId === undefined ? {} : { 'mcp-session-id': this.#sessionId }),
        ...(this.#protocolVersion === undefined
          ? {}
          : { 'mcp-protocol-version': this.#protocolVersion }),
      },
      extra,
    )
  }

  /** A POST's headers without per-message extras; undici only reads them, so one object serves. */
  #basePostHeaders(): Record<string, string> {
    this.#postHeaders ??= this.#headers(POST_BASE)
    return this.#postHeaders
  }

  #basePostHeaderList(): string[] {
    this.#postHeaderList ??= Object.entries(this.#basePostHeaders()).flat()
    return this.#postHeaderList
  }

  /** The session id or the version changed: the next POST builds its headers again. */
  #forgetPostHeaders(): void {
    this.#postHeaders = undefined
    this.#postHeaderList = undefined
  }

  #inBackground(task: Promise<void>): void {
    const tracked = task.catch((err: unknown) => {
      this.#log.error('upstream background task failed', { error: err })
    })
    this.#background.add(tracked)
    void tracked.finally(() => this.#background.delete(tracked))
  }

  #closedError(): BarbicanError {
    return upstreamClosed(this.name, 'connection is closed')
  }
}
