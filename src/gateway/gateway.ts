/**
 * Builds a running gateway from a plan: the upstreams, the virtual servers composed of them, and
 * the sessions of connected clients. It is the inbound transports' handler and routes what
 * upstreams send on their own (notifications, requests to clients) to the right sessions.
 */
import { MemoryContinuationStore } from '../bridge/continuation-store.ts'
import { modernHeaders } from '../bridge/envelope.ts'
import type { HeldCall } from '../bridge/held-call.ts'
import { MrtrBridge } from '../bridge/mrtr.ts'
import { ProgressRouter } from '../bridge/progress.ts'
import { RequestStateSealer, stateKeyFromEnv } from '../bridge/request-state.ts'
import type { CatalogRules } from '../catalog/catalog.ts'
import { VERSION } from '../common/version.ts'
import type { HeldUpstream } from '../config/config.ts'
import { LiveChain, LivePolicies, type PolicyGeneration } from '../policies/live-policies.ts'
import type { Policy } from '../policies/policy.ts'
import {
  isPlainObject,
  type JsonObject,
  type JsonRpcNotification,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts'
import { answer, answerSender } from '../relay/answer.ts'
import { exchange } from '../relay/exchange.ts'
import type { RefusalHints } from '../sandbox/hints.ts'
import type { SessionDeps } from '../session/client.ts'
import { MetaToolGate, type MetaToolLimits, metaToolLimitsOf } from '../session/meta-tool-limits.ts'
import { type Client, clientFor } from '../session/session.ts'
import type { Hush, Logger } from '../telemetry/log.ts'
import { GatewayMetrics } from '../telemetry/metrics.ts'
import type { ConnectionInfo, InboundHandler } from '../transports/inbound.ts'
import type { Transport } from '../transports/transport.ts'
import type { TrustGuard } from '../trust/trust-guard.ts'
import { type HeldList, Upstream, type UpstreamState } from '../upstreams/upstream.ts'
import type { CallOwner, UpstreamReply } from '../upstreams/upstream-client.ts'
import { LIST_CHANGED } from '../upstreams/upstream-lists.ts'
import { DEFAULT_LIST_TIMING, type ListTiming } from '../virtual-servers/catalog-recovery.ts'
import { VirtualServer } from '../virtual-servers/virtual-server.ts'

export interface UpstreamPlan {
  readonly name: string
  readonly requestTimeoutMs: number
  /** Makes a fresh, unstarted transport for each connection attempt. */
  readonly createTransport: () => Transport
  /** Connect on first use instead of at start. */
  readonly lazy: boolean
  /** Close the connection after this long without requests; 0 or absent keeps it open. */
  readonly idleTimeoutMs?: number
  /** Longest the connection and handshake may take. */
  readonly connectTimeoutMs?: number
  /** Most bytes the upstream may send for one request (reply and progress). */
  readonly maxCallOutputBytes?: number
  /** Legacy sessions shared by all callers (default) or one per caller identity. */
  readonly sessionScope?: 'shared' | 'identity'
  /** A confined upstream's refusal hints (sandbox/hints.ts, ADR 100); absent: unconfined. */
  readonly hints?: RefusalHints
  /** The switch that quiets the transports' lines while the upstream keeps failing (ADR 120). */
  readonly hush?: Hush
}

export interface ServerPlan {
  readonly name: string
  readonly upstreams: readonly string[]
  readonly rules: CatalogRules
}

export interface GatewayPlan {
  readonly upstreams: readonly UpstreamPlan[]
  readonly servers: readonly ServerPlan[]
  /** How long Barbican waits for a client to answer sampling, elicitation or roots/list. */
  readonly clientRequestTimeoutMs: number
  /** Most items in one page of a merged list (default 500). */
  readonly listPageSize?: number
  /** Bounds and per-caller rate of search_tools and run_code (default: DEFAULT_LIMITS'). */
  readonly metaTools?: MetaToolLimits
  /** How long a held 2026-07-28 call and a `requestState` wait for the client (default 120 s). */
  readonly heldCallTimeoutMs?: number
  /** How long lists and handshakes wait for upstreams, and how missing ones are retried. */
  readonly listTiming?: ListTiming
  /** How often pin decisions made by another process are looked for (default 2 s; tests less). */
  readonly trustPollMs?: number
  /** Policies every call passes, in the chain's fixed order (policies/chain.ts). */
  readonly policies?: readonly Policy[]
  /** Pins and scans what upstreams advertise (docs/trust.md); absent: nothing is checked. */
  readonly trust?: TrustGuard
  /** Prometheus metrics (docs/observability.md); absent: nothing is counted. */
  readonly metrics?: { readonly maxTools: number }
}

const DEFAULT_LIST_PAGE_SIZE = 500
const DEFAULT_HELD_CALL_TIMEOUT_MS = 120_000

/** How often the pin store is asked whether an operator decided something. */
const TRUST_POLL_MS = 2_000

export type { VERSION }

/** What Barbican declares to upstreams: it relays these to clients that declared them. */
const UPSTREAM_CLIENT_CAPABILITIES: JsonObject = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
}

export interface UpstreamStatus {
  readonly name: string
  /** `held`: an entry a missing `${VAR}` holds back, never started (heldStatus, ADR 121). */
  readonly state: UpstreamState | 'held'
  readonly error?: string
  /** Optional lists it answered with an error, held back alone (ADR 099); absent: none. */
  readonly heldLists?: readonly HeldList[]
}

/** The entries a missing variable holds back, as status rows: state `held`, the reason as error. */
export function heldStatus(held: readonly HeldUpstream[] | undefined): UpstreamStatus[] {
  return (held ?? []).map((h) => ({ name: h.name, state: 'held', error: h.reason }))
}

export class Gateway implements InboundHandler {
  readonly upstreams = new Map<string, Upstream>()
  readonly servers = new Map<string, VirtualServer>()
  /** The clients with something to answer: sessions, and stateless requests in flight. */
  readonly sessions = new Set<Client>()
  #plan: GatewayPlan
  /** One gate for every session: a caller's meta-tool rate spans its sessions. */
  readonly #metaTools: MetaToolGate
  #log: Logger
  /** The policy chain every session's next call takes; a reload swaps it (setPolicies). */
  #policies: LivePolicies
  /** The chain every client's calls take, composed once per generation (ADR 135). */
  #chain: LiveChain
  /**
   * What the clients of one virtual server and transport share, made once: every stateless
   * 2026-07-28 request is a client of its own and would otherwise build it per request.
   */
  #deps = new WeakMap<VirtualServer, Map<string, SessionDeps>>()
  #progress = new ProgressRouter()
  /** Held calls of 2026-07-28 clients between their rounds (src/bridge/mrtr.ts). */
  #continuations = new MemoryContinuationStore<HeldCall>()
  #bridge: MrtrBridge
  /** Upstream requests being relayed to clients, by upstream name and upstream request id. */
  #clientRequests = new Map<string, AbortController>()
  #trustTimer: NodeJS.Timeout | undefined
  /** Upstream name → virtual servers that include it. */
  #serversOf = new Map<string, VirtualServer[]>()
  /** Upstream name → connections made again after a failure (for `barbican status`). */
  #restarts = new Map<string, number>()
  /** What `/metrics` shows; undefined when the plan has no metrics. */
  readonly metrics: GatewayMetrics | undefined
  readonly serverInfo: JsonObject = {
    name: 'barbican',
    title: 'Barbican MCP gateway',
    version: VERSION,
  }

  constructor(plan: GatewayPlan, log: Logger) {
    this.#plan = plan
    this.#metaTools = new MetaToolGate(plan.metaTools ?? metaToolLimitsOf())
    this.#log = log
    this.#policies = new LivePolicies(plan.policies ?? [])
    this.#chain = new LiveChain(this.#policies, answerSender)
    this.metrics = plan.metrics
      ? new GatewayMetrics(
          {
            upstreams: () => this.upstreams.values(),
            sessions: () => this.#sessionLabels(),
            quarantined: () => plan.trust?.quarantined() ?? [],
          },
          { maxTools: plan.metrics.maxTools, version: VERSION },
        )
      : undefined
    this.#bridge = new MrtrBridge({
      sealer: new RequestStateSealer(stateKeyFromEnv()),
      store: this.#continuations,
      holdMs: plan.heldCallTimeoutMs ?? DEFAULT_HELD_CALL_TIMEOUT_MS,
      settleMs: 20,
    })
    for (const u of plan.upstreams) this.upstreams.set(u.name, this.#createUpstream(u))
    for (const s of plan.servers) {
      const members = s.upstreams.map((name) => {
        const upstream = this.upstreams.get(name)
        if (!upstream)
          throw new Error(`Virtual server "${s.name}" names unknown upstream "${name}"`)
        return upstream
      })
      const server = new VirtualServer(
        s.name,
        members,
        s.rules,
        log.child({ server: s.name }),
        plan.trust,
        plan.listTiming ?? DEFAULT_LIST_TIMING,
      )
      this.servers.set(s.name, server)
      for (const m of members) {
        const list = this.#serversOf.get(m.name) ?? []
        list.push(server)
        this.#serversOf.set(m.name, list)
      }
    }
  }

  #createUpstream(u: UpstreamPlan): Upstream {
    const upstream = new Upstream({
      name: u.name,
      log: this.#log.child({ part: 'upstream', upstream: u.name }),
      requestTimeoutMs: u.requestTimeoutMs,
      connectTimeoutMs: u.connectTimeoutMs,
      maxCallOutputBytes: u.maxCallOutputBytes,
      idleTimeoutMs: u.idleTimeoutMs,
      restartOnExit: !u.lazy,
      sessionScope: u.sessionScope,
      hints: u.hints,
      hush: u.hush,
      createTransport: u.createTransport,
      clientInfo: this.serverInfo,
      clientCapabilities: UPSTREAM_CLIENT_CAPABILITIES,
      onRequest: (up, request, owners) => this.#onUpstreamRequest(up, request, owners),
    })
    upstream.on('notification', (n: JsonRpcNotification) =>
      this.#onUpstreamNotification(upstream, n),
    )
    this.#countRestarts(upstream, this.metrics)
    return upstream
  }

  /**
   * A restart is a connection made again after the previous one failed or died; the first
   * connection, and one made again after an idle close, are not restarts.
   */
  #countRestarts(upstream: Upstream, metrics: GatewayMetrics | undefined): void {
    metrics?.addUpstream(upstream.name)
    this.#restarts.set(upstream.name, 0)
    let wasReady = false
    let broken = false
    upstream.on('state', (state) => {
      if (state === 'failed') broken = true
      if (state !== 'ready') return
      if (wasReady && broken) {
        metrics?.upstreamRestarts.labels({ upstream: upstream.name }).inc()
        this.#restarts.set(upstream.name, (this.#restarts.get(upstream.name) ?? 0) + 1)
      }
      wasReady = true
      broken = false
    })
  }

  /** Restarts of an upstream since it was configured (or last reconfigured). */
  restartsOf(name: string): number {
    return this.#restarts.get(name) ?? 0
  }

  *#sessionLabels(): Iterable<{ server: string; transport: string }> {
    for (const s of this.sessions) yield { server: s.info.server, transport: s.info.kind }
  }

  /**
   * Connects every upstream that is not lazy; failures are logged and retried in the background
   * with the backoff until they succeed.
   */
  async start(): Promise<void> {
    if (this.#plan.trust) {
      await this.#plan.trust.load()
      // Decisions made with `barbican pins` in another process reach clients within seconds.
      this.#trustTimer = setInterval(() => {
        for (const server of this.servers.values()) server.refreshTrust().catch(() => {})
      }, this.#plan.trustPollMs ?? TRUST_POLL_MS)
      this.#trustTimer.unref()
    }
    const eager = this.#plan.upstreams.filter((u) => !u.lazy)
    await Promise.all(eager.map((u) => this.upstreams.get(u.name)!.start()))
  }

  async stop(): Promise<void> {
    clearInterval(this.#trustTimer)
    for (const server of this.servers.values()) server.stop()
    await this.#continuations.clear()
    for (const session of this.sessions) await session.transport.close().catch(() => {})
    await Promise.allSettled([...this.upstreams.values()].map((u) => u.stop()))
  }

  /**
   * Removes an upstream from the running gateway: it leaves every virtual server at once (open
   * sessions see it gone at their next request, and are told their lists changed), and its
   * connection is closed, which fails the calls still in flight on it.
   */
  async removeUpstream(name: string): Promise<boolean> {
    const upstream = this.upstreams.get(name)
    if (!upstream) return false
    for (const server of this.#serversOf.get(name) ?? []) server.removeUpstream(name)
    this.#serversOf.delete(name)
    this.upstreams.delete(name)
    this.#restarts.delete(name)
    await upstream.stop()
    return true
  }

  /**
   * Replaces an upstream's plan (a rotated secret, a new command) on the running gateway: the
   * old connection is closed, failing the calls in flight on it, and every session's next
   * request reaches the upstream through the new plan. Returns false for an unknown name.
   */
  async replaceUpstream(plan: UpstreamPlan): Promise<boolean> {
    const old = this.upstreams.get(plan.name)
    if (!old) return false
    const fresh = this.#createUpstream(plan)
    this.upstreams.set(plan.name, fresh)
    for (const server of this.#serversOf.get(plan.name) ?? []) server.replaceUpstream(fresh)
    await old.stop()
    if (!plan.lazy) void fresh.start()
    return true
  }

  /**
   * Adds an upstream to the running gateway (a reloaded configuration names it): it belongs to
   * no virtual server until `reconfigureServer` lists it. Returns false for a name in use.
   */
  addUpstream(plan: UpstreamPlan): boolean {
    if (this.upstreams.has(plan.name)) return false
    const fresh = this.#createUpstream(plan)
    this.upstreams.set(plan.name, fresh)
    if (!plan.lazy) void fresh.start()
    return true
  }

  /**
   * Gives a running virtual server new members and rules (a reloaded configuration): its
   * sessions stay open and are told their lists changed. Returns false for an unknown server;
   * throws for an unknown upstream (the caller adds upstreams first).
   */
  reconfigureServer(plan: ServerPlan): boolean {
    const server = this.servers.get(plan.name)
    if (!server) return false
    const members = plan.upstreams.map((name) => {
      const upstream = this.upstreams.get(name)
      if (!upstream)
        throw new Error(`Virtual server "${plan.name}" names unknown upstream "${name}"`)
      return upstream
    })
    for (const [name, list] of this.#serversOf) {
      this.#serversOf.set(
        name,
        list.filter((v) => v !== server),
      )
    }
    for (const m of members) {
      const list = this.#serversOf.get(m.name) ?? []
      list.push(server)
      this.#serversOf.set(m.name, list)
    }
    server.reconfigure(members, plan.rules)
    return true
  }

  /**
   * Replaces the policy chain (a reloaded configuration, already validated): every call that
   * starts from now on, in every open session and on every transport, runs `policies`; a call
   * in flight finishes on the chain it started with. Returns the replaced generation, which
   * closes once its last call has ended.
   */
  setPolicies(policies: readonly Policy[]): PolicyGeneration {
    const generation = this.#policies.swap(policies)
    // What each caller may see can differ under the new policies (and a search-mode server's
    // tools/list names the caller's tools, ADR 126): every open session is told to list again.
    for (const server of this.servers.values()) server.viewsChanged()
    return generation
  }

  /** The policies calls entering now run (the current generation's). */
  get policies(): readonly Policy[] {
    return this.#policies.current.policies
  }

  /** The pin guard of the running gateway, when trust is on. */
  get trust(): TrustGuard | undefined {
    return this.#plan.trust
  }

  hasServer(name: string): boolean {
    return this.servers.has(name)
  }

  connect(transport: Transport, info: ConnectionInfo): void {
    const server = this.servers.get(info.server)
    if (!server) {
      void transport.close()
      return
    }
    const session = clientFor(transport, info, this.#depsOf(server, info))
    this.sessions.add(session)
  }

  #depsOf(server: VirtualServer, info: ConnectionInfo): SessionDeps {
    let byKind = this.#deps.get(server)
    if (byKind === undefined) {
      byKind = new Map()
      this.#deps.set(server, byKind)
    }
    let deps = byKind.get(info.kind)
    if (deps === undefined) {
      deps = {
        server,
        progress: this.#progress,
        log: this.#log.child({ part: 'session', server: info.server, transport: info.kind }),
        serverInfo: this.serverInfo,
        clientRequestTimeoutMs: this.#plan.clientRequestTimeoutMs,
        onClose: (s) => this.sessions.delete(s),
        policies: this.#policies,
        bridge: this.#bridge,
        listPageSize: this.#plan.listPageSize ?? DEFAULT_LIST_PAGE_SIZE,
        metrics: this.metrics?.forServer(info.server),
        metaTools: this.#metaTools,
        exchange,
        relay: answer,
        chain: this.#chain,
      }
      byKind.set(info.kind, deps)
    }
    return deps
  }

  /** Readiness: every upstream's state, for /readyz and `barbican check`. */
  status(): UpstreamStatus[] {
    return [...this.upstreams.values()].map((u) => ({
      name: u.name,
      state: u.state,
      ...(u.lastError ? { error: u.lastError } : {}),
      ...(u.heldLists.length > 0 ? { heldLists: u.heldLists } : {}),
    }))
  }

  #sessionsOf(upstream: Upstream): Client[] {
    const servers = this.#serversOf.get(upstream.name) ?? []
    return [...this.sessions].filter((s) => servers.some((v) => v.name === s.info.server))
  }

  /**
   * Told of every list change and resource update this replica's upstreams report, so that the
   * other replicas of a fleet tell their clients too (src/app/fleet.ts). Unset: one process.
   */
  onUpstreamChange: ((upstream: string, n: JsonRpcNotification) => void) | undefined

  /**
   * Told when an operator decided on pins through this replica (the console), so the other
   * replicas of a fleet re-read the pin store at once (src/app/fleet.ts). Unset: one process.
   */
  onTrustDecision: (() => void) | undefined

  /**
   * Names this replica of a fleet in the state of every 2026-07-28 call it holds, so that a
   * retry landing on another replica is relayed here (docs/decisions/081).
   */
  set replica(id: string | undefined) {
    this.#bridge.replica = id
  }

  /** The replica holding the call a retry's `requestState` names, if another one sealed it. */
  heldCallOwner(requestState: unknown): string | undefined {
    return this.#bridge.heldBy(requestState)
  }

  /**
   * The headers `request` (a 2026-07-28 request received on a WebSocket) would carry as an
   * HTTP POST to the virtual server `server`: what its holder checks when a retry is relayed
   * there (docs/decisions/088). `Mcp-Param-*` follow the tool's schema in this server's catalog,
   * the one the receiving side checks them against.
   */
  async retryHeaders(server: string, request: JsonRpcRequest): Promise<Record<string, string>> {
    const params = request.params
    let schema: JsonObject | undefined
    const view = this.servers.get(server)
    if (request.method === 'tools/call' && view !== undefined) {
      const { catalog } = await view.catalog()
      const tool = catalog.tools.find((t) => t.name === params?.name)
      if (isPlainObject(tool?.inputSchema)) schema = tool.inputSchema
    }
    const meta = params?._meta
    const claim = isPlainObject(meta) ? meta['io.modelcontextprotocol/protocolVersion'] : undefined
    return {
      ...modernHeaders(request.method, params, schema),
      ...(typeof claim === 'string' ? { 'mcp-protocol-version': claim } : {}),
    }
  }

  /** Another replica or the CLI decided on pins: clients' lists follow now, not at the poll. */
  async trustChangedElsewhere(): Promise<void> {
    await Promise.allSettled([...this.servers.values()].map((s) => s.refreshTrust(true)))
  }

  /** A list change or resource update another replica's connection to `upstream` reported. */
  applyPeerChange(upstream: string, n: JsonRpcNotification): void {
    const target = this.upstreams.get(upstream)
    if (target === undefined) return
    if (n.method === 'notifications/resources/updated') {
      for (const s of this.#sessionsOf(target)) s.forwardResourceUpdated(upstream, n.params)
    } else target.listsChangedElsewhere(n.method)
  }

  #onUpstreamNotification(upstream: Upstream, n: JsonRpcNotification): void {
    if (
      this.onUpstreamChange !== undefined &&
      (n.method === 'notifications/resources/updated' || LIST_CHANGED[n.method] !== undefined)
    )
      this.onUpstreamChange(upstream.name, n)
    switch (n.method) {
      case 'notifications/progress':
        this.#progress.route(n.params)
        return
      case 'notifications/message':
        {
          const sessions = this.#sessionsOf(upstream)
          // A 2026 request that set _meta logLevel gets the upstream's logs on its own stream,
          // but only when it is the one such request on that upstream (no cross-client leak).
          const asking = sessions.filter((s) => s.logRequestsTo(upstream.name) > 0)
          const only = asking[0]
          if (asking.length === 1 && only?.logRequestsTo(upstream.name) === 1) {
            only.forwardRequestLog(upstream.name, n.params)
          }
          for (const s of sessions) s.forwardLog(upstream.name, n.params)
        }
        return
      case 'notifications/cancelled': {
        // The upstream withdrew a request it sent to a client through us.
        const id = n.params?.requestId
        this.#clientRequests.get(`${upstream.name}\u0000${String(id)}`)?.abort()
        return
      }
      case 'notifications/tasks/status':
        for (const s of this.#sessionsOf(upstream)) s.forwardTaskStatus(upstream.name, n.params)
        return
      case 'notifications/resources/updated':
        for (const s of this.#sessionsOf(upstream))
          s.forwardResourceUpdated(upstream.name, n.params)
        return
      default:
        // list_changed reaches sessions through their virtual server's catalog events.
        return
    }
  }

  /** See docs/decisions/005-upstream-request-attribution.md. */
  async #onUpstreamRequest(
    upstream: Upstream,
    request: JsonRpcRequest,
    owning: readonly CallOwner[],
  ): Promise<UpstreamReply> {
    if (request.method === 'ping')
      return { kind: 'result', id: request.id, resultType: 'complete', result: {} }
    // A held call parked until its 2026 client retries (src/bridge/held-call.ts) is waiting on
    // its own questions; a new upstream request belongs to one of the other calls if any.
    const active = owning.filter((c) => c.session.parked !== true)
    const calls = active.length > 0 ? active : owning
    const sessions = new Set(calls.map((c) => c.session))
    if (sessions.size === 1) {
      const call = calls[0]!
      const key = `${upstream.name}\u0000${String(request.id)}`
      const controller = new AbortController()
      this.#clientRequests.set(key, controller)
      try {
        return await call.session.requestClient(
          request,
          call.requestId,
          controller.signal,
          upstream.name,
        )
      } finally {
        this.#clientRequests.delete(key)
      }
    }
    const reason =
      sessions.size === 0
        ? 'no client call is in flight on this upstream'
        : 'calls of several clients are in flight on this upstream, so the request cannot be attributed'
    // A server asking for roots while it starts, before any call, is routine: the server
    // carries on without them, and the client's roots reach it with its first call.
    const routine = sessions.size === 0 && request.method === 'roots/list'
    this.#log.child({ part: 'upstream' })[routine ? 'debug' : 'warn']('upstream request refused', {
      upstream: upstream.name,
      method: request.method,
      reason,
    })
    return {
      kind: 'error',
      id: request.id,
      code: -32603,
      message: `Barbican cannot deliver ${request.method}: ${reason}`,
    }
  }
}
