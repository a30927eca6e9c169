/**
 * Barbican talking to an upstream over WebSocket: subprotocol `mcp`, one JSON-RPC message per
 * text frame. Frames beyond the message size limit are refused by `ws` itself (close code 1009)
 * before they are buffered, and sends stop once too much is waiting for a slow peer.
 */
import type WebSocket from 'ws'
import { BarbicanError, upstreamClosed } from '../common/errors.ts'
import { ws } from '../common/lazy-deps.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { type JsonRpcMessage, serialize } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import { networkReason } from './http-outbound-support.ts'
import { decodePayload, protocolFault } from './outbound-payload.ts'
import type { ReceiveInfo, SendOptions, Transport } from './transport.ts'

/** The WebSocket subprotocol that names MCP. */
export const MCP_SUBPROTOCOL = 'mcp'

export interface WebSocketOutboundOptions {
  readonly name: string
  /** A `ws://` or `wss://` URL. */
  readonly url: string | URL
  readonly log: Logger
  readonly limits: JsonLimits
  /** Sent with the opening handshake (e.g. the upstream's credentials). */
  readonly headers?: Readonly<Record<string, string>> | undefined
  /** How long the opening handshake may take (default 10 s). */
  readonly connectTimeoutMs?: number | undefined
  /** Bytes that may wait in the socket's buffer before `send` refuses (default 8 MiB). */
  readonly maxBufferedBytes?: number | undefined
}

/** One WebSocket connection to an upstream. */
export class WebSocketOutboundTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly name: string
  readonly url: URL
  readonly #options: WebSocketOutboundOptions
  readonly #log: Logger
  #socket: WebSocket | undefined
  #state: 'new' | 'connecting' | 'open' | 'closed' = 'new'
  #closed: Promise<void> | undefined

  constructor(options: WebSocketOutboundOptions) {
    this.#options = options
    this.name = options.name
    this.url = new URL(options.url)
    this.#log = options.log.child({ upstream: options.name })
  }

  get sessionId(): undefined {
    return undefined
  }

  /** Connects; rejects when the handshake fails or the server does not speak `mcp`. */
  async start(): Promise<void> {
    if (this.#state !== 'new') throw new Error('WebSocketOutboundTransport.start() called twice')
    this.#state = 'connecting'
    const socket = new (ws())(this.url, MCP_SUBPROTOCOL, {
      maxPayload: this.#options.limits.maxMessageBytes,
      handshakeTimeout: this.#options.connectTimeoutMs ?? 10_000,
      headers: { ...this.#options.headers },
      perMessageDeflate: false,
    })
    this.#socket = socket
    // Errors are reported below once open; before that the handshake's rejection reports them.
    socket.on('error', () => {})
    this.#closed = new Promise((resolve) => socket.once('close', () => resolve()))
    try {
      await new Promise<void>((resolve, reject) => {
        socket.once('open', resolve)
        socket.once('error', reject)
        socket.once('unexpected-response', (_request, response) => {
          reject(new Error(`HTTP ${response.statusCode}`))
          response.resume()
          socket.terminate()
        })
      })
    } catch (err) {
      this.#state = 'closed'
      socket.terminate()
      throw new BarbicanError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `Cannot connect to upstream "${this.name}": ${networkReason(err)}`,
        { cause: err },
      )
    }
    if (socket.protocol !== MCP_SUBPROTOCOL) {
      this.#state = 'closed'
      socket.terminate()
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${this.name}" did not accept the "${MCP_SUBPROTOCOL}" subprotocol`,
      )
    }
    this.#state = 'open'
    socket.on('message', (data, isBinary) => this.#receive(data, isBinary))
    socket.on('error', (err) => {
      this.#log.warn('upstream WebSocket error', { error: err })
      this.onerror?.(err)
    })
    socket.once('close', (code, reason) => {
      const wasOpen = this.#state === 'open'
      this.#state = 'closed'
      this.#log.info('upstream WebSocket closed', { code, reason: reason.toString('utf8') })
      if (wasOpen) this.onclose?.()
    })
  }

  #receive(data: WebSocket.RawData, isBinary: boolean): void {
    if (isBinary) {
      this.#fault(protocolFault('binary frame (MCP frames are text)'))
      return
    }
    const text = Array.isArray(data)
      ? Buffer.concat(data).toString('utf8')
      : Buffer.from(data as ArrayBuffer).toString('utf8')
    const decoded = decodePayload(text, this.#options.limits)
    for (const fault of decoded.faults) this.#fault(fault)
    for (const message of decoded.messages) {
      try {
        this.onmessage?.(message, decoded.batch ? { batch: true } : undefined)
      } catch (err) {
        this.#log.error('message handler failed', { error: err })
      }
    }
  }

  #fault(error: BarbicanError): void {
    this.#log.warn('upstream sent an invalid frame', { reason: error.message })
    this.onerror?.(error)
  }

  /** Sends one text frame; resolves when it is written to the socket. */
  send(message: JsonRpcMessage, _options?: SendOptions): Promise<void> {
    const socket = this.#socket
    if (this.#state !== 'open' || socket === undefined) {
      return Promise.reject(upstreamClosed(this.name, 'is not connected'))
    }
    const limit = this.#options.maxBufferedBytes ?? 8 * 1024 * 1024
    if (socket.bufferedAmount > limit) {
      return Promise.reject(
        new BarbicanError(
          'ERR_UPSTREAM_UNAVAILABLE',
          `Upstream "${this.name}" is not reading (${socket.bufferedAmount} bytes waiting)`,
        ),
      )
    }
    return new Promise((resolve, reject) => {
      socket.send(serialize(message), (err) => {
        if (err) {
          reject(upstreamClosed(this.name, 'write failed', { cause: err }))
        } else resolve()
      })
    })
  }

  /** Closes with a normal closure; a peer that does not answer within 2 s is cut off. */
  async close(): Promise<void> {
    const socket = this.#socket
    if (socket === undefined) {
      this.#state = 'closed'
      return
    }
    if (socket.readyState !== socket.CLOSED) {
      socket.close(1000)
      const timer = setTimeout(() => socket.terminate(), 2000)
      await this.#closed
      clearTimeout(timer)
    }
  }
}
