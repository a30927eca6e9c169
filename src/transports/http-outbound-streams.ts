/**
 * The SSE side of the Streamable HTTP client: reading a POST's event stream, resuming it with
 * GET + `Last-Event-ID` when it breaks before the answer (MCP 2025-11-25 resumability, server
 * `retry:` honoured), and keeping the standalone GET stream of a legacy session open.
 */
import type { Dispatcher } from 'undici'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { undici } from '../common/lazy-deps.ts'
import type { JsonRpcId } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import type { PushBody } from './http-outbound-exchange.ts'
import { type ExchangeDeadline, httpStatusError, networkError } from './http-outbound-support.ts'
import { SseDecoder } from './sse-decoder.ts'
import { isEventStream, type SseEvent } from './sse-stream.ts'

/** One SSE stream's progress, kept across reconnections. */
export interface StreamState {
  /** The request whose answer this stream carries (POST streams only). */
  readonly requestId: JsonRpcId | undefined
  answered: boolean
  lastEventId: string | undefined
  retryMs: number | undefined
}

export function streamState(requestId?: JsonRpcId): StreamState {
  return { requestId, answered: false, lastEventId: undefined, retryMs: undefined }
}

/** A response body: undici's (a resumed or standalone GET), or a POST's SSE answer pushed by its `Exchange`. */
type Body = (AsyncIterable<Uint8Array> & { destroy(error?: Error): unknown }) | PushBody

/** A POST's deadline, which an answered stream may shorten (see `follow`). */
export interface StreamDeadline extends ExchangeDeadline {
  /** Gives the exchange at most `ms` more. */
  linger?(ms: number): void
}

/**
 * How long a request's stream may stay open after it carried the answer, by default. The server
 * should end it right away; reading it to its end lets the connection go back to the keep-alive
 * pool, where cutting it at the answer cost a new TCP connection per SSE answer.
 */
export const ANSWERED_STREAM_LINGER_MS = 2_000

/** What the streams need from their transport. */
export interface StreamHost {
  readonly name: string
  readonly url: URL
  readonly dispatcher: Dispatcher
  readonly log: Logger
  readonly maxEventBytes: number
  /** Consecutive failed reconnections of one stream before giving up. */
  readonly maxReconnects: number
  /** Wait before reconnecting when the server sent no `retry:`. */
  readonly defaultRetryMs: number
  /** How long a request's stream may stay open after its answer (see `StreamDeadline`). */
  readonly answeredLingerMs: number
  /** The headers every request carries (session, version, configured), plus `base`. */
  headers(base: Record<string, string>): Record<string, string>
  /** Decodes and delivers one event's data; marks `state.answered` when it holds the answer. */
  receive(text: string, state: StreamState): void
}

/** Longest wait between two attempts at the standalone stream. */
const MAX_STANDALONE_DELAY_MS = 30_000

/** How a standalone stream ended for good. */
export type StandaloneEnd = 'closed' | 'unsupported' | 'lost'

/** Reads SSE streams on behalf of one Streamable HTTP transport. */
export class SseStreams {
  readonly #host: StreamHost

  constructor(host: StreamHost) {
    this.#host = host
  }

  /**
   * Reads one stream to its end; events after a request's answer are ignored, and `onAnswered`
   * runs once the answer came (the caller bounds how long the rest may take).
   */
  async read(
    body: Body,
    state: StreamState,
    onProgress: () => void,
    onAnswered?: () => void,
  ): Promise<void> {
    const decoder = new SseDecoder({
      maxEventBytes: this.#host.maxEventBytes,
      onRetry: (ms) => {
        state.retryMs = ms
      },
      onEvent: (event: SseEvent) => {
        onProgress()
        if (state.answered) return
        if (event.id !== undefined) state.lastEventId = event.id
        // Only default (`message`) events carry JSON-RPC; an event with no data primes a
        // resumable stream with its first id.
        if ((event.event !== undefined && event.event !== 'message') || event.data === '') return
        this.#host.receive(event.data, state)
        if (state.answered) onAnswered?.()
      },
    })
    try {
      if ('consume' in body) {
        await body.consume((chunk) => decoder.feed(chunk))
      } else {
        for await (const chunk of body) decoder.feed(asBuffer(chunk))
      }
      decoder.end()
    } catch (err) {
      if (!state.answered) throw err
    }
  }

  /**
   * Reads a POST's stream until the request is answered, resuming it when it ends or breaks
   * first. Throws when the answer cannot come: no event id to resume from, too many failed
   * reconnections, an oversized event, or the deadline.
   */
  async follow(body: Body, state: StreamState, deadline: StreamDeadline): Promise<void> {
    const host = this.#host
    let source = body
    let failures = 0
    const answered = () => {
      if (deadline.linger) deadline.linger(host.answeredLingerMs)
      else source.destroy()
    }
    for (;;) {
      let dropped: unknown
      let progressed = false
      try {
        await this.read(
          source,
          state,
          () => {
            progressed = true
          },
          answered,
        )
      } catch (err) {
        dropped = err
      }
      if (state.answered) return
      if (deadline.reason !== undefined) throw dropped
      if (dropped instanceof BarbicanError) throw dropped // an oversized event: do not retry
      if (state.requestId === undefined) return
      if (state.lastEventId === undefined) {
        throw upstreamClosed(host.name, 'closed the stream before answering', { cause: dropped })
      }
      failures = progressed ? 1 : failures + 1
      if (failures > host.maxReconnects) {
        throw upstreamClosed(host.name, 'stream lost')
      }
      await sleep(state.retryMs ?? host.defaultRetryMs, deadline.signal)
      const response = await this.#get(state, deadline.signal)
      if (response.statusCode !== 200 || !isEventStream(response.headers['content-type'])) {
        await response.body.dump().catch(() => {})
        throw httpStatusError(response.statusCode, host.name)
      }
      host.log.debug('upstream stream resumed', { lastEventId: state.lastEventId })
      source = response.body
    }
  }

  /**
   * Keeps the standalone GET stream open until `signal` aborts: reopened (with `Last-Event-ID`)
   * whenever it ends, with growing delays while attempts fail. Resolves 'unsupported' on 405,
   * 'lost' after `maxReconnects` failures in a row, 'closed' when aborted.
   */
  async standalone(signal: AbortSignal, onError: (error: BarbicanError) => void) {
    const host = this.#host
    const state = streamState()
    let failures = 0
    while (!signal.aborted) {
      let received = false
      try {
        const response = await this.#get(state, signal)
        if (response.statusCode === 405) {
          await response.body.dump().catch(() => {})
          host.log.debug('upstream has no standalone stream (405)')
          return 'unsupported' satisfies StandaloneEnd
        }
        if (response.statusCode !== 200 || !isEventStream(response.headers['content-type'])) {
          await response.body.dump().catch(() => {})
          throw httpStatusError(response.statusCode, host.name)
        }
        await this.read(response.body, state, () => {
          received = true
        })
        // A stream that ended at once counts as a failure, so that polling slows down.
        failures = received ? 0 : failures + 1
      } catch (err) {
        if (signal.aborted) break
        failures++
        if (failures > host.maxReconnects) {
          const error = networkError(err, host.name)
          host.log.warn('upstream standalone stream lost', { error: error.message })
          onError(error)
          return 'lost' satisfies StandaloneEnd
        }
      }
      const base = state.retryMs ?? host.defaultRetryMs
      const delay = Math.min(MAX_STANDALONE_DELAY_MS, base * 2 ** Math.max(0, failures - 1))
      try {
        await sleep(delay, signal)
      } catch {
        break
      }
    }
    return 'closed' satisfies StandaloneEnd
  }

  /** GET for an SSE stream, resuming after `state.lastEventId` when there is one. */
  #get(state: StreamState, signal: AbortSignal) {
    const host = this.#host
    return undici().request(host.url, {
      dispatcher: host.dispatcher,
      method: 'GET',
      headers: host.headers({
        accept: 'text/event-stream',
        ...(state.lastEventId === undefined ? {} : { 'last-event-id': state.lastEventId }),
      }),
      signal,
      headersTimeout: 0,
      bodyTimeout: 0,
    })
  }
}

function asBuffer(chunk: Uint8Array): Buffer {
  return Buffer.isBuffer(chunk)
    ? chunk
    : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
}

/** Waits `ms`, or rejects as soon as `signal` aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason)
      return
    }
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
