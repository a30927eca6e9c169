/**
 * Barbican's HTTP listener: one `node:http` server carrying Streamable HTTP (`/mcp`), legacy
 * HTTP+SSE (`/sse` + `/messages`), WebSocket (`/ws`) and a small route table for operational
 * endpoints (`/healthz` built in; the gateway adds `/readyz`, `/metrics`, `/.well-known/…`).
 *
 * Every request and upgrade first passes the Host/Origin allowlists (DNS rebinding), then the
 * route. Every limit is explicit in HttpInboundOptions. Shutdown stops accepting, ends the
 * long-lived streams, lets requests in progress finish until a deadline, then destroys the rest.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import type { InboundAuthenticator } from '../auth/authenticator.ts'
import { requestIdentity, setRequestIdentity } from '../auth/request-identity.ts'
import { eraOf, isRevision } from '../protocol/revisions.ts'
import { jsonLogger, type Logger } from '../telemetry/log.ts'
import { checkRequestHeaders, corsHeaders, type GuardRefusal } from './http-guard.ts'
import {
  DEFAULT_HTTP_INBOUND_OPTIONS,
  type HttpInboundOptions,
  resolveHttpInboundOptions,
} from './http-inbound-options.ts'
import { failRequest, sendJson, sendRpcError } from './http-io.ts'
import type { InboundHandler } from './inbound.ts'
import { HOP_HEADER, type SessionDirectory } from './session-directory.ts'
import { SSE_MESSAGES_PATH, SseEndpoint } from './sse-inbound.ts'
import { StreamableHttpEndpoint } from './streamable-http-inbound.ts'
import { rejectUpgrade, WebSocketEndpoint } from './websocket-inbound.ts'

/** An operational endpoint in the route table (exact path match, checked before MCP paths). */
export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>

// The options live in their own module; re-exported so the listener's API is one import.
export { DEFAULT_HTTP_INBOUND_OPTIONS, type HttpInboundOptions }

/** Status lines for faults node:http reports before a request exists. */
const CLIENT_ERROR_STATUS: Readonly<Record<string, string>> = {
  ERR_HTTP_REQUEST_TIMEOUT: '408 Request Timeout',
  HPE_HEADER_OVERFLOW: '431 Request Header Fields Too Large',
}

const MCP_PATH = /^\/(mcp|sse|ws)(?:\/([^/]+))?\/?$/

/** The running listener. */
export class HttpInbound {
  readonly options: HttpInboundOptions
  readonly server: Server
  /** Exact path → handler; the gateway adds `/readyz`, `/metrics` and metadata documents. */
  readonly routes = new Map<string, RouteHandler>()
  readonly streamable: StreamableHttpEndpoint
  readonly sse: SseEndpoint
  readonly websocket: WebSocketEndpoint
  /**
   * Inbound authentication, run on every MCP request and upgrade after the route table (so
   * health and metadata documents stay public) and before any session. Absent: anonymous.
   */
  authenticator: InboundAuthenticator | undefined
  readonly #handler: InboundHandler
  readonly #log: Logger
  readonly #sockets = new Set<Socket>()
  readonly #inflight = new Set<ServerResponse>()
  /**
   * `Host` and `Origin` pairs the allowlists accepted (a client sends the same ones on every
   * request), so the lists are not parsed again per request. Refusals are never kept. Bounded.
   */
  readonly #acceptedHeaders = new Set<string>()
  #closing: Promise<void> | undefined
  #directory: SessionDirectory | undefined

  constructor(handler: InboundHandler, options: Partial<HttpInboundOptions> = {}, log?: Logger) {
    this.options = resolveHttpInboundOptions(options)
    this.#handler = handler
    this.#log = log ?? jsonLogger()
    const o = this.options
    this.streamable = new StreamableHttpEndpoint(handler, o, this.#log)
    this.sse = new SseEndpoint(handler, o, this.#log)
    this.websocket = new WebSocketEndpoint(handler, o, this.#log)
    this.server = createServer({
      headersTimeout: o.headersTimeoutMs,
      requestTimeout: o.requestTimeoutMs,
      keepAliveTimeout: o.keepAliveTimeoutMs,
      // Node checks the two timeouts above only this often (default 30 s): keep it proportionate.
      connectionsCheckingInterval: Math.max(100, Math.min(1000, o.headersTimeoutMs / 2)),
    })
    this.server.on('connection', (socket) => {
      this.#sockets.add(socket)
      socket.on('close', () => this.#sockets.delete(socket))
    })
    this.server.on('request', (req, res) => this.#onRequest(req, res))
    this.server.on('upgrade', (req, socket, head) => this.#onUpgrade(req, socket, head))
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      this.#log.debug('bad HTTP request from a client', { error: err })
      const status = CLIENT_ERROR_STATUS[err.code ?? ''] ?? '400 Bad Request'
      if (socket.writable && err.code !== 'ECONNRESET') {
        socket.end(`HTTP/1.1 ${status}\r\nConnection: close\r\n\r\n`)
      } else {
        socket.destroy()
      }
    })
    this.routes.set('/healthz', (_req, res) => sendJson(res, 200, { status: 'ok' }))
  }

  /**
   * Where legacy sessions live when replicas share them (ADR 058): requests naming a session
   * this replica does not hold are handed to it before anything else is done with them.
   */
  get sessionDirectory(): SessionDirectory | undefined {
    return this.#directory
  }

  set sessionDirectory(directory: SessionDirectory | undefined) {
    this.#directory = directory
    this.streamable.directory = directory
    this.sse.directory = directory
    this.websocket.directory = directory
  }

  /** Starts listening; resolves with the bound address (useful with port 0). */
  listen(): Promise<AddressInfo> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(this.options.port, this.options.host, () => {
        this.server.off('error', reject)
        resolve(this.server.address() as AddressInfo)
      })
    })
  }

  /** `http://host:port` of the bound server (after listen). */
  get url(): string {
    const address = this.server.address() as AddressInfo
    const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
    return `http://${host}:${address.port}`
  }

  /**
   * Graceful shutdown: stop accepting, end standalone streams, let requests in progress finish
   * until `deadlineMs`, then destroy what is left and close every transport. Idempotent.
   */
  /** HTTP requests not yet answered, open streams included (what a shutdown waits for). */
  get openRequests(): number {
    return this.#inflight.size
  }

  close(options: { deadlineMs?: number } = {}): Promise<void> {
    this.#closing ??= this.#shutdown(options.deadlineMs ?? this.options.shutdownDeadlineMs)
    return this.#closing
  }

  async #shutdown(deadlineMs: number): Promise<void> {
    const drained = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeIdleConnections()
    for (const res of this.#inflight) this.#releaseAfter(res)
    this.streamable.endStreams()
    this.sse.closeWhenIdle()
    this.websocket.closeWhenIdle()
    let timer: NodeJS.Timeout | undefined
    const deadline = new Promise<'deadline'>((resolve) => {
      timer = setTimeout(() => resolve('deadline'), deadlineMs)
    })
    const outcome = await Promise.race([drained, deadline])
    clearTimeout(timer)
    if (outcome === 'deadline') {
      this.#log.warn('shutdown deadline reached; dropping connections still open', {
        connections: this.#sockets.size,
      })
    }
    await Promise.all([this.streamable.closeAll(), this.sse.closeAll(), this.websocket.closeAll()])
    this.server.closeAllConnections()
    for (const socket of this.#sockets) socket.destroy()
    await drained
  }

  /**
   * Not an async function: a request served without waiting (no auth, no relay) takes no promise
   * here; one that waits reports its failure through the promise's catch instead.
   */
  #onRequest(req: IncomingMessage, res: ServerResponse): void {
    try {
      this.#inflight.add(res)
      res.on('close', () => this.#inflight.delete(res))
      if (this.#closing) {
        this.#releaseAfter(res)
        sendRpcError(res, 503, 'The server is shutting down', { headers: { connection: 'close' } })
        return
      }
      const refusal = this.#checkHeaders(req)
      if (refusal) {
        this.#log.warn('refused an HTTP request', { ...refusal, remote: req.socket.remoteAddress })
        // The status page at `/` is for browsers: it never answers with JSON-RPC.
        if (pathOf(req) === '/') {
          res.writeHead(403, {
            'content-type': 'text/plain; charset=utf-8',
            'x-content-type-options': 'nosniff',
          })
          res.end(`${refusal.reason}\n`)
        } else sendRpcError(res, 403, refusal.reason)
        return
      }
      const origin = req.headers.origin
      if (origin !== undefined) {
        const requested = req.headers['access-control-request-headers']
        for (const [name, value] of Object.entries(corsHeaders(origin, requested))) {
          res.setHeader(name, value)
        }
        if (req.method === 'OPTIONS') {
          res.writeHead(204).end()
          return
        }
      }
      this.#route(req, res)?.catch((err: unknown) => failRequest(this.#log, req, res, err))
    } catch (err) {
      failRequest(this.#log, req, res, err)
    }
  }

  /** `checkRequestHeaders` with the lists of this listener, remembering what it accepted. */
  #checkHeaders(req: IncomingMessage): GuardRefusal | undefined {
    const { host, origin } = req.headers
    const key = origin === undefined ? host : `${host}\n${origin}`
    if (key !== undefined && this.#acceptedHeaders.has(key)) return undefined
    const refusal = checkRequestHeaders(
      req.headers,
      this.options.allowedHosts,
      this.options.allowedOrigins,
    )
    if (refusal === undefined && key !== undefined) {
      if (this.#acceptedHeaders.size >= 64) this.#acceptedHeaders.clear()
      this.#acceptedHeaders.add(key)
    }
    return refusal
  }

  /** Routes one request; a promise only when something must be waited for (auth, a relay). */
  #route(req: IncomingMessage, res: ServerResponse): Promise<void> | void {
    const pathname = pathOf(req)
    const route = this.routes.get(pathname)
    if (route) return route(req, res)
    if (pathname === SSE_MESSAGES_PATH) return this.#ssePost(req, res)
    const match = MCP_PATH.exec(pathname)
    const server = match ? serverName(match[2]) : undefined
    if (match === null || server === undefined || !this.#handler.hasServer(server)) {
      return sendRpcError(res, 404, `Not found: ${pathname.slice(0, 200)}`)
    }
    const kind = match[1] as string
    let relayId: string | undefined
    if (kind === 'mcp' && this.#directory !== undefined) {
      // A 2026-07-28 request is stateless wherever it lands, whatever session id it carries.
      const version = req.headers['mcp-protocol-version']
      const modern =
        typeof version === 'string' && isRevision(version) && eraOf(version) === 'modern'
      const id = req.headers['mcp-session-id']
      if (typeof id === 'string' && !modern && !this.streamable.holds(id)) relayId = id
    }
    // Without a relay or inbound auth the request goes on in this call, with no promise.
    if (relayId !== undefined || this.authenticator !== undefined) {
      return this.#routeAfterWaits(req, res, server, kind, pathname, relayId)
    }
    this.#serve(req, res, server, kind, pathname)
  }

  /** `#route`'s end for a request that may be relayed to another replica or must authenticate. */
  async #routeAfterWaits(
    req: IncomingMessage,
    res: ServerResponse,
    server: string,
    kind: string,
    pathname: string,
    relayId: string | undefined,
  ): Promise<void> {
    if (relayId !== undefined && (await this.#relayed(relayId, req, res))) return
    if (this.authenticator !== undefined && !(await this.#authenticate(req, res, server))) return
    this.#serve(req, res, server, kind, pathname)
  }

  /** Hands an authenticated request for an existing server to its endpoint. */
  #serve(
    req: IncomingMessage,
    res: ServerResponse,
    server: string,
    kind: string,
    pathname: string,
  ): void {
    // With tenants, whether the name exists depends on who asks: the same 404 when it does not.
    if (this.#handler.serves !== undefined && !this.#handler.serves(server, requestIdentity(req))) {
      sendRpcError(res, 404, `Not found: ${pathname.slice(0, 200)}`)
      return
    }
    switch (kind) {
      case 'mcp':
        this.streamable.handle(req, res, server)
        return
      case 'sse':
        if (req.method !== 'GET') {
          sendRpcError(res, 405, 'Use GET', { headers: { allow: 'GET' } })
          return
        }
        this.sse.open(req, res, server)
        return
      default:
        sendRpcError(res, 426, 'This endpoint speaks WebSocket', {
          headers: { upgrade: 'websocket', connection: 'Upgrade' },
        })
    }
  }

  /** A POST to the legacy HTTP+SSE message endpoint. */
  async #ssePost(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method !== 'POST') {
      return sendRpcError(res, 405, 'Use POST', { headers: { allow: 'POST' } })
    }
    const url = new URL(req.url ?? '/', 'http://localhost')
    const id = url.searchParams.get('sessionId')
    if (id && !this.sse.holds(id) && (await this.#relayed(id, req, res))) return
    // Authenticated for the server the session was opened on, like every request to it: a
    // token minted for another server, or one without this server's step-up scopes, is
    // refused. A POST naming no live session is checked against any server, then gets 404.
    const server = this.sse.serverOf(url.searchParams.get('sessionId'))
    if (!(await this.#authenticate(req, res, server))) return
    return this.sse.post(req, res, url)
  }

  /**
   * Hands a request for a session held elsewhere to the directory, unless another replica
   * already relayed it here. The owner authenticates it, so this replica does not.
   */
  async #relayed(id: string, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    const directory = this.#directory
    if (directory === undefined || req.headers[HOP_HEADER] !== undefined) return false
    return await directory.relay(id, req, res)
  }

  #onUpgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', () => {})
    if (this.#closing) {
      rejectUpgrade(socket, 503, 'The server is shutting down')
      return
    }
    const refusal = checkRequestHeaders(
      req.headers,
      this.options.allowedHosts,
      this.options.allowedOrigins,
    )
    if (refusal) {
      this.#log.warn('refused a WebSocket upgrade', {
        ...refusal,
        remote: req.socket.remoteAddress,
      })
      rejectUpgrade(socket, 403, refusal.reason)
      return
    }
    if (req.headers.upgrade?.toLowerCase() !== 'websocket') {
      rejectUpgrade(socket, 400, 'Only WebSocket upgrades are supported')
      return
    }
    const match = MCP_PATH.exec(pathOf(req))
    const server = match?.[1] === 'ws' ? serverName(match[2]) : undefined
    if (server === undefined || !this.#handler.hasServer(server)) {
      rejectUpgrade(socket, 404, 'Not found')
      return
    }
    const authenticator = this.authenticator
    if (!authenticator) {
      if (this.#handler.serves !== undefined && !this.#handler.serves(server, undefined)) {
        rejectUpgrade(socket, 404, 'Not found')
        return
      }
      this.websocket.upgrade(req, socket, head, server)
      return
    }
    authenticator
      .authenticate(req.headers, server)
      .then((result) => {
        if (!result.ok) {
          rejectUpgrade(socket, result.status, result.message, {
            'WWW-Authenticate': result.wwwAuthenticate,
          })
          return
        }
        setRequestIdentity(req, result.identity)
        if (this.#handler.serves !== undefined && !this.#handler.serves(server, result.identity)) {
          rejectUpgrade(socket, 404, 'Not found')
          return
        }
        // The upgrade's credential is checked again before every message on the socket, so an
        // expired token or a revoked key ends the connection rather than living as long as it.
        const held = {
          authorization: req.headers.authorization,
          server,
          identity: result.identity,
        }
        this.websocket.upgrade(req, socket, head, server, () => authenticator.recheck(held))
      })
      .catch((error: unknown) => {
        this.#log.error('WebSocket authentication failed', { error })
        rejectUpgrade(socket, 500, 'Internal error')
      })
  }

  /** Runs inbound auth; answers the refusal itself and returns false when the caller is out. */
  async #authenticate(
    req: IncomingMessage,
    res: ServerResponse,
    server: string | undefined,
  ): Promise<boolean> {
    if (!this.authenticator) return true
    const result = await this.authenticator.authenticate(req.headers, server)
    if (result.ok) {
      setRequestIdentity(req, result.identity)
      return true
    }
    this.#log.info('refused an unauthenticated request', {
      status: result.status,
      reason: result.message,
      remote: req.socket.remoteAddress,
    })
    sendRpcError(res, result.status, result.message, {
      headers: { 'www-authenticate': result.wwwAuthenticate },
      ...(result.code === undefined ? {} : { code: result.code }),
    })
    return false
  }

  /** Once this response is done, its keep-alive connection is idle and can be closed. */
  #releaseAfter(res: ServerResponse): void {
    if (!res.headersSent) res.shouldKeepAlive = false
    res.on('finish', () => setImmediate(() => this.server.closeIdleConnections()))
  }
}

/** Creates the listener (not yet listening); `listen()` binds it. */
export function createHttpInbound(
  handler: InboundHandler,
  options: Partial<HttpInboundOptions> = {},
  log?: Logger,
): HttpInbound {
  return new HttpInbound(handler, options, log)
}

/**
 * A path made only of these characters is its own URL pathname (no dot segment, escape, query
 * or fragment to normalise), so the URL parser is needed only for the others.
 */
const PLAIN_PATH = /^\/(?!\/)[A-Za-z0-9_~/-]*$/

function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/'
  if (PLAIN_PATH.test(url)) return url
  return new URL(url, 'http://localhost').pathname
}

/** `/mcp` addresses the server named 'default'; `/mcp/NAME` the server NAME. */
function serverName(segment: string | undefined): string | undefined {
  if (segment === undefined) return 'default'
  try {
    const name = decodeURIComponent(segment)
    return name === '' || name.includes('/') ? undefined : name
  } catch {
    return undefined
  }
}
