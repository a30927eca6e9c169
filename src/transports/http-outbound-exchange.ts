/**
 * One POST of the Streamable HTTP client, driven through undici's low-level `dispatch` API, and
 * the deadlines of all of a transport's POSTs, kept by one timer.
 *
 * `undici.request` wraps every exchange in a Readable body, an async iterator, an AbortSignal
 * listener and (here) an AbortController plus a timer of our own; per `tools/call` that was about
 * as much CPU as the HTTP exchange itself (docs/performance.md). An `Exchange` is the handler
 * undici calls directly: a JSON (or error) body is collected into a buffer, bounded, and handed
 * over once complete; an SSE answer, which must be read as it arrives, is pushed chunk by chunk
 * to its consumer (`PushBody`).
 */
import type { Dispatcher } from 'undici'
import { BarbicanError } from '../common/errors.ts'
import type { AbortReason, ExchangeDeadline } from './http-outbound-support.ts'
import { isEventStream } from './sse-stream.ts'

type Controller = Dispatcher.DispatchController
type Headers = Record<string, string | string[] | undefined>

/** A body handed over chunk by chunk as it arrives, without a Readable. */
export interface PushBody {
  /**
   * Calls `onChunk` with every chunk (those already arrived first), synchronously as they come;
   * resolves when the body ends, rejects when it breaks or `onChunk` throws (which aborts it).
   */
  consume(onChunk: (chunk: Buffer) => void): Promise<void>
  /** Stops the body (aborting its request) if it has not ended. */
  destroy(error?: Error): void
}

/** How an exchange's response is read, chosen from its status and `Content-Type`. */
export type ExchangeBody =
  /** Collected whole (JSON answers, empty answers, error bodies). */
  | { readonly kind: 'buffer' }
  /** An SSE stream, read as it arrives. */
  | { readonly kind: 'stream'; readonly stream: PushBody }

/** The response's status line and headers, once they arrived. */
export interface ExchangeStart {
  readonly statusCode: number
  readonly headers: Headers
  readonly body: ExchangeBody
}

/** Called once a collected body is complete (or failed); `text` is its UTF-8 decoding. */
export type BodyCallback = (error: Error | undefined, text: string) => void

/** One POST exchange: the undici handler, its deadline, and its cancellation. */
export class Exchange implements Dispatcher.DispatchHandler, ExchangeDeadline, PushBody {
  /** Why the exchange was aborted, once it was. */
  reason: AbortReason | undefined
  /** When the deadline sweep aborts it ('timeout'), in `performance.now()` milliseconds. */
  deadlineAt: number

  readonly #maxBytes: number
  #controller: Controller | undefined
  #signalController: AbortController | undefined
  #unlink: (() => void) | undefined
  #sweep: DeadlineSweep | undefined
  // Response state.
  #resolveStart: ((start: ExchangeStart) => void) | undefined
  #rejectStart: ((error: Error) => void) | undefined
  #started = false
  #streaming = false
  #onChunk: ((chunk: Buffer) => void) | undefined
  #resolveEnd: (() => void) | undefined
  #rejectEnd: ((error: Error) => void) | undefined
  #chunks: Buffer[] = []
  #size = 0
  #done = false
  #error: Error | undefined
  #onBody: BodyCallback | undefined

  constructor(timeoutMs: number, maxBytes: number, signal?: AbortSignal) {
    this.#maxBytes = maxBytes
    this.deadlineAt = timeoutMs > 0 ? performance.now() + timeoutMs : Number.POSITIVE_INFINITY
    if (signal) {
      if (signal.aborted) this.reason = 'cancel'
      else {
        const onAbort = () => this.abort('cancel')
        signal.addEventListener('abort', onAbort, { once: true })
        this.#unlink = () => signal.removeEventListener('abort', onAbort)
      }
    }
  }

  /**
   * A signal that aborts with the exchange, for the requests an SSE answer may still need
   * (resuming GETs, waits between them). Made on first use: a JSON answer never needs one.
   */
  get signal(): AbortSignal {
    if (this.#signalController === undefined) {
      this.#signalController = new AbortController()
      if (this.reason !== undefined) this.#signalController.abort(abortReason(this.reason))
    }
    return this.#signalController.signal
  }

  /** Sends the request; resolves when the response headers arrive, rejects if they never do. */
  start(dispatcher: Dispatcher, options: Dispatcher.DispatchOptions): Promise<ExchangeStart> {
    const started = new Promise<ExchangeStart>((resolve, reject) => {
      this.#resolveStart = resolve
      this.#rejectStart = reject
    })
    if (this.reason !== undefined) this.#rejectStart?.(new Error(`aborted: ${this.reason}`))
    else dispatcher.dispatch(options, this)
    return started
  }

  /** Registers for the collected body (a 'buffer' answer); called at once if already complete. */
  onBody(callback: BodyCallback): void {
    if (this.#done) {
      callback(this.#error, this.#error ? '' : this.#text())
      return
    }
    this.#onBody = callback
  }

  /** Aborts the exchange (once): the request, its body, and anything waiting on `signal`. */
  abort(reason: AbortReason): void {
    if (this.reason !== undefined) return
    this.reason = reason
    this.dispose()
    const error = abortReason(reason)
    this.#signalController?.abort(error)
    if (this.#controller !== undefined) {
      this.#controller.abort(error)
    } else if (!this.#started) {
      // Still queued in undici: `onRequestStart` aborts it on arrival; the sender stops waiting now.
      this.#started = true
      this.#rejectStart?.(error)
    }
  }

  /**
   * Lets an answered exchange run for at most `ms` more (an SSE stream the server should end
   * after the answer), so its connection can go back to the pool instead of being cut.
   */
  linger(ms: number): void {
    const at = performance.now() + ms
    if (at < this.deadlineAt) {
      this.deadlineAt = at
      this.#sweep?.schedule(this)
    }
  }

  /** The exchange is over: stops its deadline and forgets the caller's signal. */
  dispose(): void {
    this.#unlink?.()
    this.#unlink = undefined
    this.#sweep?.delete(this)
    this.#sweep = undefined
  }

  /** Puts the deadline under `sweep` (until `dispose`). */
  watch(sweep: DeadlineSweep): void {
    this.#sweep = sweep
    sweep.add(this)
  }

  // undici's handler interface.

  onRequestStart(controller: Controller): void {
    this.#controller = controller
    if (this.reason !== undefined) controller.abort(abortReason(this.reason))
  }

  onResponseStart(_controller: Controller, statusCode: number, headers: Headers): void {
    if (statusCode < 200) return // 1xx: the real response follows
    this.#started = true
    let body: ExchangeBody = BUFFERED
    if (statusCode >= 200 && statusCode < 300 && isEventStream(headers['content-type'])) {
      this.#streaming = true
      body = { kind: 'stream', stream: this }
    }
    this.#resolveStart?.({ statusCode, headers, body })
  }

  onResponseData(controller: Controller, chunk: Buffer): void {
    if (this.#streaming) {
      const onChunk = this.#onChunk
      if (onChunk === undefined) {
        this.#chunks.push(chunk) // not consumed yet: kept for `consume`
        return
      }
      try {
        onChunk(chunk)
      } catch (error) {
        this.#endStream(error as Error)
        controller.abort(error as Error)
      }
      return
    }
    this.#size += chunk.byteLength
    if (this.#size > this.#maxBytes) {
      const error = new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream response exceeds ${this.#maxBytes} bytes`,
      )
      this.#finish(error)
      controller.abort(error)
      return
    }
    this.#chunks.push(chunk)
  }

  onResponseEnd(): void {
    if (this.#streaming) this.#endStream(undefined)
    else this.#finish(undefined)
  }

  onResponseError(_controller: Controller | undefined, error: Error): void {
    if (!this.#started) {
      this.#started = true
      this.#rejectStart?.(error)
      return
    }
    if (this.#streaming) this.#endStream(error)
    else this.#finish(error)
  }

  // PushBody, for an SSE answer.

  consume(onChunk: (chunk: Buffer) => void): Promise<void> {
    const ended = new Promise<void>((resolve, reject) => {
      this.#resolveEnd = resolve
      this.#rejectEnd = reject
    })
    const arrived = this.#chunks
    this.#chunks = []
    try {
      for (const chunk of arrived) onChunk(chunk)
    } catch (error) {
      if (this.#done) {
        this.#error = error as Error
        this.#settleStream()
      } else {
        this.#endStream(error as Error)
        this.#controller?.abort(error as Error)
      }
      return ended
    }
    if (this.#done) this.#settleStream()
    else this.#onChunk = onChunk
    return ended
  }

  destroy(error?: Error): void {
    if (this.#done) return
    const reason = error ?? new Error('aborted: body destroyed')
    this.#endStream(reason)
    this.#controller?.abort(reason)
  }

  #endStream(error: Error | undefined): void {
    if (this.#done) return
    this.#done = true
    this.#error = error
    this.#onChunk = undefined
    if (this.#resolveEnd !== undefined) this.#settleStream()
  }

  #settleStream(): void {
    const resolve = this.#resolveEnd
    const reject = this.#rejectEnd
    this.#resolveEnd = undefined
    this.#rejectEnd = undefined
    if (this.#error !== undefined) reject?.(this.#error)
    else resolve?.()
  }

  #finish(error: Error | undefined): void {
    if (this.#done) return
    this.#done = true
    this.#error = error
    const callback = this.#onBody
    if (callback === undefined) return
    this.#onBody = undefined
    callback(error, error ? '' : this.#text())
  }

  #text(): string {
    const chunks = this.#chunks
    this.#chunks = []
    if (chunks.length === 0) return ''
    const whole = chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, this.#size)
    return whole.toString('utf8')
  }
}

const BUFFERED: ExchangeBody = Object.freeze({ kind: 'buffer' })

function abortReason(reason: AbortReason): Error {
  return new Error(`aborted: ${reason}`)
}

/**
 * The request deadlines of one transport, kept by a single timer armed for the earliest one
 * instead of a timer per request. Deadlines are mostly equal (one configured timeout), so the
 * timer is rarely re-armed; finished exchanges leave the set and are simply not found when it
 * fires. The timer does not keep the process alive (pending sockets do).
 */
export class DeadlineSweep {
  readonly #pending = new Set<Exchange>()
  #timer: NodeJS.Timeout | undefined
  #timerAt = Number.POSITIVE_INFINITY

  add(exchange: Exchange): void {
    this.#pending.add(exchange)
    this.schedule(exchange)
  }

  delete(exchange: Exchange): void {
    this.#pending.delete(exchange)
  }

  /** Makes sure the timer fires no later than `exchange`'s deadline. */
  schedule(exchange: Exchange): void {
    const at = exchange.deadlineAt
    if (at >= this.#timerAt || at === Number.POSITIVE_INFINITY) return
    this.#arm(at)
  }

  /** Aborts every pending exchange with `reason`. */
  abortAll(reason: AbortReason): void {
    for (const exchange of [...this.#pending]) exchange.abort(reason)
    this.#pending.clear()
    this.#disarm()
  }

  #arm(at: number): void {
    clearTimeout(this.#timer)
    this.#timerAt = at
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, Math.ceil(at - performance.now())))
    this.#timer.unref()
  }

  #disarm(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#timerAt = Number.POSITIVE_INFINITY
  }

  #fire(): void {
    this.#timer = undefined
    this.#timerAt = Number.POSITIVE_INFINITY
    const now = performance.now()
    let next = Number.POSITIVE_INFINITY
    for (const exchange of [...this.#pending]) {
      if (exchange.deadlineAt <= now) exchange.abort('timeout')
      else if (exchange.deadlineAt < next) next = exchange.deadlineAt
    }
    if (next !== Number.POSITIVE_INFINITY) this.#arm(next)
  }
}
