/**
 * The `/mcp` endpoint: Streamable HTTP for every revision on one URL. A POST whose body or
 * `MCP-Protocol-Version` header claims 2026-07-28 is served statelessly; everything else is a
 * legacy session (2025-03-26 … 2025-11-25) opened by `initialize` and named by the
 * `Mcp-Session-Id` header afterwards. Session ids come from a CSPRNG and are bound to the identity
 * that created them: an id presented by anyone else is answered like an unknown one (404), so
 * the id is never what authenticates a caller (2025-11-25 security best practices).
 */
import { randomBytes } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { requestIdentity } from '../auth/request-identity.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import { isRequest, type JsonRpcMessage, parsePayload, serialize } from '../protocol/jsonrpc.ts'
import { eraOf, isRevision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  accepts,
  failRequest,
  headerRecord,
  readTextBodyThen,
  sendEmpty,
  sendJson,
  sendRpcError,
  singleHeader,
} from './http-io.ts'
import type { InboundHandler } from './inbound.ts'
import { HOP_HEADER, type SessionDirectory } from './session-directory.ts'
import { admitHttpSession, SessionLimits } from './session-limits.ts'
import { type SessionOptions, StreamableHttpSession } from './streamable-http-session.ts'
import { bodyVersionClaim, handleStatelessPost } from './streamable-http-stateless.ts'

/** The limits and hooks the endpoint needs; `HttpInboundOptions` documents each. */
export interface StreamableHttpOptions {
  readonly maxBodyBytes: number
  readonly jsonLimits: JsonLimits
  readonly maxSessions: number
  readonly maxSessionsPerIdentity: number
  readonly sessionIdleTimeoutMs: number
  readonly sseReplayEvents: number
  readonly sseReplayBytes: number
  readonly sseRetainedStreams: number
  readonly sseMaxQueuedBytes: number
  readonly sseKeepAliveMs: number
  readonly identityOf: (req: IncomingMessage) => string
}

/** Serves `/mcp` and `/mcp/<server>`; owns the legacy sessions. */
export class StreamableHttpEndpoint {
  readonly #handler: InboundHandler
  readonly #options: StreamableHttpOptions
  readonly #log: Logger
  readonly #sessionOptions: SessionOptions
  readonly #sessions = new Map<string, StreamableHttpSession>()
  readonly #limits: SessionLimits<StreamableHttpSession>
  readonly #sweep: NodeJS.Timeout | undefined
  /** Told of every session opened and closed here when replicas share sessions (ADR 058). */
  directory: SessionDirectory | undefined

  constructor(handler: InboundHandler, options: StreamableHttpOptions, log: Logger) {
    this.#handler = handler
    this.#options = options
    this.#log = log
    this.#sessionOptions = {
      replay: { maxEvents: options.sseReplayEvents, maxBytes: options.sseReplayBytes },
      retainedStreams: options.sseRetainedStreams,
      sse: { maxQueuedBytes: options.sseMaxQueuedBytes, keepAliveMs: options.sseKeepAliveMs, log },
      log,
    }
    // An evicted session answers its next request 404, which tells the client to initialize
    // again (the spec's rule for a session the server no longer knows).
    this.#limits = new SessionLimits(
      options,
      {
        idle: (session) => !session.working,
        lastActivity: (session) => session.lastActivity,
        evict: (session) => void session.close(),
      },
      'Streamable HTTP',
      log,
    )
    if (options.sessionIdleTimeoutMs > 0) {
      const every = Math.max(50, Math.min(options.sessionIdleTimeoutMs / 2, 60_000))
      this.#sweep = setInterval(() => this.#closeIdleSessions(), every)
      this.#sweep.unref()
    }
  }

  /** Number of live legacy sessions. */
  get sessionCount(): number {
    return this.#sessions.size
  }

  /** Whether this replica holds the session `id` (open or closing). */
  holds(id: string): boolean {
    return this.#sessions.has(id)
  }

  /**
   * Routes one request for the virtual server `server` (already known to exist). A POST is
   * handled once its body has arrived, after this returns: a failure then is answered here
   * (`failRequest`), not thrown.
   */
  handle(req: IncomingMessage, res: ServerResponse, server: string): void {
    if (req.method === 'POST') this.#post(req, res, server)
    else if (req.method === 'GET' || req.method === 'DELETE') this.#sessionRequest(req, res, server)
    else {
      sendRpcError(res, 405, `Method ${req.method} is not allowed here`, {
        headers: { allow: 'GET, POST, DELETE' },
      })
    }
  }

  #post(req: IncomingMessage, res: ServerResponse, server: string): void {
    if (!/^application\/json(\s*;|$)/i.test(req.headers['content-type'] ?? '')) {
      sendRpcError(res, 415, 'Content-Type must be application/json')
      return
    }
    const acceptsSse = accepts(req, 'text/event-stream')
    if (!acceptsSse && !accepts(req, 'application/json')) {
      sendRpcError(res, 406, 'Accept must include application/json or text/event-stream')
      return
    }
    // A callback, not an await: a POST takes no promise per layer between its body's 'end' and
    // the gateway (each cost a promise and microtasks per call).
    readTextBodyThen(req, res, this.#options.maxBodyBytes, (text) => {
      try {
        this.#received(req, res, server, text, acceptsSse)?.catch((err: unknown) =>
          failRequest(this.#log, req, res, err),
        )
      } catch (err) {
        failRequest(this.#log, req, res, err)
      }
    })
  }

  /** A POST whose body arrived; a promise only while a retry is offered to another replica. */
  #received(
    req: IncomingMessage,
    res: ServerResponse,
    server: string,
    text: string,
    acceptsSse: boolean,
  ): Promise<void> | void {
    const versionHeader = req.headers['mcp-protocol-version']
    const sessionId = singleHeader(req, 'mcp-session-id')
    const candidate = sessionId === undefined ? undefined : this.#sessions.get(sessionId)
    const parsed = parsePayload(text, {
      limits: this.#options.jsonLimits,
      allowBatch: candidate?.allowsBatch ?? false,
    })
    const single = parsed.ok && !parsed.batch ? parsed.items[0] : undefined
    const claim = single?.ok ? bodyVersionClaim(single.message) : undefined
    if (Array.isArray(versionHeader)) {
      sendRpcError(res, 400, 'MCP-Protocol-Version must appear once')
      return
    }
    // The era is a property of the request: a `_meta` claim or a modern header means stateless,
    // whatever session id may come along (modern servers ignore it). An unknown version header
    // on a session-less request is a future modern client; it gets -32020/-32022, not a session.
    const modern =
      claim !== undefined ||
      (versionHeader !== undefined &&
        (isRevision(versionHeader) ? eraOf(versionHeader) === 'modern' : sessionId === undefined))
    if (modern) {
      if (!parsed.ok) return sendJson(res, 400, serialize(parsed.error))
      const item = parsed.items[0]
      if (parsed.batch || item === undefined) {
        sendRpcError(res, 400, 'Batches are not allowed in MCP 2026-07-28')
        return
      }
      if (!item.ok) return sendJson(res, 400, serialize(item.error))
      // A retry of a call another replica holds goes there (ADR 081); nothing else waits here.
      const retry = item.message
      const directory = this.directory
      if (
        directory?.relayRetry !== undefined &&
        isRequest(retry) &&
        typeof retry.params?.requestState === 'string' &&
        req.headers[HOP_HEADER] === undefined
      ) {
        return directory.relayRetry(retry, text, req, res).then((relayed) => {
          if (!relayed) this.#stateless(req, res, retry, acceptsSse, server)
        })
      }
      this.#stateless(req, res, retry, acceptsSse, server)
      return
    }
    if (versionHeader !== undefined && !isRevision(versionHeader)) {
      sendRpcError(res, 400, `Unsupported MCP-Protocol-Version: ${versionHeader.slice(0, 40)}`)
      return
    }
    if (!parsed.ok) return sendJson(res, 400, serialize(parsed.error))
    if (sessionId === undefined) {
      if (!(single?.ok && isRequest(single.message) && single.message.method === 'initialize')) {
        sendRpcError(res, 400, 'Mcp-Session-Id header is required')
        return
      }
      this.#openSession(req, res, server, parsed.items, acceptsSse)
      return
    }
    const session = this.#lookup(req, sessionId, server)
    if (session === undefined) return sendRpcError(res, 404, 'Session not found')
    // The request's own header record, not a copy: it belongs to this request alone and is only
    // read (the Mcp-Param-* checks, auth context), so a POST allocates no second one.
    session.receivePost(
      res,
      parsed.items,
      parsed.batch,
      acceptsSse,
      req.headers,
      requestIdentity(req),
    )
  }

  #stateless(
    req: IncomingMessage,
    res: ServerResponse,
    message: JsonRpcMessage,
    acceptsSse: boolean,
    server: string,
  ): void {
    handleStatelessPost(req, res, message, acceptsSse, {
      handler: this.#handler,
      server,
      sse: this.#sessionOptions.sse,
      log: this.#log,
    })
  }

  #openSession(
    req: IncomingMessage,
    res: ServerResponse,
    server: string,
    items: Parameters<StreamableHttpSession['receivePost']>[1],
    acceptsSse: boolean,
  ): void {
    const owner = admitHttpSession(this.#limits, req, res)
    if (owner === undefined) return
    const id = randomBytes(24).toString('base64url')
    const session: StreamableHttpSession = new StreamableHttpSession(
      id,
      this.#options.identityOf(req),
      server,
      this.#sessionOptions,
      () => {
        this.#sessions.delete(id)
        this.#limits.remove(session)
        this.directory?.closed(id)
      },
    )
    this.#sessions.set(id, session)
    this.#limits.add(owner, session)
    this.directory?.opened(id)
    const headers = headerRecord(req)
    try {
      this.#handler.connect(session, {
        kind: 'streamable-http',
        server,
        remoteAddress: req.socket.remoteAddress,
        headers,
        identity: requestIdentity(req),
      })
    } catch (err) {
      void session.close()
      throw err
    }
    session.receivePost(res, items, false, acceptsSse, headers, requestIdentity(req), true)
  }

  /** GET opens or resumes a session stream; DELETE ends the session. */
  #sessionRequest(req: IncomingMessage, res: ServerResponse, server: string): void {
    const sessionId = singleHeader(req, 'mcp-session-id')
    if (sessionId === undefined) {
      // Stateless 2026-07-28 traffic is POST-only; GET and DELETE exist only for sessions.
      sendRpcError(res, 405, `${req.method} requires an Mcp-Session-Id`, {
        headers: { allow: 'POST' },
      })
      return
    }
    const version = req.headers['mcp-protocol-version']
    if (version !== undefined && !isRevision(version)) {
      sendRpcError(res, 400, 'Unsupported MCP-Protocol-Version')
      return
    }
    const session = this.#lookup(req, sessionId, server)
    if (session === undefined) {
      sendRpcError(res, 404, 'Session not found')
      return
    }
    if (req.method === 'DELETE') {
      void session.close()
      sendEmpty(res, 200)
      return
    }
    if (!accepts(req, 'text/event-stream')) {
      sendRpcError(res, 406, 'Accept must include text/event-stream')
      return
    }
    session.receiveGet(res, singleHeader(req, 'last-event-id'))
  }

  #lookup(req: IncomingMessage, id: string, server: string): StreamableHttpSession | undefined {
    const session = this.#sessions.get(id)
    if (session === undefined || session.closed || session.server !== server) return undefined
    if (session.identity !== this.#options.identityOf(req)) {
      this.#log.warn('session id presented by a different identity; refused', {
        remoteAddress: req.socket.remoteAddress,
      })
      return undefined
    }
    return session
  }

  #closeIdleSessions(): void {
    const cutoff = Date.now() - this.#options.sessionIdleTimeoutMs
    for (const session of this.#sessions.values()) {
      if (session.busy || session.lastActivity > cutoff) continue
      this.#log.info('closing an idle session', { sessionId: session.sessionId })
      void session.close()
    }
  }

  /** Shutdown, step one: ends the long-lived GET streams so their connections can drain. */
  endStreams(): void {
    for (const session of this.#sessions.values()) session.endStreams()
  }

  /** Shutdown, last step: closes every session. */
  async closeAll(): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep)
    await Promise.all([...this.#sessions.values()].map((session) => session.close()))
  }
}
