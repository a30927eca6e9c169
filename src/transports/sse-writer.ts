/**
 * Server-sent event output for the inbound HTTP transports.
 *
 * `SseConnection` owns one `text/event-stream` response and makes a slow reader cost bounded
 * memory: writes respect `res.write()` returning false, events wait in a queue capped in bytes,
 * and a reader that lets the queue overflow is disconnected with a log line rather than letting
 * the process grow. `ReplayableStream` is one logical Streamable HTTP stream (a POST's response
 * stream or a session's standalone GET stream) that outlives its connections: it numbers its
 * events, keeps a bounded replay buffer, and lets a client resume with `Last-Event-ID`.
 */
import type { OutgoingHttpHeaders, ServerResponse } from 'node:http'
import type { Logger } from '../telemetry/log.ts'

export interface SseConnectionOptions {
  /** Bytes that may wait for a slow reader before it is disconnected. */
  readonly maxQueuedBytes: number
  /** Interval of `:` comment lines that keep proxies from timing the stream out; 0 disables. */
  readonly keepAliveMs: number
  readonly log: Logger
  /** Extra response headers (e.g. `mcp-session-id`). */
  readonly headers?: OutgoingHttpHeaders
}

/** Formats one SSE event; `data` must not contain newlines (serialized JSON never does). */
export function formatEvent(data: string, options: { id?: string; event?: string } = {}): string {
  let text = ''
  if (options.id !== undefined) text += `id: ${options.id}\n`
  if (options.event !== undefined) text += `event: ${options.event}\n`
  return `${text}data: ${data}\n\n`
}

/** One open `text/event-stream` response with backpressure and a bounded queue. */
export class SseConnection {
  readonly #res: ServerResponse
  readonly #options: SseConnectionOptions
  readonly #queue: string[] = []
  #queuedBytes = 0
  #waitingForDrain = false
  #ending = false
  #closed = false
  #timer: NodeJS.Timeout | undefined
  /** Called once when the response is finished or the client went away. */
  onclose?: () => void

  constructor(res: ServerResponse, options: SseConnectionOptions) {
    this.#res = res
    this.#options = options
    res.writeHead(200, {
      ...options.headers,
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache, no-transform',
      // Reverse proxies (nginx) would otherwise buffer the stream (2026-07-28 transports spec).
      'x-accel-buffering': 'no',
    })
    res.flushHeaders()
    res.on('close', () => this.#onClosed())
    // A client that left before we got here will never emit 'close' again.
    if (res.destroyed || res.socket === null || res.socket.destroyed) this.#onClosed()
    if (options.keepAliveMs > 0) {
      this.#timer = setInterval(() => {
        if (!this.#waitingForDrain) this.write(': keep-alive\n\n')
      }, options.keepAliveMs)
      this.#timer.unref()
    }
  }

  get closed(): boolean {
    return this.#closed || this.#ending
  }

  /** Bytes waiting in this connection's queue (for tests and metrics). */
  get queuedBytes(): number {
    return this.#queuedBytes
  }

  /** Sends one formatted event; false when the connection is gone and the event was not sent. */
  write(chunk: string): boolean {
    if (this.closed) return false
    if (!this.#waitingForDrain) {
      if (!this.#res.write(chunk)) this.#awaitDrain()
      return true
    }
    const bytes = Buffer.byteLength(chunk)
    if (this.#queuedBytes + bytes > this.#options.maxQueuedBytes) {
      this.#options.log.warn('SSE client reads too slowly; disconnecting it', {
        queuedBytes: this.#queuedBytes,
        maxQueuedBytes: this.#options.maxQueuedBytes,
      })
      this.destroy()
      return false
    }
    this.#queue.push(chunk)
    this.#queuedBytes += bytes
    return true
  }

  /** Ends the stream once everything queued has been written. */
  end(): void {
    if (this.closed) return
    this.#ending = true
    if (!this.#waitingForDrain) this.#res.end()
  }

  /** Drops the connection at once (slow reader, shutdown deadline). */
  destroy(): void {
    this.#queue.length = 0
    this.#queuedBytes = 0
    this.#res.destroy()
    this.#onClosed()
  }

  #awaitDrain(): void {
    this.#waitingForDrain = true
    this.#res.once('drain', this.#flush)
  }

  readonly #flush = (): void => {
    this.#waitingForDrain = false
    while (this.#queue.length > 0) {
      const chunk = this.#queue.shift() as string
      this.#queuedBytes -= Buffer.byteLength(chunk)
      if (!this.#res.write(chunk)) {
        this.#awaitDrain()
        return
      }
    }
    if (this.#ending && !this.#res.writableEnded) this.#res.end()
  }

  #onClosed(): void {
    if (this.#closed) return
    this.#closed = true
    if (this.#timer) clearInterval(this.#timer)
    this.#res.off('drain', this.#flush)
    this.onclose?.()
  }
}

/** Bounds of one stream's replay buffer; the oldest events are dropped first. */
export interface ReplayLimits {
  readonly maxEvents: number
  readonly maxBytes: number
}

interface StoredEvent {
  readonly seq: number
  readonly text: string
  readonly bytes: number
}

/**
 * A resumable event stream. Event ids are `<streamId>-<seq>`, so a `Last-Event-ID` names both the
 * stream and the position, and a resumption replays only that stream (2025-11-25 transports).
 */
export class ReplayableStream {
  readonly id: string
  readonly #limits: ReplayLimits
  readonly #events: StoredEvent[] = []
  #bytes = 0
  #seq = 0
  /** Highest sequence number written to any connection. */
  #written = 0
  #connection: SseConnection | undefined
  #finished = false

  constructor(id: string, limits: ReplayLimits) {
    this.id = id
    this.#limits = limits
  }

  /** Parses a `Last-Event-ID` into stream id and position. */
  static parseEventId(value: string): { streamId: string; seq: number } | undefined {
    const match = /^([0-9a-z]+)-(\d{1,15})$/.exec(value.trim())
    if (!match) return undefined
    return { streamId: match[1] as string, seq: Number(match[2]) }
  }

  get attached(): boolean {
    return this.#connection !== undefined && !this.#connection.closed
  }

  get finished(): boolean {
    return this.#finished
  }

  /** Appends one message (serialized JSON) and writes it to the attached connection, if any. */
  push(data: string): void {
    if (this.#finished) return
    const seq = ++this.#seq
    const text = formatEvent(data, { id: `${this.id}-${seq}`, event: 'message' })
    const bytes = Buffer.byteLength(text)
    this.#events.push({ seq, text, bytes })
    this.#bytes += bytes
    while (
      this.#events.length > 0 &&
      (this.#events.length > this.#limits.maxEvents || this.#bytes > this.#limits.maxBytes)
    ) {
      this.#bytes -= (this.#events.shift() as StoredEvent).bytes
    }
    if (this.#connection?.write(text)) this.#written = seq
  }

  /**
   * Attaches a connection and replays what it missed: events after `afterSeq` when resuming,
   * else events never written anywhere. Returns how many missed events were already evicted.
   */
  attach(connection: SseConnection, afterSeq?: number): { lost: number } {
    this.#connection = connection
    connection.onclose = () => {
      if (this.#connection === connection) this.#connection = undefined
    }
    const from = afterSeq ?? this.#written
    const oldest = this.#events[0]?.seq ?? this.#seq + 1
    const lost = Math.max(0, Math.min(oldest, this.#seq + 1) - from - 1)
    for (const event of this.#events) {
      if (event.seq <= from) continue
      if (!connection.write(event.text)) break
      this.#written = Math.max(this.#written, event.seq)
    }
    if (this.#finished) connection.end()
    return { lost }
  }

  /** No more events will come: the attached connection ends after what it has queued. */
  finish(): void {
    this.#finished = true
    this.#connection?.end()
  }

  /** Ends the stream for good and frees its buffer. */
  close(): void {
    this.finish()
    this.#events.length = 0
    this.#bytes = 0
  }

  /** Ends the attached connection but keeps the stream resumable (shutdown). */
  disconnect(): void {
    this.#connection?.end()
    this.#connection = undefined
  }
}
