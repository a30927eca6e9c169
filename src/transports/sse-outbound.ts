/**
 * Barbican talking to a legacy HTTP+SSE upstream (MCP 2024-11-05): one long GET stream carries
 * everything the server sends; its first `endpoint` event names the URL to which each client
 * message is POSTed. The endpoint must stay on the stream's origin: a server (or anything that
 * can inject into its stream) must not be able to redirect Barbican's traffic elsewhere.
 */
import type { Dispatcher } from 'undici'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { undici } from '../common/lazy-deps.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { isRequest, type JsonRpcMessage, serialize } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import type { HttpSendOptions } from './http-outbound.ts'
import { DeadlineSweep, Exchange } from './http-outbound-exchange.ts'
import {
  abortError,
  Deadline,
  failureResponse,
  httpStatusError,
  mergeHeaders,
  networkError,
} from './http-outbound-support.ts'
import { decodePayload, preview } from './outbound-payload.ts'
import { isEventStream, isJson, readSse, type SseEvent } from './sse-stream.ts'
import type { ReceiveInfo, Transport } from './transport.ts'

export interface SseOutboundOptions {
  readonly name: string
  /** The SSE endpoint (GET). */
  readonly url: string | URL
  readonly log: Logger
  readonly limits: JsonLimits
  /** Sent on the GET and on every POST. */
  readonly headers?: Readonly<Record<string, string>> | undefined
  readonly dispatcher?: Dispatcher | undefined
  /** How long the stream may take to announce its endpoint (default 10 s). */
  readonly connectTimeoutMs?: number | undefined
  /** How long one POST may take (default 60 s); answers arrive on the stream. */
  readonly requestTimeoutMs?: number | undefined
}

/** A legacy HTTP+SSE connection to one upstream. */
export class SseOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly name: string
  readonly url: URL
  readonly #options: SseOutboundOptions
  readonly #log: Logger
  readonly #dispatcher: Dispatcher
  readonly #ownsDispatcher: boolean
  #endpoint: URL | undefined
  #state: 'new' | 'connecting' | 'open' | 'closed' = 'new'
  #stream: Deadline | undefined
  #reading: Promise<void> | undefined
  #streamEnded = false
  #closing: Promise<void> | undefined
  /** The POSTs in flight, with their deadlines (one timer for all). */
  readonly #posts = new DeadlineSweep()
  /** A POST's headers without per-message extras (undici only reads them). */
  readonly #postHeaders: Record<string, string>

  constructor(options: SseOutboundOptions) {
    this.#options = options
    this.name = options.name
    this.url = new URL(options.url)
    this.#log = options.log.child({ upstream: options.name })
    this.#ownsDispatcher = options.dispatcher === undefined
    this.#dispatcher = options.dispatcher ?? new (undici().Agent)({ keepAliveTimeout: 10_000 })
    this.#postHeaders = mergeHeaders(options.headers, { 'content-type': 'application/json' })
  }

  /** The URL messages are POSTed to, once the server announced it. */
  get endpoint(): URL | undefined {
    return this.#endpoint
  }
  get sessionId(): undefined {
    return undefined
  }

  /** Opens the stream and waits for the `endpoint` event. */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error('SseOutboundTransport.start() called twice')
    this.#state = 'connecting'
    const stream = new Deadline(this.#options.connectTimeoutMs ?? 10_000)
    this.#stream = stream
    try {
      const response = await undici().request(this.url, {
        dispatcher: this.#dispatcher,
        method: 'GET',
        headers: mergeHeaders(this.#options.headers, { accept: 'text/event-stream' }),
        signal: stream.signal,
        headersTimeout: 0,
        bodyTimeout: 0,
      })
      if (response.statusCode !== 200 || !isEventStream(response.headers['content-type'])) {
        await response.body.dump().catch(() => {})
        throw httpStatusError(response.statusCode, this.name)
      }
      const endpoint = await new Promise<URL>((resolve, reject) => {
        this.#reading = this.#read(response.body, resolve, reject)
      })
      stream.dispose() // the connect deadline is met; the stream itself lives until close
      this.#endpoint = endpoint
      this.#state = 'open'
      this.#log.debug('upstream SSE endpoint announced', { endpoint: endpoint.href })
      if (this.#streamEnded) void this.close()
    } catch (err) {
      const error =
        stream.reason === 'timeout'
          ? new BarbicanError(
              'ERR_UPSTREAM_TIMEOUT',
              `Upstream "${this.name}" announced no endpoint in time`,
            )
          : networkError(err, this.name)
      this.#closing = this.#shutdown(false)
      await this.#closing
      throw error
    }
  }

  async #read(
    body: Dispatcher.ResponseData['body'],
    onEndpoint: (url: URL) => void,
    onFailure: (error: unknown) => void,
  ): Promise<void> {
    let announced = false
    try {
      await readSse(body, {
        maxEventBytes: this.#options.limits.maxMessageBytes,
        onEvent: (event: SseEvent) => {
          if (event.event === 'endpoint') {
            if (announced) return
            const url = this.#resolveEndpoint(event.data)
            announced = true
            onEndpoint(url)
            return
          }
          if ((event.event === undefined || event.event === 'message') && event.data !== '') {
            this.#receive(event.data)
          }
        },
      })
    } catch (err) {
      if (!announced) onFailure(err)
      else if (this.#state === 'open') this.#log.warn('upstream SSE stream broke', { error: err })
    }
    if (!announced) {
      onFailure(new BarbicanError('ERR_UPSTREAM_PROTOCOL', 'Stream ended before an endpoint'))
      return
    }
    // The stream is the connection: when it ends, so does the transport.
    this.#streamEnded = true
    if (this.#state === 'open') void this.close()
  }

  #resolveEndpoint(data: string): URL {
    let url: URL
    try {
      url = new URL(data.trim(), this.url)
    } catch {
      throw new BarbicanError('ERR_UPSTREAM_PROTOCOL', `Invalid endpoint "${preview(data)}"`)
    }
    if (url.origin !== this.url.origin) {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${this.name}" announced an endpoint on another origin (${url.origin})`,
      )
    }
    return url
  }

  #receive(text: string): void {
    const decoded = decodePayload(text, this.#options.limits)
    for (const fault of decoded.faults) {
      this.#log.warn('upstream sent an invalid message', { reason: fault.message })
      this.onerror?.(fault)
    }
    for (const message of decoded.messages) {
      try {
        this.onmessage?.(message)
      } catch (err) {
        this.#log.error('message handler failed', { error: err })
      }
    }
  }

  /**
   * POSTs one message to the endpoint; answers come on the stream. For a request, an HTTP
   * failure becomes an error reply on `onmessage`; for other messages it rejects.
   */
  async send(message: JsonRpcMessage, options: HttpSendOptions = {}): Promise<void> {
    const endpoint = this.#endpoint
    if (this.#state !== 'open' || endpoint === undefined) {
      throw upstreamClosed(this.name, 'is not connected')
    }
    const id = isRequest(message) ? message.id : undefined
    const exchange = new Exchange(
      options.timeoutMs ?? this.#options.requestTimeoutMs ?? 60_000,
      this.#options.limits.maxMessageBytes,
      options.signal,
    )
    exchange.watch(this.#posts)
    let error: BarbicanError | undefined
    try {
      const response = await exchange.start(this.#dispatcher, {
        origin: endpoint.origin,
        path: `${endpoint.pathname}${endpoint.search}`,
        method: 'POST',
        headers:
          options.headers === undefined
            ? this.#postHeaders
            : mergeHeaders(this.#postHeaders, options.headers),
        body: serialize(message),
        headersTimeout: 0,
        bodyTimeout: 0,
      })
      let text = ''
      if (response.body.kind === 'stream') {
        // Answers belong on the GET stream; a stream here carries nothing to read.
        await response.body.stream.consume(() => {})
      } else {
        text = await new Promise<string>((resolve, reject) => {
          exchange.onBody((failure, body) => (failure ? reject(failure) : resolve(body)))
        })
      }
      if (response.statusCode >= 300) {
        this.#log.warn('upstream refused a message', {
          status: response.statusCode,
          body: preview(text),
        })
        error = httpStatusError(response.statusCode, this.name)
      } else if (isJson(response.headers['content-type']) && text.trim() !== '') {
        // Not in the 2024-11-05 text, but some servers answer inline: lose nothing.
        this.#receive(text)
      }
    } catch (err) {
      if (exchange.reason === 'close') {
        throw upstreamClosed(this.name, 'closed')
      }
      if (exchange.reason === 'cancel') return
      error = abortError(exchange, this.name) ?? networkError(err, this.name)
    } finally {
      exchange.dispose()
    }
    if (error === undefined) return
    if (id === undefined) throw error
    this.onerror?.(error)
    try {
      this.onmessage?.(failureResponse(id, error))
    } catch (err) {
      this.#log.error('message handler failed', { error: err })
    }
  }

  /** Closes the stream and every POST in flight; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#shutdown(this.#state === 'open')
    return this.#closing
  }

  async #shutdown(notify: boolean): Promise<void> {
    this.#state = 'closed'
    this.#stream?.abort('close')
    this.#posts.abortAll('close')
    await this.#reading?.catch(() => {})
    if (this.#ownsDispatcher) await this.#dispatcher.destroy().catch(() => {})
    if (notify) this.onclose?.()
  }
}
