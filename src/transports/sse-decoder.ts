/**
 * Server-Sent Events decoded from raw response bytes, fed chunk by chunk (push), for the
 * Streamable HTTP client's answers. Parsing is `eventsource-parser`'s, as in `readSse`; what
 * differs is the feeding: no Readable, no async iterator and no streaming TextDecoder per body.
 * Bytes are decoded up to the last line break of what has arrived (a line break is one ASCII
 * byte, never inside a multi-byte character), and the unterminated rest waits for the next chunk.
 */
import { createParser, type EventSourceParser } from 'eventsource-parser'
import { BarbicanError } from '../common/errors.ts'
import type { SseEvent } from './sse-stream.ts'

export interface SseDecoderOptions {
  /** Most bytes buffered for one unfinished event (its data lines included). */
  readonly maxEventBytes: number
  readonly onEvent: (event: SseEvent) => void
  /** The server's `retry:` field, in milliseconds. */
  readonly onRetry?: ((ms: number) => void) | undefined
}

const LF = 0x0a
const CR = 0x0d

/** One stream's decoder: `feed` each chunk, `end` once; both throw on an oversized event. */
export class SseDecoder {
  readonly #parser: EventSourceParser
  readonly #maxEventBytes: number
  /** Chunks after the last line break seen, waiting for the rest of their line. */
  #pending: Buffer[] = []
  #pendingBytes = 0
  #overflow = false
  #first = true

  constructor(options: SseDecoderOptions) {
    this.#maxEventBytes = options.maxEventBytes
    this.#parser = createParser({
      maxBufferSize: options.maxEventBytes,
      onEvent: options.onEvent,
      onRetry: options.onRetry,
      onError: (error) => {
        if (error.type === 'max-buffer-size-exceeded') this.#overflow = true
      },
    })
  }

  /** Parses what `chunk` completes. undici hands over fresh buffers, so they are kept, not copied. */
  feed(chunk: Buffer): void {
    if (this.#first) {
      if (this.#pendingBytes + chunk.length < 3 && lastLineBreak(chunk) < 0) {
        this.#hold(chunk) // too short to tell whether the stream starts with a BOM
        return
      }
      this.#first = false
      if (this.#pending.length > 0) {
        chunk = Buffer.concat([...this.#pending, chunk])
        this.#pending = []
        this.#pendingBytes = 0
      }
      // A UTF-8 byte order mark at the start is not part of the stream (as TextDecoder drops it).
      if (chunk[0] === 0xef && chunk[1] === 0xbb && chunk[2] === 0xbf) chunk = chunk.subarray(3)
    }
    const cut = lastLineBreak(chunk) + 1
    if (cut === 0) {
      this.#hold(chunk)
    } else {
      const head = cut === chunk.length ? chunk : chunk.subarray(0, cut)
      let text: string
      if (this.#pending.length === 0) {
        text = head.toString('utf8')
      } else {
        this.#pending.push(head)
        text = Buffer.concat(this.#pending, this.#pendingBytes + cut).toString('utf8')
        this.#pending = []
        this.#pendingBytes = 0
      }
      if (cut < chunk.length) this.#hold(chunk.subarray(cut))
      this.#parser.feed(text)
    }
    this.#check()
  }

  /** The body ended: an unterminated last line is handed over (and, as the spec says, dropped). */
  end(): void {
    if (this.#pending.length > 0) {
      this.#parser.feed(Buffer.concat(this.#pending, this.#pendingBytes).toString('utf8'))
      this.#pending = []
      this.#pendingBytes = 0
    }
    this.#check()
  }

  #hold(bytes: Buffer): void {
    this.#pending.push(bytes)
    this.#pendingBytes += bytes.length
    if (this.#pendingBytes > this.#maxEventBytes) this.#overflow = true
  }

  #check(): void {
    if (this.#overflow) {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `An SSE event from the upstream exceeds ${this.#maxEventBytes} bytes`,
      )
    }
  }
}

function lastLineBreak(bytes: Buffer): number {
  for (let i = bytes.length - 1; i >= 0; i--) {
    const byte = bytes[i]
    if (byte === LF || byte === CR) return i
  }
  return -1
}
