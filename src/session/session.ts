/**
 * One client connection: the gateway's server side of MCP for one client. It decodes what the
 * client sends with the codec of the client's revision, answers what the gateway answers itself
 * (initialize, ping, discover, lists), routes the rest through the virtual server to upstreams,
 * and brings replies, notifications and upstream→client requests back to this client only.
 */
import { createHash } from 'node:crypto'
import type { Span } from '@opentelemetry/api'
import { withoutBarbicanMeta } from '../auth/client-meta.ts'
import { ANONYMOUS, type Identity } from '../auth/identity.ts'
import type { UpstreamEnvelope } from '../bridge/envelope.ts'
import type { MrtrBridge } from '../bridge/mrtr.ts'
import type { ProgressRouter } from '../bridge/progress.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { withJudgedUris } from '../catalog/resource-uri.ts'
import { BarbicanError, errorData, jsonRpcCodeOf, toBarbicanError } from '../common/errors.ts'
import { randomHex } from '../common/random-hex.ts'
import { RUN_CODE } from '../exposure/code-catalog.ts'
import type { ProgramClock } from '../exposure/code-clock.ts'
import { searchModeTools } from '../exposure/tool-search-mode.ts'
import { compose, deniedBy } from '../policies/chain.ts'
import { type LivePolicies, SessionChain } from '../policies/live-policies.ts'
import type { Call, CallPeer } from '../policies/policy.ts'
import type { Codec } from '../protocol/codec.ts'
import { codecFor } from '../protocol/codecs.ts'
import {
  isPlainObject,
  type JsonObject,
  type JsonRpcId,
  type JsonRpcMessage,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts'
import { definedParams, type LocalMethod } from '../protocol/methods.ts'
import type { ErrorReply, Message, Request, Result } from '../protocol/model.ts'
import {
  DEFAULT_HTTP_LEGACY_REVISION,
  negotiateLegacy,
  type Revision,
} from '../protocol/revisions.ts'
import { type ForwardContext, forwardToUpstream } from '../relay/forward.ts'
import { upstreamEnvelope } from '../relay/translate.ts'
import { relayUnicast, type UnicastHost } from '../relay/unicast.ts'
import type { Logger } from '../telemetry/log.ts'
import { DENIED, outcomeOfError, outcomeOfReply, type ServerMetrics } from '../telemetry/metrics.ts'
import { endSpan, replyOutcome, startClientSpan, tracingOn } from '../telemetry/tracing.ts'
import type { ConnectionInfo } from '../transports/inbound.ts'
import type { ReceiveInfo, Transport } from '../transports/transport.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import type { UpstreamReply } from '../upstreams/upstream-client.ts'
import {
  type Route,
  resolveRoute,
  type SessionTask,
  stringParam,
  type WatchTarget,
} from '../virtual-servers/route.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'
import { callOutcome, logCall, requestFields, traceIdOf } from './call-line.ts'
import { ClientNotifications } from './client-notifications.ts'
import { ClientRequests, clientRequestRefusal } from './client-requests.ts'
import {
  adaptToolResult,
  callExposureTool,
  type Dispatch,
  exposedCatalog,
  isExposureTool,
} from './exposure.ts'
import { ListenStreams } from './listen-streams.ts'
import {
  complete,
  connectAll,
  discoverResult,
  initializeResult,
  listPage,
  ownTasks,
  setUpstreamLogLevel,
} from './local-answers.ts'
import { MetaToolGate, metaToolLimitsOf } from './meta-tool-limits.ts'
import { heldProgramInput } from './program-input.ts'
import {
  assertMethodAllowed,
  claimedRevision,
  isModernClaim,
  paramHeaderReply,
  unsupportedRevision,
} from './request-checks.ts'
import { LOG_LEVELS, RequestLogs } from './request-logs.ts'
import { metaToolCall, searchTools, viewRequest } from './tool-search-calls.ts'

/** What a session shares with the gateway and every other session of its virtual server. */
export interface SessionDeps {
  readonly server: VirtualServer
  readonly progress: ProgressRouter
  readonly log: Logger
  readonly serverInfo: JsonObject
  /** Timeout for requests Barbican sends to the client (sampling, elicitation, roots). */
  readonly clientRequestTimeoutMs: number
  readonly onClose: (session: Session) => void
  /** Most items in one page of a merged list. */
  readonly listPageSize: number
  /**
   * The policies run around the relay, in the chain's fixed order: the gateway's current
   * generation, taken by each call as it enters (a reload swaps it, live-policies.ts).
   */
  readonly policies: LivePolicies
  /** Multi-round-trip translation between eras (src/bridge); absent: relayed as is. */
  readonly bridge?: MrtrBridge | undefined
  /** The call metrics of the session's virtual server (src/metrics); absent: not counted. */
  readonly metrics?: ServerMetrics | undefined
  /** Bounds and per-caller rate of search_tools and run_code; absent: defaults, per session. */
  readonly metaTools?: MetaToolGate | undefined
}

/** Re-exported where it was first defined: the key is part of the `initialize` result. */
export { UPSTREAMS_META } from './local-answers.ts'

/**
 * One client connection and what was negotiated on it. The session owns the per-client state
 * (revision, capabilities, log level, requests in flight, tasks, subscriptions, listen streams)
 * and delegates each protocol concern to its module: request-checks.ts, virtual-servers/route.ts,
 * relay/unicast.ts, relay/forward.ts, session/listen-streams.ts, session/request-logs.ts,
 * session/local-answers.ts, client-notifications.ts and client-requests.ts.
 */
export class Session {
  readonly transport: Transport
  readonly info: ConnectionInfo
  #deps: SessionDeps
  #log: Logger
  /** The negotiated legacy revision; undefined before initialize (and for modern clients). */
  #revision: Revision | undefined
  #clientCapabilities: JsonObject = {}
  /** Notifications to the client, gated by its handshake and log level. */
  #notifications: ClientNotifications
  #inflight = new Map<JsonRpcId, AbortController>()
  /** The spans of requests in flight, by request id: only while tracing is on. */
  #spans: Map<JsonRpcId, Span> | undefined
  #clientRequests: ClientRequests
  /** Exposed URI → upstream target, for resources/updated routing. */
  #subscriptions = new Map<string, WatchTarget>()
  /** 2026-07-28 requests in flight that asked for logs (`_meta` logLevel). */
  #requestLogs = new RequestLogs()
  /** Open 2026-07-28 listen streams. */
  #listenStreams: ListenStreams
  #closed = false
  /** The tasks this client created, by id (2025-11-25 tasks pass through). */
  #tasks = new Map<string, SessionTask>()
  /** What relaying a single-upstream call uses of this session. */
  #unicast: UnicastHost = {
    forward: (upstream, request, params, signal) =>
      this.#forward(upstream, request, params, signal),
    tasks: this.#tasks,
    subscriptions: this.#subscriptions,
  }
  #listener: (keys: readonly string[]) => void
  /** The envelope of requests that carry none, and what it was built from (#envelopeFor). */
  #sessionEnvelope:
    | {
        readonly clientCapabilities: JsonObject
        readonly logLevel: string | undefined
        readonly envelope: UpstreamEnvelope
      }
    | undefined
  #chain: SessionChain
  /**
   * Short random id tying this session's calls together in logs and audit. From the pool: every
   * 2026-07-28 request is a session of its own, and a draw of its own cost a syscall per call.
   */
  readonly #id = randomHex(6)
  #nextCall = 1
  #nextFailure = 1
  /** The caller, as the credential of the latest message showed it (ReceiveInfo.identity). */
  #identity: Identity

  constructor(transport: Transport, info: ConnectionInfo, deps: SessionDeps) {
    this.transport = transport
    this.info = info
    this.#deps = deps
    this.#log = deps.log
    transport.onmessage = (message, receiveInfo) => this.receive(message, receiveInfo)
    transport.onclose = () => this.#onClose()
    this.#identity = info.identity ?? ANONYMOUS
    this.#chain = new SessionChain(deps.policies, (call) => this.#execute(call))
    this.#notifications = new ClientNotifications({
      revision: () => this.#revision,
      stateless: info.kind === 'streamable-http-stateless',
      send: (message, related) => void this.#send(message, related),
    })
    this.#listener = (keys) => this.#notifications.listChanged(keys)
    deps.server.on('listChanged', this.#listener)
    this.#listenStreams = new ListenStreams({
      server: deps.server,
      notify: (method, params, related) => this.#notifications.notify(method, params, related),
    })
    this.#clientRequests = new ClientRequests(
      {
        send: (message, related) => void this.#send(message, related),
        cancel: (id, related) =>
          this.#notifications.notify(
            'notifications/cancelled',
            { requestId: id, reason: 'Cancelled by the upstream server' },
            related,
          ),
        decode: (response) => this.#codecForLegacy().decode(response) as UpstreamReply,
      },
      deps.clientRequestTimeoutMs,
    )
  }

  /**
   * Who this session acts for now: the identity verified for the latest message, so a session's
   * rights follow the token last presented (and fall with it), not the one it was opened with.
   */
  get identity(): Identity {
    return this.#identity
  }

  get revision(): Revision | undefined {
    return this.#revision
  }

  /** What the client declared it supports (initialize, or the 2026-07-28 request envelope). */
  get clientCapabilities(): JsonObject {
    return this.#clientCapabilities
  }

  /** Entry point for every message the client sends. */
  receive(sent: JsonRpcMessage, info?: ReceiveInfo): void {
    if (info?.identity !== undefined) this.#identity = info.identity
    // Barbican's `_meta` namespace is its own: nothing a client writes there goes further.
    const message = withoutBarbicanMeta(sent)
    if ('method' in message) {
      if ('id' in message) {
        this.#handleRequest(message, info).catch((err: unknown) =>
          this.#log.error('unhandled request failure', { error: err }),
        )
      } else {
        this.#handleNotification(message.method, message.params)
      }
      return
    }
    // A response to a request Barbican sent the client.
    this.#clientRequests.answer(message)
  }

  #codecForLegacy(): Codec {
    return codecFor(this.#revision ?? DEFAULT_HTTP_LEGACY_REVISION)
  }

  async #handleRequest(wire: JsonRpcRequest, info?: ReceiveInfo): Promise<void> {
    const claimed = claimedRevision(wire)
    const modern = claimed !== undefined
    let codec: Codec
    if (modern) {
      if (!isModernClaim(claimed)) {
        await this.#sendError(
          wire.id,
          codecFor('2026-07-28'),
          unsupportedRevision(wire.id, claimed),
        )
        return
      }
      codec = codecFor(claimed)
    } else {
      codec = this.#codecForLegacy()
    }
    const request = codec.decode(wire) as Request
    const controller = new AbortController()
    info?.signal?.addEventListener('abort', () => controller.abort(), { once: true })
    this.#inflight.set(wire.id, controller)
    // Every line about this request carries its id and trace id; one line sums it up.
    const startedAt = performance.now()
    const log = this.#log.child(requestFields(wire.id, traceIdOf(info?.headers, wire.params)))
    const facts: { upstream?: string; outcome: string } = { outcome: 'ok' }
    // The request's span (tracing on only): upstream requests made for it become its children.
    const span = tracingOn()
      ? startClientSpan({
          method: wire.method,
          id: wire.id,
          params: request.params,
          sessionId: this.transport.sessionId,
          protocolVersion: modern ? claimed : this.#revision,
          transport: this.info.kind,
          headers: info?.headers,
        })
      : undefined
    if (span) {
      this.#spans ??= new Map()
      this.#spans.set(wire.id, span)
    }
    try {
      const reply = await this.#dispatch(request, modern, controller.signal, info?.headers, {
        log,
        facts,
      })
      reply.id = wire.id
      facts.outcome = callOutcome(reply)
      const encoded = codec.encode(reply, { method: request.method })
      endSpan(span, replyOutcome(reply))
      this.#answered(wire.id, controller)
      await this.#send(encoded, wire.id)
    } catch (err) {
      const e = toBarbicanError(err)
      const reply: ErrorReply = {
        kind: 'error',
        id: wire.id,
        code: jsonRpcCodeOf(e.code),
        message: e.message,
        data: errorData(e),
      }
      endSpan(span, { rpcCode: reply.code, errorType: e.code })
      // A failure from below (it has a cause) is logged with its cause chain under a reference
      // the client also gets, so what the client reports leads to the line that says why.
      facts.outcome = e.code
      if (e.code === 'ERR_INTERNAL' || e.cause !== undefined) {
        const reference = `${this.#id}-r${this.#nextFailure++}`
        const fields = { method: wire.method, code: e.code, reference, error: e }
        if (e.code === 'ERR_INTERNAL') log.error('request failed', fields)
        else log.warn('request failed', fields)
        reply.message = `${e.message} (reference ${reference} in the gateway log)`
        reply.data = { ...errorData(e), reference }
      }
      this.#answered(wire.id, controller)
      await this.#sendError(wire.id, codec, reply)
    } finally {
      this.#answered(wire.id, controller)
      logCall(log, { method: wire.method, params: wire.params, ...facts, startedAt })
      if (span) this.#spans?.delete(wire.id)
    }
  }

  /**
   * The request `controller` belongs to is answered: it is no longer in flight, so nothing
   * aborts it. Called before its reply is sent, because sending the reply of a 2026-07-28
   * request closes its session (streamable-http-stateless.ts), and a closing session aborts
   * what is still in flight: every call would pay for an abort (a DOMException and its stack)
   * that nothing listens to. A later request that reuses the id keeps its own entry.
   */
  #answered(id: JsonRpcId, controller: AbortController): void {
    if (this.#inflight.get(id) === controller) this.#inflight.delete(id)
  }

  async #sendError(id: JsonRpcId, codec: Codec, reply: ErrorReply): Promise<void> {
    await this.#send(codec.encode(reply), id)
  }

  async #send(message: JsonRpcMessage, relatedRequestId?: JsonRpcId): Promise<void> {
    if (this.#closed) return
    try {
      await this.transport.send(
        message,
        relatedRequestId === undefined ? undefined : { relatedRequestId },
      )
    } catch (error) {
      this.#log.debug('cannot send to client', { error })
    }
  }

  /**
   * Checks a request against the protocol (method known, present in the client's revision),
   * resolves its route, and runs it through the policy chain to `#execute`.
   */
  async #dispatch(
    sent: Request,
    modern: boolean,
    signal: AbortSignal,
    headers: ReceiveInfo['headers'] | undefined,
    about: {
      log: Logger
      facts: { upstream?: string }
      /** A code-mode program's clock, stopped while its call waits for the human. */
      clock?: ProgramClock
    },
  ): Promise<Result | ErrorReply> {
    // Policies judge, and upstreams receive, resource URIs in one normalised form.
    const judged = withJudgedUris(sent, (uri) => this.#deps.server.judgeUri(uri))
    // Search mode: call_tool is the direct call it names from here on; search_tools is answered
    // from the caller's view of the catalogue (tool-search-calls.ts).
    const meta = metaToolCall(this.#deps.server, judged, this.#metaTools.limits.maxResults)
    const request = meta.kind === 'call' ? meta.request : judged
    const { method } = request
    const revision: Revision = modern
      ? (request.envelope?.protocolVersion as Revision)
      : (this.#revision ?? DEFAULT_HTTP_LEGACY_REVISION)
    assertMethodAllowed(request, modern, revision)
    if (modern && request.envelope) this.#clientCapabilities = request.envelope.clientCapabilities
    if (meta.kind === 'search') {
      const gate = this.#metaTools
      await gate.admit(this.info.server, this.identity, 'search_tools')
      const view = await this.#view(this.#callOf(viewRequest(request), modern, signal, about.log))
      if (!('tools' in view)) return view
      return await searchTools(this.#deps.server, meta.args, view, gate.limits)
    }
    const server = this.#deps.server
    if (method === 'tools/call' && isExposureTool(server.exposure, request.params?.name)) {
      // Each step of these tools is dispatched like the client's own request (exposure.ts).
      const dispatch: Dispatch = (inner, params, innerSignal, clock) =>
        this.#dispatch(
          {
            kind: 'request',
            id: request.id,
            method: inner,
            params,
            ...(request.envelope === undefined ? {} : { envelope: request.envelope }),
          },
          modern,
          innerSignal,
          undefined,
          clock === undefined ? about : { ...about, clock },
        )
      // run_code's functions are the caller's view: what a tools/list of theirs would show.
      const view = () => this.#view(this.#callOf(viewRequest(request), modern, signal, about.log))
      const bridge = this.#deps.bridge
      const { envelope } = request
      // A program buys up to code.maxCalls calls: run_code counts against the caller's rate.
      const admitted = async (): Promise<void> => {
        if (request.params?.name === RUN_CODE) {
          await this.#metaTools.admit(this.info.server, this.identity, RUN_CODE)
        }
      }
      let run = async (): Promise<Result | ErrorReply> => {
        await admitted()
        return await callExposureTool(server, view, request.params, dispatch, signal)
      }
      if (modern && bridge && envelope && request.params?.name === RUN_CODE) {
        // A 2026-07-28 client answers a program's questions (confirmations) by calling again:
        // run_code is a held call, its program paused between rounds (program-input.ts).
        run = async () => {
          // Only a program's first round counts; its later rounds answer its questions.
          if (request.params?.requestState === undefined) await admitted()
          return await bridge.modernCall({
            identity: this.identity,
            method,
            params: request.params,
            clientCapabilities: envelope.clientCapabilities,
            signal,
            upstream: RUN_CODE,
            upstreamEra: 'legacy',
            send: (params, held, heldSignal) =>
              callExposureTool(
                server,
                view,
                params,
                dispatch,
                heldSignal,
                held && heldProgramInput(bridge, held),
              ),
          })
        }
      }
      // The call itself is audited too (a program's digest, or its text with rawArguments),
      // besides each call it makes; the other policies judge those calls, not this one.
      const generation = this.#deps.policies.current
      const audit = generation.audit
      if (audit === undefined) return await run()
      const call = this.#callOf(request, modern, signal, about.log)
      return await generation.run(() => audit.handle(call, run))
    }
    const call = this.#callOf(request, modern, signal, about.log, about.clock)
    call.route =
      meta.kind === 'call' && meta.error
        ? { kind: 'unresolved', error: meta.error }
        : await resolveRoute(this.#deps.server, request, this.#tasks)
    if (call.route.kind === 'unicast') about.facts.upstream = call.route.upstream
    // A call_tool's headers follow call_tool's own schema, which declares no Mcp-Param header.
    const direct = meta.kind === 'none'
    if (direct && modern && headers && method === 'tools/call' && call.route.kind === 'unicast') {
      const mismatch = await paramHeaderReply(this.#deps.server, request, headers)
      if (mismatch) return mismatch
    }
    const metrics = this.#deps.metrics
    const reply =
      metrics === undefined ? await this.#chain.run(call) : await this.#counted(call, metrics)
    if (method === 'tools/call' && call.route.kind === 'unicast') {
      return await adaptToolResult(server, call.route.upstream, reply)
    }
    return reply
  }

  /** A call of this session, its route still to resolve. */
  #callOf(
    request: Request,
    modern: boolean,
    signal: AbortSignal,
    log: Logger,
    clock?: ProgramClock,
  ): Call & { route: Route } {
    // The peer is built only for a policy that reads it (confirm, cedar with context labels):
    // most calls pass no such policy and should not pay for its closures.
    let peer: CallPeer | undefined
    const session = this
    return {
      id: `${this.#id}-${this.#nextCall++}`,
      request,
      identity: this.identity,
      server: this.info.server,
      transport: this.info.kind,
      route: { kind: 'local' },
      signal,
      log,
      decisions: [],
      get peer() {
        peer ??= session.#peer(modern, request, clock)
        return peer
      },
      catalog: this.#catalogOfServer,
    }
  }

  /**
   * The catalog as `call` (a tools/list) shows it to its caller: run through the same policy
   * chain as a listing (audited, limited and narrowed like one), ending here instead of paging.
   */
  async #view(call: Call & { route: Route }): Promise<Catalog | ErrorReply> {
    call.route = await resolveRoute(this.#deps.server, call.request, this.#tasks)
    let view: Catalog | undefined
    const generation = this.#deps.policies.current
    const chain = compose(generation.policies, async (seen) => {
      if (seen.route.kind === 'unresolved') throw seen.route.error
      if (seen.route.kind === 'fanout') view = seen.route.catalog
      return complete({})
    })
    const reply = await generation.run(() => chain(call))
    if (reply.kind === 'error') return reply
    if (view === undefined) throw new BarbicanError('ERR_INTERNAL', 'tools/list has no catalog')
    return view
  }

  /** The gateway's meta-tool gate; a session built without one keeps its own, with defaults. */
  get #metaTools(): MetaToolGate {
    this.#ownMetaTools ??= this.#deps.metaTools ?? new MetaToolGate(metaToolLimitsOf())
    return this.#ownMetaTools
  }

  #ownMetaTools: MetaToolGate | undefined

  /** The virtual server's catalog, as policies read it (one function for every call). */
  readonly #catalogOfServer = async () => (await this.#deps.server.catalog()).catalog

  /** The client as policies reach it (policies/policy.ts CallPeer). */
  #peer(modern: boolean, request: Request, clock?: ProgramClock): CallPeer {
    const stateless = this.info.kind === 'streamable-http-stateless'
    const ask: CallPeer['ask'] = (method, params, signal) =>
      this.#clientRequests.request(
        method,
        (id) =>
          this.#codecForLegacy().encode({
            kind: 'request',
            id,
            method,
            params,
          } satisfies Message),
        request.id,
        signal,
      )
    return {
      era: modern ? 'modern' : stateless || this.#revision === undefined ? 'none' : 'legacy',
      capabilities: this.#clientCapabilities,
      sessionId: modern || stateless ? undefined : this.#id,
      // A program's call asking a human: its time limit stands still meanwhile (code-clock.ts).
      ask:
        clock === undefined
          ? ask
          : async (method, params, signal) => {
              clock.hold()
              try {
                return await ask(method, params, signal)
              } finally {
                clock.release()
              }
            },
    }
  }

  /** The chain, with the call counted and timed by virtual server, upstream, tool and outcome. */
  async #counted(call: Call, metrics: ServerMetrics): Promise<Result | ErrorReply> {
    const { route, request } = call
    const upstream = route.kind === 'unicast' ? route.upstream : ''
    // Only a name the catalog routed is a label: made-up names must not use up `maxTools`.
    const tool =
      request.method === 'tools/call' && upstream !== '' ? (request.params?.name as string) : ''
    const started = metrics.begin()
    try {
      const reply = await this.#chain.run(call)
      metrics.end(request.method, upstream, tool, outcomeOfReply(reply), started)
      return reply
    } catch (err) {
      const outcome = outcomeOfError(err)
      metrics.end(request.method, upstream, tool, outcome, started)
      if (outcome === DENIED) metrics.denied(deniedBy(err) ?? 'unknown')
      throw err
    }
  }

  /** The relay: the step after the last policy. */
  async #execute(call: Call): Promise<Result | ErrorReply> {
    const { request, route, signal } = call
    const { method } = request
    const server = this.#deps.server
    if (route.kind === 'unresolved') throw route.error

    if (route.kind === 'fanout') {
      const { exposure } = server
      const catalog =
        method === 'tools/list' && exposure.mode === 'search'
          ? await searchModeTools(route.catalog, exposure)
          : route.catalog
      for (const d of route.degraded) {
        this.#notifications.log('warning', {
          message: `Upstream ${d.upstream} is unavailable: ${d.error}`,
        })
      }
      const cursor = request.params?.cursor
      return listPage(
        method === 'tools/list' ? exposedCatalog(server.exposure, catalog) : catalog,
        method,
        cursor,
        this.#deps.listPageSize,
        route.degraded,
        viewKey(call.identity),
      )
    }

    if (route.kind === 'unicast') {
      const upstream = server.upstream(route.upstream)!
      const reply = await relayUnicast(this.#unicast, upstream, route.original, request, signal)
      // A confined server's error that names a path or host outside its grants gets the fix.
      if (reply) return upstream.hints ? upstream.hints.annotate(reply, call.log) : reply
    }

    if (!Object.hasOwn(this.#local, method)) {
      throw new BarbicanError('ERR_METHOD_UNKNOWN', `Method not found: ${method}`)
    }
    return await this.#local[method as LocalMethod](request, signal)
  }

  /**
   * What Barbican answers itself, one entry per local method of the method table
   * (protocol/methods.ts `LocalMethod`: client requests that are neither a merged list nor
   * relayed); a new local method fails to compile until it has its answer here.
   */
  #local: {
    readonly [M in LocalMethod]: (request: Request, signal: AbortSignal) => Promise<Result>
  } = {
    initialize: (request) => this.#initialize(request),
    ping: async () => complete({}),
    'server/discover': async (request) => {
      await connectAll(this.#deps.server)
      return discoverResult(this.#deps.server, request.id, this.#deps.serverInfo)
    },
    'tasks/list': (_request, signal) => ownTasks(this.#deps.server, this.#tasks, signal),
    'logging/setLevel': async (request, signal) => {
      const level = stringParam(request.params, 'level')
      if (!LOG_LEVELS.includes(level)) {
        throw new BarbicanError('ERR_INVALID_PARAMS', `Invalid log level: ${level}`)
      }
      this.#notifications.setLogLevel(level)
      await setUpstreamLogLevel(this.#deps.server, level, signal)
      return complete({})
    },
    'subscriptions/listen': (request, signal) => this.#listenStreams.serve(request, signal),
  }

  async #initialize(request: Request): Promise<Result> {
    const params = request.params ?? {}
    const revision = negotiateLegacy(params.protocolVersion)
    this.#revision = revision
    this.#clientCapabilities = isPlainObject(params.capabilities) ? params.capabilities : {}
    this.transport.setProtocolVersion?.(revision)
    await connectAll(this.#deps.server)
    return initializeResult(this.#deps.server, revision, this.#deps.serverInfo)
  }

  /** Sends a request upstream on this client's behalf and returns the upstream's reply. */
  #forward(
    upstream: Upstream,
    request: Request,
    params: JsonObject | undefined,
    signal: AbortSignal,
  ): Promise<Result | ErrorReply> {
    const envelope = this.#envelopeFor(request)
    const context: ForwardContext = {
      session: this,
      caller: {
        identity: this.identity,
        headers: this.info.headers,
        clientCapabilities: this.#clientCapabilities,
      },
      progress: this.#deps.progress,
      bridge: this.#deps.bridge,
      logs: this.#requestLogs,
      envelope,
      span: this.#spans?.get(request.id),
    }
    return forwardToUpstream(context, upstream, request, params, signal)
  }

  /**
   * What a 2026-07-28 upstream is told about the client of `request`. A request without its own
   * envelope (a legacy client) gets the session's, built again only when the capabilities or the
   * log level it comes from changed.
   */
  #envelopeFor(request: Request): UpstreamEnvelope {
    const clientCapabilities = this.#clientCapabilities
    const logLevel = this.#notifications.logLevel
    const own = request.envelope === undefined
    const kept = this.#sessionEnvelope
    if (own && kept?.clientCapabilities === clientCapabilities && kept.logLevel === logLevel) {
      return kept.envelope
    }
    const envelope = upstreamEnvelope(request, {
      clientCapabilities,
      logLevel,
      serverInfo: this.#deps.serverInfo,
    })
    if (own) this.#sessionEnvelope = { clientCapabilities, logLevel, envelope }
    return envelope
  }

  /** ProgressSink: a progress notification for one of this client's requests. */
  progress(params: Record<string, unknown>, relatedRequestId: JsonRpcId): void {
    this.#notifications.notify('notifications/progress', params, relatedRequestId)
  }

  /** How many of this client's 2026 requests in flight asked `upstream` for logs. */
  logRequestsTo(upstream: string): number {
    return this.#requestLogs.countFor(upstream)
  }

  /**
   * A log line from `upstream` that the gateway attributed to this client's only 2026 request
   * asking that upstream for logs: sent on that request's stream, at or above its level.
   */
  forwardRequestLog(upstream: string, params: JsonObject | undefined): void {
    const line = this.#requestLogs.attribute(upstream, params)
    if (line) this.#notifications.notify('notifications/message', line.params, line.id)
  }

  /** A logging notification from an upstream, tagged with its source. */
  forwardLog(upstream: string, params: JsonObject | undefined): void {
    this.#notifications.upstreamLog(upstream, params)
  }

  /** A task status notification; delivered to the client whose call created the task. */
  forwardTaskStatus(upstream: string, params: JsonObject | undefined): void {
    const taskId = params?.taskId
    if (typeof taskId === 'string' && this.#tasks.get(taskId)?.upstream === upstream) {
      this.#notifications.notify('notifications/tasks/status', params)
    }
  }

  /** A resources/updated notification; delivered when this client subscribed to that resource. */
  forwardResourceUpdated(upstream: string, params: JsonObject | undefined): void {
    const uri = params?.uri
    this.#listenStreams.resourceUpdated(upstream, uri)
    for (const [exposed, target] of this.#subscriptions) {
      if (target.upstream === upstream && target.uri === uri) {
        this.#notifications.notify('notifications/resources/updated', { ...params, uri: exposed })
      }
    }
  }

  /**
   * Sends an upstream's request (sampling, elicitation, roots/list) to this client, related to
   * the client's call that caused it, and returns the client's answer.
   */
  async requestClient(
    request: JsonRpcRequest,
    relatedRequestId: JsonRpcId | undefined,
    signal?: AbortSignal,
    upstream?: string,
  ): Promise<UpstreamReply> {
    const refusal = clientRequestRefusal(request, this.#clientCapabilities, this.#revision)
    if (refusal) return refusal
    if (upstream !== undefined) {
      // Its content reaches the client's model now: secure contexts label it before (ADR 104).
      const asked = {
        upstream,
        method: request.method,
        sessionId: this.info.kind === 'streamable-http-stateless' ? undefined : this.#id,
        identity: this.identity,
      }
      for (const policy of this.#deps.policies.current.policies) policy.upstreamAsked?.(asked)
    }
    return await this.#clientRequests.relay(
      request,
      this.#codecForLegacy(),
      relatedRequestId,
      signal,
    )
  }

  #handleNotification(method: string, params: JsonObject | undefined): void {
    switch (method) {
      case 'notifications/initialized':
        this.#notifications.markInitialized()
        return
      case 'notifications/cancelled': {
        const id = params?.requestId
        if (typeof id === 'string' || typeof id === 'number') this.#inflight.get(id)?.abort()
        return
      }
      case 'notifications/roots/list_changed':
        // Only what the notification defines (its `_meta`) is passed on, as for requests.
        for (const u of this.#deps.server.connectedUpstreams()) {
          u.notify(method, definedParams(method, params)).catch(() => {})
        }
        return
      default:
        return
    }
  }

  #onClose(): void {
    if (this.#closed) return
    this.#closed = true
    this.#deps.server.off('listChanged', this.#listener)
    for (const controller of this.#inflight.values()) controller.abort()
    this.#clientRequests.closeAll()
    this.#deps.onClose(this)
  }
}

/**
 * The key of the view a caller's lists are narrowed to (policies narrow by these facts): a
 * digest, so that cursors do not carry the identity in clear.
 */
function viewKey(identity: Identity): string {
  const facts = [
    identity.subject,
    identity.tenant,
    identity.client,
    identity.scopes,
    identity.claims,
  ]
  return createHash('sha256').update(JSON.stringify(facts)).digest('base64url').slice(0, 16)
}
