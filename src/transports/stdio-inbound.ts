/**
 * `barbican stdio`: a client that launched Barbican talks newline-delimited JSON-RPC on our
 * stdin/stdout. Stdout carries nothing but JSON-RPC (logs go to stderr); a line that is not a
 * valid message gets the JSON-RPC error reply it is owed; a line longer than the limit is
 * skipped up to its newline without being buffered; stdin EOF closes the transport.
 */
import type { Readable, Writable } from 'node:stream'
import { DEFAULT_JSON_LIMITS, type JsonLimits } from '../protocol/json-limits.ts'
import {
  errorResponse,
  type JsonRpcMessage,
  PARSE_ERROR,
  parsePayload,
  serialize,
} from '../protocol/jsonrpc.ts'
import { type Revision, TRAITS } from '../protocol/revisions.ts'
import { type Logger, silentLogger } from '../telemetry/log.ts'
import { decodeUtf8 } from './http-io.ts'
import type { InboundHandler } from './inbound.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

export interface StdioInboundOptions {
  /** Where client messages arrive. Default `process.stdin`. */
  readonly input?: Readable
  /** Where replies go; nothing else is ever written here. Default `process.stdout`. */
  readonly output?: Writable
  /** Structural limits per message. Default DEFAULT_JSON_LIMITS. */
  readonly jsonLimits?: JsonLimits
  /** Longest line in bytes. Default: `jsonLimits.maxMessageBytes`. */
  readonly maxLineBytes?: number
  readonly log?: Logger
}

const NEWLINE = 0x0a
const CR = 0x0d

/** The Transport of one stdio client. */
export class StdioInbound implements Transport {
  readonly sessionId: undefined = undefined
  readonly #input: Readable
  readonly #output: Writable
  readonly #limits: JsonLimits
  readonly #maxLineBytes: number
  readonly #log: Logger
  #parts: Buffer[] = []
  #size = 0
  /** Skipping the rest of a line that broke the limit. */
  #discarding = false
  #protocolVersion: Revision | undefined
  #started = false
  #closed = false
  readonly #drainWaiters = new Set<() => void>()
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  constructor(options: StdioInboundOptions = {}) {
    this.#input = options.input ?? process.stdin
    this.#output = options.output ?? process.stdout
    this.#limits = options.jsonLimits ?? DEFAULT_JSON_LIMITS
    this.#maxLineBytes = options.maxLineBytes ?? this.#limits.maxMessageBytes
    this.#log = options.log ?? silentLogger
  }

  /** Lets the session report the negotiated revision (batches only for 2025-03-26). */
  setProtocolVersion(revision: Revision): void {
    this.#protocolVersion = revision
  }

  start(): Promise<void> {
    if (this.#started) return Promise.resolve()
    this.#started = true
    this.#input.on('data', this.#onData)
    this.#input.on('end', this.#onEnd)
    this.#input.on('error', this.#onInputError)
    this.#output.on('error', this.#onOutputError)
    this.#input.resume()
    return Promise.resolve()
  }

  /** Writes one line; resolves once the stream accepted it (waits for 'drain' when full). */
  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    if (this.#closed || this.#output.writableEnded || this.#output.destroyed) {
      return Promise.reject(new Error('The stdio transport is closed'))
    }
    if (this.#output.write(`${serialize(message)}\n`)) return Promise.resolve()
    return new Promise((resolve) => {
      const done = () => {
        this.#output.off('drain', done)
        this.#drainWaiters.delete(done)
        resolve()
      }
      this.#drainWaiters.add(done)
      this.#output.once('drain', done)
    })
  }

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve()
    this.#closed = true
    this.#input.off('data', this.#onData)
    this.#input.off('end', this.#onEnd)
    this.#input.off('error', this.#onInputError)
    this.#input.pause()
    for (const done of [...this.#drainWaiters]) done()
    // Our own process's stdout stays open for whoever shares it; other streams are ours to end.
    if (this.#output !== process.stdout && this.#output !== process.stderr) this.#output.end()
    this.onclose?.()
    return Promise.resolve()
  }

  readonly #onData = (chunk: Buffer | string): void => {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    let start = 0
    while (start < bytes.length && !this.#closed) {
      const newline = bytes.indexOf(NEWLINE, start)
      this.#append(bytes.subarray(start, newline === -1 ? bytes.length : newline))
      if (newline === -1) return
      this.#endLine()
      start = newline + 1
    }
  }

  readonly #onEnd = (): void => {
    // A final line without a newline still counts: the client may have exited mid-write.
    if (this.#size > 0) this.#endLine()
    void this.close()
  }

  readonly #onInputError = (err: Error): void => {
    this.onerror?.(err)
    void this.close()
  }

  readonly #onOutputError = (err: Error): void => {
    // EPIPE: the client is gone; nothing more can be delivered.
    this.onerror?.(err)
    void this.close()
  }

  #append(part: Buffer): void {
    if (this.#discarding || part.length === 0) return
    // One byte of slack for the CR of a CRLF line end.
    if (this.#size + part.length > this.#maxLineBytes + 1) {
      this.#parts = []
      this.#size = 0
      this.#discarding = true
      this.#log.warn('stdio client sent an over-long line; skipping it', {
        maxLineBytes: this.#maxLineBytes,
      })
      this.#reply(
        errorResponse(null, PARSE_ERROR, `Line exceeds the limit of ${this.#maxLineBytes} bytes`),
      )
      return
    }
    this.#parts.push(part)
    this.#size += part.length
  }

  #endLine(): void {
    if (this.#discarding) {
      this.#discarding = false
      return
    }
    let line = Buffer.concat(this.#parts, this.#size)
    this.#parts = []
    this.#size = 0
    if (line.length > 0 && line[line.length - 1] === CR) line = line.subarray(0, -1)
    if (line.length > this.#maxLineBytes) {
      this.#reply(
        errorResponse(null, PARSE_ERROR, `Line exceeds the limit of ${this.#maxLineBytes} bytes`),
      )
      return
    }
    const text = decodeUtf8(line)
    if (text === undefined) {
      this.#reply(errorResponse(null, PARSE_ERROR, 'The line is not valid UTF-8'))
      return
    }
    if (text.trim() === '') return
    const allowBatch = this.#protocolVersion !== undefined && TRAITS[this.#protocolVersion].batching
    const parsed = parsePayload(text, { limits: this.#limits, allowBatch })
    if (!parsed.ok) {
      this.#reply(parsed.error)
      return
    }
    const info = parsed.batch ? { batch: true } : undefined
    for (const item of parsed.items) {
      if (item.ok) this.onmessage?.(item.message, info)
      else this.#reply(item.error)
    }
  }

  #reply(message: JsonRpcMessage): void {
    this.send(message).catch((err: Error) => this.onerror?.(err))
  }
}

/**
 * Serves one stdio client: creates the transport, lets the handler attach a session, starts
 * reading. Used by `barbican stdio`.
 */
export function serveStdio(
  handler: InboundHandler,
  options: StdioInboundOptions & { readonly server?: string } = {},
): StdioInbound {
  const transport = new StdioInbound(options)
  handler.connect(transport, { kind: 'stdio', server: options.server ?? 'default' })
  void transport.start()
  return transport
}
