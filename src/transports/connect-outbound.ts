/**
 * Builds the outbound transport an upstream's config asks for. `auto` picks by URL: `ws://` and
 * `wss://` mean WebSocket; for `http(s)://` it does what the MCP clients do for backwards
 * compatibility: try Streamable HTTP, and when the first POST is refused with 400, 404 or 405
 * and no JSON-RPC body, fall back to the legacy HTTP+SSE transport and replay that message.
 */
import type { Dispatcher } from 'undici'
import { BarbicanError } from '../common/errors.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { isRequest, type JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import { HttpOutboundTransport, type HttpSendOptions } from './http-outbound.ts'
import { failureResponse, networkError } from './http-outbound-support.ts'
import { SseOutboundTransport } from './sse-outbound.ts'
import {
  type StdioOutboundOptions,
  StdioOutboundTransport,
  type StdioSpec,
} from './stdio-outbound.ts'
import type { ReceiveInfo, Transport } from './transport.ts'
import { WasmOutboundTransport, type WasmSpec } from './wasm-outbound.ts'
import { WebSocketOutboundTransport } from './websocket-outbound.ts'

export type RemoteTransportKind = 'streamable-http' | 'sse' | 'websocket' | 'auto'

/** One upstream's connection, as the config describes it. */
export type OutboundSpec =
  | ({ readonly transport: 'stdio' } & StdioSpec)
  | {
      readonly transport: RemoteTransportKind
      readonly url: string
      readonly headers?: Readonly<Record<string, string>> | undefined
    }
  | ({
      readonly transport: 'wasm'
      /** Also the deadline of one call into the module. */
      readonly requestTimeoutMs: number
    } & Omit<WasmSpec, 'sha256'> & {
        /** The pin from `barbican.lock`; absent, the module is refused (src/gateway/trust-setup.ts). */
        readonly sha256?: string | undefined
      })

/** What every outbound transport needs besides its spec. */
export interface OutboundDeps {
  /** The upstream's name, for logs and error messages. */
  readonly name: string
  readonly log: Logger
  readonly limits: JsonLimits
  /** A shared HTTP pool; by default each HTTP transport owns one. */
  readonly dispatcher?: Dispatcher | undefined
  /** Deadline of one HTTP exchange (default 60 s). */
  readonly requestTimeoutMs?: number | undefined
  /** Shutdown and queue settings for stdio children. */
  readonly stdio?:
    | Pick<
        StdioOutboundOptions,
        'closeGraceMs' | 'termGraceMs' | 'startTimeoutMs' | 'maxQueuedBytes' | 'onSandboxRefusal'
      >
    | undefined
}

/** The concrete transport `auto` resolves a URL to before any traffic. */
export function kindForUrl(url: string | URL): 'http' | 'websocket' {
  const protocol = new URL(url).protocol
  if (protocol === 'ws:' || protocol === 'wss:') return 'websocket'
  if (protocol === 'http:' || protocol === 'https:') return 'http'
  throw new BarbicanError('ERR_CONFIG_INVALID', `Unsupported upstream URL scheme "${protocol}"`)
}

/** Creates an unstarted transport for `spec`; call `start()` to connect or spawn. */
export function createOutboundTransport(spec: OutboundSpec, deps: OutboundDeps): Transport {
  const common = { name: deps.name, log: deps.log, limits: deps.limits }
  if (spec.transport === 'stdio') {
    return new StdioOutboundTransport({ ...common, ...deps.stdio, ...spec })
  }
  if (spec.transport === 'wasm') {
    return new WasmOutboundTransport({
      ...spec,
      name: deps.name,
      log: deps.log,
      sha256: spec.sha256,
      callTimeoutMs: spec.requestTimeoutMs,
    })
  }
  const remote = {
    ...common,
    url: spec.url,
    headers: spec.headers,
    dispatcher: deps.dispatcher,
    requestTimeoutMs: deps.requestTimeoutMs,
  }
  switch (spec.transport) {
    case 'streamable-http':
      return new HttpOutboundTransport(remote)
    case 'sse':
      return new SseOutboundTransport(remote)
    case 'websocket':
      return new WebSocketOutboundTransport(remote)
    case 'auto':
      return kindForUrl(spec.url) === 'websocket'
        ? new WebSocketOutboundTransport(remote)
        : new AutoHttpTransport(remote)
  }
}

type RemoteOptions = ConstructorParameters<typeof HttpOutboundTransport>[0] &
  ConstructorParameters<typeof SseOutboundTransport>[0]

/**
 * Streamable HTTP with the legacy fallback decided by the first message. Messages sent while
 * that first exchange is in flight wait for the decision, so order is kept.
 */
export class AutoHttpTransport implements Transport {
  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  onclose?: () => void
  onerror?: (error: Error) => void

  readonly #options: RemoteOptions
  #active: HttpOutboundTransport | SseOutboundTransport
  #kind: 'unknown' | 'streamable-http' | 'sse' = 'unknown'
  #deciding: Promise<void> | undefined
  #notified = false
  #closed = false
  /** Messages waiting for the decision; `#settled` once it is made and none is left. */
  #waiting = 0
  #settled = false

  constructor(options: RemoteOptions) {
    this.#options = options
    this.#active = this.#adopt(new HttpOutboundTransport(options))
  }

  /** Which transport the URL turned out to speak, once the first message has decided it. */
  get kind(): 'unknown' | 'streamable-http' | 'sse' {
    return this.#kind
  }
  get sessionId(): string | undefined {
    return this.#active.sessionId
  }
  /** Forwarded to Streamable HTTP (`MCP-Protocol-Version`); HTTP+SSE has no such header. */
  get protocolVersion(): string | undefined {
    return this.#active instanceof HttpOutboundTransport ? this.#active.protocolVersion : undefined
  }
  set protocolVersion(version: string | undefined) {
    if (this.#active instanceof HttpOutboundTransport) this.#active.protocolVersion = version
  }
  setProtocolVersion(revision: Revision): void {
    this.protocolVersion = revision
  }

  async start(): Promise<void> {
    await this.#active.start()
  }

  send(message: JsonRpcMessage, options: HttpSendOptions = {}): Promise<void> {
    // Decided, and every message that waited for it sent: straight through (the usual case).
    if (this.#settled) return this.#active.send(message, options)
    return this.#sendDeciding(message, options)
  }

  async #sendDeciding(message: JsonRpcMessage, options: HttpSendOptions): Promise<void> {
    if (this.#kind === 'unknown' && this.#deciding === undefined) {
      this.#deciding = this.#decide(message, options)
      await this.#deciding
      this.#settle()
      return
    }
    this.#waiting++
    try {
      await this.#deciding?.catch(() => {})
    } finally {
      this.#waiting--
    }
    const sent = this.#active.send(message, options)
    this.#settle()
    await sent
  }

  /** Once decided with no message left waiting, later messages skip the decision entirely. */
  #settle(): void {
    if (this.#kind !== 'unknown' && this.#waiting === 0) this.#settled = true
  }

  async #decide(message: JsonRpcMessage, options: HttpSendOptions): Promise<void> {
    const http = this.#active as HttpOutboundTransport
    const outcome = await http.sendOrDetectLegacy(message, options)
    if (outcome === 'sent') {
      this.#kind = 'streamable-http'
      return
    }
    if (outcome === 'failed') {
      // The server did not answer at all: the next message probes again.
      this.#deciding = undefined
      return
    }
    this.#options.log.info('upstream refused Streamable HTTP; trying HTTP+SSE', {
      upstream: this.#options.name,
    })
    http.onclose = () => {} // replaced, not closed: the caller keeps one connection
    await http.close()
    if (this.#closed) return
    const sse = this.#adopt(new SseOutboundTransport(this.#options))
    this.#active = sse
    try {
      await sse.start()
    } catch (err) {
      // Neither transport works at this URL: the connection is over before it began.
      const error = networkError(err, this.#options.name)
      this.#notifyClosed()
      if (!isRequest(message)) throw error
      this.onerror?.(error)
      this.onmessage?.(failureResponse(message.id, error))
      return
    }
    this.#kind = 'sse'
    await sse.send(message, options)
  }

  async close(): Promise<void> {
    this.#closed = true
    // Closing aborts the first exchange if it is still deciding: a server that never answers
    // must not hold the close until that exchange times out.
    await this.#active.close()
    await this.#deciding?.catch(() => {})
    // The decision may have switched to HTTP+SSE meanwhile.
    await this.#active.close()
    this.#notifyClosed()
  }

  #adopt<T extends HttpOutboundTransport | SseOutboundTransport>(transport: T): T {
    transport.onmessage = (message, info) => this.onmessage?.(message, info)
    transport.onerror = (error) => this.onerror?.(error)
    transport.onclose = () => {
      if (transport === this.#active) this.#notifyClosed()
    }
    return transport
  }

  #notifyClosed(): void {
    if (this.#notified) return
    this.#notified = true
    this.onclose?.()
  }
}
