/**
 * A client as Barbican holds it while it has something to answer: what every exchange of it
 * (relay/exchange.ts) reads and writes, and the delivery of what reaches it unasked (upstream
 * notifications, upstream→client requests). Two kinds: a `Session` (session.ts), one connection
 * and what was negotiated on it, living across requests; and a `StatelessRequest` (one 2026-07-28
 * request over stateless HTTP), which lives as long as its one exchange and negotiates nothing.
 */
import type { Span } from '@opentelemetry/api'
import { withoutBarbicanMeta } from '../auth/client-meta.ts'
import { ANONYMOUS, type Identity } from '../auth/identity.ts'
import type { UpstreamEnvelope } from '../bridge/envelope.ts'
import type { ClientRequester } from '../bridge/held-call.ts'
import type { MrtrBridge } from '../bridge/mrtr.ts'
import type { ProgressRouter, ProgressSink } from '../bridge/progress.ts'
import { randomHex } from '../common/random-hex.ts'
import type { ProgramClock } from '../exposure/code-clock.ts'
import { LiveChain, type LivePolicies } from '../policies/live-policies.ts'
import type { Call, CallPeer, Reply } from '../policies/policy.ts'
import type { Codec } from '../protocol/codec.ts'
import { codecFor } from '../protocol/codecs.ts'
import type { JsonObject, JsonRpcId, JsonRpcMessage, JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { definedParams } from '../protocol/methods.ts'
import type { ErrorReply, Message, Request, Result } from '../protocol/model.ts'
import { DEFAULT_HTTP_LEGACY_REVISION, type Revision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import type { ServerMetrics } from '../telemetry/metrics.ts'
import type { ConnectionInfo } from '../transports/inbound.ts'
import type { ReceiveInfo, Transport } from '../transports/transport.ts'
import type { UpstreamReply } from '../upstreams/upstream-client.ts'
import type { SessionTask, WatchTarget } from '../virtual-servers/route.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'
import { ClientNotifications } from './client-notifications.ts'
import { ClientRequests, clientRequestRefusal } from './client-requests.ts'
import { ListenStreams } from './listen-streams.ts'
import { MetaToolGate, metaToolLimitsOf } from './meta-tool-limits.ts'
import { RequestLogs } from './request-logs.ts'

/** What a session shares with the gateway and every other session of its virtual server. */
export interface SessionDeps {
  readonly server: VirtualServer
  readonly progress: ProgressRouter
  readonly log: Logger
  readonly serverInfo: JsonObject
  /** Timeout for requests Barbican sends to the client (sampling, elicitation, roots). */
  readonly clientRequestTimeoutMs: number
  readonly onClose: (client: Client) => void
  /** Most items in one page of a merged list. */
  readonly listPageSize: number
  /**
   * The policies run around the relay, in the chain's fixed order: the gateway's current
   * generation, taken by each call as it enters (a reload swaps it, live-policies.ts).
   */
  readonly policies: LivePolicies
  /** Multi-round-trip translation between eras (src/bridge); absent: relayed as is. */
  readonly bridge?: MrtrBridge | undefined
  /** The call metrics of the session's virtual server (src/telemetry); absent: not counted. */
  readonly metrics?: ServerMetrics | undefined
  /** Bounds and per-caller rate of search_tools and run_code; absent: defaults, per session. */
  readonly metaTools?: MetaToolGate | undefined
  /** Runs one request the client sent: its exchange (relay/exchange.ts). */
  readonly exchange: (client: Client, request: JsonRpcRequest, info?: ReceiveInfo) => void
  /** The step after the last policy (relay/answer.ts), which the client's chain wraps. */
  readonly relay: (client: Client, call: Call) => Promise<Reply>
  /**
   * The chain shared by every client of the gateway (its relay answers `call.sender`), composed
   * once per policy generation, not per client (ADR 135); absent: each client composes its own.
   */
  readonly chain?: LiveChain | undefined
}

/** The envelope of requests that carry none, and what it was built from. */
export interface KeptEnvelope {
  readonly clientCapabilities: JsonObject
  readonly logLevel: string | undefined
  readonly envelope: UpstreamEnvelope
}

/**
 * The per-client state every exchange of this client reads and writes, and the delivery of what
 * reaches the client unasked (client-notifications.ts, client-requests.ts, listen-streams.ts,
 * request-logs.ts). Requests Barbican sends the client and listen streams are made on first use:
 * most stateless requests need neither.
 */
export abstract class Client implements ProgressSink, ClientRequester {
  readonly transport: Transport
  readonly info: ConnectionInfo
  readonly deps: SessionDeps
  /** The negotiated legacy revision; undefined before initialize (and for modern clients). */
  revision: Revision | undefined
  /** What the client declared it supports (initialize, or the 2026-07-28 request envelope). */
  clientCapabilities: JsonObject = {}
  /**
   * Who this session acts for now: the identity verified for the latest message, so a session's
   * rights follow the token last presented (and fall with it), not the one it was opened with.
   */
  identity: Identity
  /** Notifications to the client, gated by its handshake and log level. */
  readonly notifications: ClientNotifications
  /** The client's requests in flight, by id: a cancellation or the session's end aborts them. */
  readonly inflight = new Map<JsonRpcId, AbortController>()
  /** The spans of requests in flight, by request id: only while tracing is on. */
  spans: Map<JsonRpcId, Span> | undefined
  /** Exposed URI → upstream target, for resources/updated routing. */
  readonly subscriptions = new Map<string, WatchTarget>()
  /** 2026-07-28 requests in flight that asked for logs (`_meta` logLevel). */
  readonly requestLogs = new RequestLogs()
  /** The tasks this client created, by id (2025-11-25 tasks pass through). */
  readonly tasks = new Map<string, SessionTask>()
  /** The envelope of requests that carry none (relay/forward.ts `envelopeFor`). */
  keptEnvelope: KeptEnvelope | undefined
  /** The policy chain around the relay (the gateway's shared one), composed again after a reload. */
  readonly chain: LiveChain
  /**
   * Short random id tying this session's calls together in logs and audit. From the pool: every
   * 2026-07-28 request is a session of its own, and a draw of its own cost a syscall per call.
   */
  readonly id = randomHex(6)
  #nextCall = 1
  #nextFailure = 1
  #closed = false
  #ownMetaTools: MetaToolGate | undefined
  #clientRequests: ClientRequests | undefined
  #listenStreams: ListenStreams | undefined

  constructor(transport: Transport, info: ConnectionInfo, deps: SessionDeps) {
    this.transport = transport
    this.info = info
    this.deps = deps
    transport.onmessage = (message, receiveInfo) => this.receive(message, receiveInfo)
    transport.onclose = () => this.#onClose()
    this.identity = info.identity ?? ANONYMOUS
    this.chain = deps.chain ?? new LiveChain(deps.policies, (call) => deps.relay(this, call))
    this.notifications = new ClientNotifications({
      revision: () => this.revision,
      stateless: info.kind === 'streamable-http-stateless',
      send: (message, related) => void this.send(message, related),
    })
  }

  /** Requests Barbican sends the client (sampling, elicitation, roots). */
  get clientRequests(): ClientRequests {
    this.#clientRequests ??= new ClientRequests(
      {
        send: (message, related) => void this.send(message, related),
        cancel: (id, related) =>
          this.notifications.notify(
            'notifications/cancelled',
            { requestId: id, reason: 'Cancelled by the upstream server' },
            related,
          ),
        decode: (response) => this.codecForLegacy().decode(response) as UpstreamReply,
      },
      this.deps.clientRequestTimeoutMs,
    )
    return this.#clientRequests
  }

  /** Open 2026-07-28 listen streams. */
  get listenStreams(): ListenStreams {
    this.#listenStreams ??= new ListenStreams({
      server: this.deps.server,
      notify: (method, params, related) => this.notifications.notify(method, params, related),
    })
    return this.#listenStreams
  }

  /** Entry point for every message the client sends: requests go to their exchange. */
  receive(sent: JsonRpcMessage, info?: ReceiveInfo): void {
    if (info?.identity !== undefined) this.identity = info.identity
    // Barbican's `_meta` namespace is its own: nothing a client writes there goes further.
    const message = withoutBarbicanMeta(sent)
    if ('method' in message) {
      if ('id' in message) this.deps.exchange(this, message, info)
      else this.#handleNotification(message.method, message.params)
      return
    }
    // A response to a request Barbican sent the client.
    this.#clientRequests?.answer(message)
  }

  /** A stateless 2026-07-28 connection: one request, nothing negotiated beforehand. */
  get stateless(): boolean {
    return this.info.kind === 'streamable-http-stateless'
  }

  /** The codec of the negotiated legacy revision (the HTTP default before initialize). */
  codecForLegacy(): Codec {
    return codecFor(this.revision ?? DEFAULT_HTTP_LEGACY_REVISION)
  }

  /** `initialize` negotiated `revision`: the transport speaks it from now on. */
  negotiated(revision: Revision, capabilities: JsonObject): void {
    this.revision = revision
    this.clientCapabilities = capabilities
    this.transport.setProtocolVersion?.(revision)
  }

  /** The id of this session's next call, in logs and audit. */
  nextCallId(): string {
    return `${this.id}-${this.#nextCall++}`
  }

  /** A reference for a failure the client is told about, found again in the gateway log. */
  nextFailureReference(): string {
    return `${this.id}-r${this.#nextFailure++}`
  }

  /**
   * The request `controller` belongs to is answered: it is no longer in flight, so nothing
   * aborts it. Called before its reply is sent, because sending the reply of a 2026-07-28
   * request closes its session (streamable-http-stateless.ts), and a closing session aborts
   * what is still in flight: every call would pay for an abort (a DOMException and its stack)
   * that nothing listens to. A later request that reuses the id keeps its own entry.
   */
  answered(id: JsonRpcId, controller: AbortController): void {
    if (this.inflight.get(id) === controller) this.inflight.delete(id)
  }

  /** Sends to the client; a closed session or a gone client drops it (logged at debug). */
  async send(message: JsonRpcMessage, relatedRequestId?: JsonRpcId): Promise<void> {
    if (this.#closed) return
    try {
      await this.transport.send(
        message,
        relatedRequestId === undefined ? undefined : { relatedRequestId },
      )
    } catch (error) {
      this.deps.log.debug('cannot send to client', { error })
    }
  }

  /** The gateway's meta-tool gate; a session built without one keeps its own, with defaults. */
  get metaTools(): MetaToolGate {
    this.#ownMetaTools ??= this.deps.metaTools ?? new MetaToolGate(metaToolLimitsOf())
    return this.#ownMetaTools
  }

  /** The virtual server's catalog, as policies read it (one function for every call). */
  readonly catalogOfServer = async () => (await this.deps.server.catalog()).catalog

  /**
   * The client as the policies of one call reach it, built on first use: most calls pass no
   * policy that reads it (confirm, cedar with context labels) and should not pay for its closures.
   */
  lazyPeer(modern: boolean, request: Request, clock?: ProgramClock): CallPeer {
    return new LazyPeer(this, modern, request, clock)
  }

  /** The client as policies reach it (policies/policy.ts CallPeer). */
  peer(modern: boolean, request: Request, clock?: ProgramClock): CallPeer {
    const stateless = this.stateless
    const ask: CallPeer['ask'] = (method, params, signal) =>
      this.clientRequests.request(
        method,
        (id) =>
          this.codecForLegacy().encode({
            kind: 'request',
            id,
            method,
            params,
          } satisfies Message),
        request.id,
        signal,
      )
    return {
      era: modern ? 'modern' : stateless || this.revision === undefined ? 'none' : 'legacy',
      capabilities: this.clientCapabilities,
      sessionId: modern || stateless ? undefined : this.id,
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

  /** ProgressSink: a progress notification for one of this client's requests. */
  progress(params: Record<string, unknown>, relatedRequestId: JsonRpcId): void {
    this.notifications.notify('notifications/progress', params, relatedRequestId)
  }

  /** How many of this client's 2026 requests in flight asked `upstream` for logs. */
  logRequestsTo(upstream: string): number {
    return this.requestLogs.countFor(upstream)
  }

  /**
   * A log line from `upstream` that the gateway attributed to this client's only 2026 request
   * asking that upstream for logs: sent on that request's stream, at or above its level.
   */
  forwardRequestLog(upstream: string, params: JsonObject | undefined): void {
    const line = this.requestLogs.attribute(upstream, params)
    if (line) this.notifications.notify('notifications/message', line.params, line.id)
  }

  /** A logging notification from an upstream, tagged with its source. */
  forwardLog(upstream: string, params: JsonObject | undefined): void {
    this.notifications.upstreamLog(upstream, params)
  }

  /** A task status notification; delivered to the client whose call created the task. */
  forwardTaskStatus(upstream: string, params: JsonObject | undefined): void {
    const taskId = params?.taskId
    if (typeof taskId === 'string' && this.tasks.get(taskId)?.upstream === upstream) {
      this.notifications.notify('notifications/tasks/status', params)
    }
  }

  /** A resources/updated notification; delivered when this client subscribed to that resource. */
  forwardResourceUpdated(upstream: string, params: JsonObject | undefined): void {
    const uri = params?.uri
    this.#listenStreams?.resourceUpdated(upstream, uri)
    for (const [exposed, target] of this.subscriptions) {
      if (target.upstream === upstream && target.uri === uri) {
        this.notifications.notify('notifications/resources/updated', { ...params, uri: exposed })
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
    const refusal = clientRequestRefusal(request, this.clientCapabilities, this.revision)
    if (refusal) return refusal
    if (upstream !== undefined) {
      // Its content reaches the client's model now: secure contexts label it before (ADR 104).
      const asked = {
        upstream,
        method: request.method,
        sessionId: this.stateless ? undefined : this.id,
        identity: this.identity,
      }
      for (const policy of this.deps.policies.current.policies) policy.upstreamAsked?.(asked)
    }
    return await this.clientRequests.relay(request, this.codecForLegacy(), relatedRequestId, signal)
  }

  #handleNotification(method: string, params: JsonObject | undefined): void {
    switch (method) {
      case 'notifications/initialized':
        this.notifications.markInitialized()
        return
      case 'notifications/cancelled': {
        const id = params?.requestId
        if (typeof id === 'string' || typeof id === 'number') this.inflight.get(id)?.abort()
        return
      }
      case 'notifications/roots/list_changed':
        // Only what the notification defines (its `_meta`) is passed on, as for requests.
        for (const u of this.deps.server.connectedUpstreams()) {
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
    this.ended()
    for (const controller of this.inflight.values()) controller.abort()
    this.#clientRequests?.closeAll()
    this.deps.onClose(this)
  }

  /** The client is gone: what its kind holds beyond the common state is released. */
  protected abstract ended(): void
}

/**
 * A call's peer (`Client.peer`), built when a policy first reads one of its members and the same
 * from then on. A class rather than a getter on the call: an accessor in an object literal is
 * defined at run time and leaves every call a dictionary-mode object (bench/NOTEBOOK.md, 2026-12-06).
 */
class LazyPeer implements CallPeer {
  readonly #client: Client
  readonly #modern: boolean
  readonly #request: Request
  readonly #clock: ProgramClock | undefined
  #peer: CallPeer | undefined

  constructor(client: Client, modern: boolean, request: Request, clock: ProgramClock | undefined) {
    this.#client = client
    this.#modern = modern
    this.#request = request
    this.#clock = clock
  }

  #built(): CallPeer {
    this.#peer ??= this.#client.peer(this.#modern, this.#request, this.#clock)
    return this.#peer
  }

  get era(): CallPeer['era'] {
    return this.#built().era
  }

  get capabilities(): JsonObject {
    return this.#built().capabilities
  }

  get sessionId(): string | undefined {
    return this.#built().sessionId
  }

  ask(method: string, params: JsonObject, signal: AbortSignal): Promise<Result | ErrorReply> {
    return this.#built().ask(method, params, signal)
  }
}
