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
import { BarbicanError } from '../errors.ts'
import { undici } from '../lazy-deps.ts'
import type { Logger } from '../log.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import {
  isRequest,
  isResponse,
  type JsonRpcId,
  type JsonRpcMessage,
  serialize,
} from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'
import { SseStreams, type StreamState, streamState } from './http-outbound-streams.ts'
import {
  abortError,
  Deadline,
  failureResponse,
  headerValue,
  httpStatusError,
  mergeHeaders,
  networkError,
  readBoundedText,
  refusalReply,
} from './http-outbound-support.ts'
import { decodePayload, preview } from './outbound-payload.ts'
import { isEventStream } from './sse-stream.ts'
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
}

/** Per-message options: the headers the 2026-07-28 hop needs, a deadline, cancellation. */
export interface HttpSendOptions extends SendOptions {
  /** Extra headers for this POST only (`Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`…). */
  readonly headers?: Readonly<Record<string, string>> | undefined
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

const ACCEPT_BOTH = 'application/json, text/event-stream'

/** A Streamable HTTP connection to one upstream endpoint. */
export class HttpOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly name: string
  readonly url: URL
  /** Sent as `MCP-Protocol-Version` on every request once set (after initialize). */
  protocolVersion: string | undefined

  readonly #options: HttpOutboundOptions
  readonly #log: Logger
  readonly #dispatcher: Dispatcher
  readonly #ownsDispatcher: boolean
  #sessionId: string | undefined
  #sessionExpired = false
  #closed = false
  #closing: Promise<void> | undefined
  #standalone: 'none' | 'open' | 'unsupported' = 'none'
  readonly #closeController = new AbortController()
  readonly #deadlines = new Set<Deadline>()
  readonly #background = new Set<Promise<void>>()
  readonly #streams: SseStreams

  /** Called once the handshake chose a revision: later requests carry it in the header. */
  setProtocolVersion(revision: Revision): void {
    this.protocolVersion = revision
  }

  constructor(options: HttpOutboundOptions) {
    this.#options = options
    this.name = options.name
    this.url = new URL(options.url)
    this.protocolVersion = options.protocolVersion
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
  async send(message: JsonRpcMessage, options: HttpSendOptions = {}): Promise<void> {
    await this.#post(message, options, false)
  }

  /**
   * Sends the first message of a connection like `send`, but answers 'legacy' (having sent
   * nothing to `onmessage`) when the endpoint refuses the POST with 400, 404 or 405 and no
   * JSON-RPC body: the sign of a legacy HTTP+SSE server, as the MCP fallback rule describes.
   */
  sendOrDetectLegacy(
    message: JsonRpcMessage,
    options: HttpSendOptions = {},
  ): Promise<HttpProbeOutcome> {
    return this.#post(message, options, true)
  }

  async #post(
    message: JsonRpcMessage,
    options: HttpSendOptions,
    detectLegacy: boolean,
  ): Promise<HttpProbeOutcome> {
    if (this.#closed) throw this.#closedError()
    const id = isRequest(message) ? message.id : undefined
    const deadline = this.#track(
      new Deadline(options.timeoutMs ?? this.#options.requestTimeoutMs ?? 60_000, options.signal),
    )
    let response: Dispatcher.ResponseData
    try {
      response = await undici().request(this.url, {
        dispatcher: this.#dispatcher,
        method: 'POST',
        headers: this.#headers(
          { accept: ACCEPT_BOTH, 'content-type': 'application/json' },
          options.headers,
        ),
        body: serialize(message),
        signal: deadline.signal,
        headersTimeout: 0,
        bodyTimeout: 0,
      })
    } catch (err) {
      this.#untrack(deadline)
      this.#fail(id, abortError(deadline, this.name) ?? networkError(err, this.name), deadline)
      return 'failed'
    }
    const status = response.statusCode
    if (status >= 200 && status < 300) {
      const sessionId = headerValue(response.headers, 'mcp-session-id')
      if (sessionId !== undefined) this.#sessionId = sessionId
      this.#inBackground(this.#consume(response, id, deadline))
      if ('method' in message && message.method === 'notifications/initialized') {
        if (this.#options.standaloneStream ?? true) this.openStandaloneStream()
      }
      return 'sent'
    }
    return await this.#refused(response, id, deadline, detectLegacy)
  }

  /** Handles an HTTP error status to a POST. */
  async #refused(
    response: Dispatcher.ResponseData,
    id: JsonRpcId | undefined,
    deadline: Deadline,
    detectLegacy: boolean,
  ): Promise<HttpProbeOutcome> {
    const status = response.statusCode
    let text = ''
    try {
      text = await readBoundedText(response.body, this.#options.limits.maxMessageBytes)
    } catch {
      // An unreadable error body changes nothing: the status decides.
    } finally {
      this.#untrack(deadline)
    }
    const reply = refusalReply(text, id, this.#options.limits)
    if (
      detectLegacy &&
      reply === undefined &&
      (status === 400 || status === 404 || status === 405)
    ) {
      return 'legacy'
    }
    const expired = status === 404 && reply === undefined && this.#sessionId !== undefined
    const error = expired
      ? new BarbicanError('ERR_UPSTREAM_CLOSED', `Upstream "${this.name}" ended the session`, {
          data: { httpStatus: status },
        })
      : httpStatusError(status, this.name)
    this.#log.warn('upstream refused a message', { status, body: preview(text) })
    if (id === undefined) {
      if (expired) this.#expire()
      throw error
    }
    this.onerror?.(error)
    this.#deliver(reply ? { jsonrpc: '2.0', id, error: reply.error } : failureResponse(id, error))
    if (expired) this.#expire()
    return 'sent'
  }

  /** Reads a 2xx answer (JSON, SSE, or nothing) and makes sure a request gets its reply. */
  async #consume(response: Dispatcher.ResponseData, id: JsonRpcId | undefined, deadline: Deadline) {
    const state = streamState(id)
    try {
      if (isEventStream(response.headers['content-type'])) {
        await this.#streams.follow(response.body, state, deadline)
        return
      }
      const text = await readBoundedText(response.body, this.#options.limits.maxMessageBytes)
      if (text.trim() !== '') this.#receive(text, state)
      if (id !== undefined && !state.answered) {
        throw new BarbicanError(
          'ERR_UPSTREAM_PROTOCOL',
          `Upstream "${this.name}" answered HTTP ${response.statusCode} without a response`,
        )
      }
    } catch (err) {
      if (state.answered) return
      this.#fail(
        id,
        abortError(deadline, this.name) ?? networkError(err, this.name),
        deadline,
        true,
      )
    } finally {
      this.#untrack(deadline)
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

  /**
   * Reports a failed exchange. A request gets an error reply (the caller stops waiting); a
   * message that is not a request rejects its `send`, or, once `send` has resolved, goes to `onerror`.
   * Nothing is reported for a request its caller cancelled, and `send` rejects once closed.
   */
  #fail(id: JsonRpcId | undefined, error: BarbicanError, deadline: Deadline, later = false) {
    if (deadline.reason === 'close' || deadline.reason === 'cancel') {
      if (later || (id !== undefined && deadline.reason === 'cancel')) return
      throw error
    }
    this.#log.warn('upstream exchange failed', { code: error.code, error: error.message })
    if (id === undefined) {
      if (!later) throw error
      this.onerror?.(error)
      return
    }
    this.onerror?.(error)
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
    for (const deadline of this.#deadlines) deadline.abort('close')
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
        ...(this.protocolVersion === undefined
          ? {}
          : { 'mcp-protocol-version': this.protocolVersion }),
      },
      extra,
    )
  }

  #track(deadline: Deadline): Deadline {
    this.#deadlines.add(deadline)
    return deadline
  }

  #untrack(deadline: Deadline): void {
    deadline.dispose()
    this.#deadlines.delete(deadline)
  }

  #inBackground(task: Promise<void>): void {
    const tracked = task.catch((err: unknown) => {
      this.#log.error('upstream background task failed', { error: err })
    })
    this.#background.add(tracked)
    void tracked.finally(() => this.#background.delete(tracked))
  }

  #closedError(): BarbicanError {
    return new BarbicanError('ERR_UPSTREAM_CLOSED', `Upstream "${this.name}" connection is closed`)
  }
}
