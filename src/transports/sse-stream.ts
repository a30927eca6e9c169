/**
 * Reading Server-Sent Events from an upstream's HTTP response, shared by the Streamable HTTP and
 * legacy HTTP+SSE clients. Parsing is delegated to `eventsource-parser`; this module adds the
 * bound on buffered bytes (a stream that never ends an event must not grow without limit) and
 * turns the body into one awaitable read.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser'
import { BarbicanError } from '../common/errors.ts'

/** One SSE event; `event` is undefined for the default type (`message`). */
export type SseEvent = EventSourceMessage

export interface ReadSseOptions {
  /** Most characters buffered for one unfinished event (its data lines included). */
  readonly maxEventBytes: number
  readonly onEvent: (event: SseEvent) => void
  /** The server's `retry:` field, in milliseconds: how long to wait before reconnecting. */
  readonly onRetry?: ((ms: number) => void) | undefined
}

/**
 * Reads an SSE body to its end, calling `onEvent` for each complete event in order. Resolves
 * when the body ends; rejects with the body's error (an abort, a reset connection) or with
 * ERR_UPSTREAM_PROTOCOL when one event outgrows `maxEventBytes`. Unknown fields and bad `retry`
 * values are ignored, as the SSE specification asks.
 */
export async function readSse(
  body: AsyncIterable<Uint8Array | string>,
  options: ReadSseOptions,
): Promise<void> {
  let overflow = false
  const parser = createParser({
    maxBufferSize: options.maxEventBytes,
    onEvent: options.onEvent,
    onRetry: options.onRetry,
    onError: (error) => {
      if (error.type === 'max-buffer-size-exceeded') overflow = true
    },
  })
  const decoder = new TextDecoder('utf-8')
  for await (const chunk of body) {
    parser.feed(typeof chunk === 'string' ? chunk : decoder.decode(chunk, { stream: true }))
    if (overflow) {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `An SSE event from the upstream exceeds ${options.maxEventBytes} bytes`,
      )
    }
  }
  parser.feed(decoder.decode())
}

/** True when a Content-Type header names an SSE stream. */
export function isEventStream(contentType: string | string[] | undefined): boolean {
  return mediaType(contentType) === 'text/event-stream'
}

/** True when a Content-Type header names JSON. */
export function isJson(contentType: string | string[] | undefined): boolean {
  const type = mediaType(contentType)
  return type === 'application/json' || (type?.endsWith('+json') ?? false)
}

/** The last Content-Type parsed and its media type: an upstream sends the same one every time. */
let lastContentType: string | undefined
let lastMediaType: string | undefined

function mediaType(contentType: string | string[] | undefined): string | undefined {
  const value = Array.isArray(contentType) ? contentType[0] : contentType
  if (value === undefined) return undefined
  if (value !== lastContentType) {
    lastMediaType = value.split(';')[0]?.trim().toLowerCase()
    lastContentType = value
  }
  return lastMediaType
}
