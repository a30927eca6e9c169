/**
 * One upstream MCP server as the gateway sees it: its connection (made on demand, remade after
 * a failure with growing delays), the legacy handshake run on Barbican's behalf, what the server
 * advertised, and its cached lists, refreshed when the server says they changed.
 */
import { EventEmitter } from 'node:events'
import {
  MODERN_UPSTREAM_REVISION,
  modernHeaders,
  type UpstreamEnvelope,
  withEnvelope,
  xMcpHeaderProblem,
} from '../bridge/envelope.ts'
import { type EraVerdict, probeEra } from '../bridge/probe.ts'
import { BarbicanError } from '../errors.ts'
import type { Logger } from '../log.ts'
import {
  isPlainObject,
  type JsonObject,
  type JsonRpcNotification,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import { isRevision, LATEST_LEGACY_REVISION, type Revision } from '../protocol/revisions.ts'
import type { Transport } from '../transports/transport.ts'
import { type RequestOptions, UpstreamClient, type UpstreamReply } from './upstream-client.ts'

export type UpstreamState = 'idle' | 'connecting' | 'ready' | 'failed' | 'stopped'

export type ListKey = 'tools' | 'prompts' | 'resources' | 'resourceTemplates'

const LIST_METHODS: Readonly<Record<ListKey, { method: string; capability: string }>> = {
  tools: { method: 'tools/list', capability: 'tools' },
  prompts: { method: 'prompts/list', capability: 'prompts' },
  resources: { method: 'resources/list', capability: 'resources' },
  resourceTemplates: { method: 'resources/templates/list', capability: 'resources' },
}

const LIST_CHANGED: Readonly<Record<string, readonly ListKey[]>> = {
  'notifications/tools/list_changed': ['tools'],
  'notifications/prompts/list_changed': ['prompts'],
  'notifications/resources/list_changed': ['resources', 'resourceTemplates'],
}

/** Most pages fetched from one upstream list before giving up (a server looping its cursors). */
const MAX_PAGES = 100

/**
 * Reconnect delays: the first retry is immediate (a crash is usually a one-off), then doubling
 * from the base to the cap. A connection that stayed up this long resets the count.
 */
const RECONNECT_BASE_MS = 250
const RECONNECT_CAP_MS = 30_000
const STABLE_AFTER_MS = 10_000

export interface UpstreamOptions {
  readonly name: string
  readonly log: Logger
  readonly requestTimeoutMs: number
  /** Longest the connection and handshake may take (default: requestTimeoutMs). */
  readonly connectTimeoutMs?: number | undefined
  /**
   * Close the connection (stop a stdio process) after this long without a request in flight;
   * 0 keeps it open. Cached lists survive, so listing does not restart the process.
   */
  readonly idleTimeoutMs?: number | undefined
  /**
   * Reconnect by itself after the connection dies (eager upstreams), after the backoff delay,
   * instead of waiting for the next request.
   */
  readonly restartOnExit?: boolean | undefined
  /**
   * 'identity': each caller identity gets its own legacy session (its own initialize, and for
   * stdio its own process), so upstream state and upstream→client requests never mix between
   * users; anonymous callers and Barbican's own requests use the shared one. Default 'shared'.
   */
  readonly sessionScope?: 'shared' | 'identity' | undefined
  /** Makes a fresh, unstarted transport for each connection attempt. */
  readonly createTransport: () => Transport
  /** What Barbican declares to upstreams in `initialize`. */
  readonly clientInfo: JsonObject
  readonly clientCapabilities: JsonObject
  /** How long the `server/discover` era probe waits (bridge/probe.ts default when absent). */
  readonly probeTimeoutMs?: number | undefined
  /** Answers upstream → client requests (sampling, elicitation, roots/list). */
  readonly onRequest: (
    upstream: Upstream,
    request: JsonRpcRequest,
    owners: readonly unknown[],
  ) => Promise<UpstreamReply>
}

/** Per-request facts for a 2026-07-28 upstream; Barbican's own when the caller gives none. */
export interface ModernRequestOptions extends RequestOptions {
  readonly envelope?: UpstreamEnvelope | undefined
  /** The caller's identity key, for per-identity legacy sessions (`sessionScope: 'identity'`). */
  readonly sessionKey?: string | undefined
}

/** How long an unused per-identity legacy session stays open. */
const IDENTITY_SESSION_IDLE_MS = 300_000

export interface UpstreamInfo {
  readonly protocolVersion: Revision
  readonly capabilities: JsonObject
  readonly serverInfo: JsonObject
  readonly instructions?: string
}

/**
 * Events: 'listChanged' (keys: ListKey[]), 'notification' (JsonRpcNotification),
 * 'state' (UpstreamState).
 */
export class Upstream extends EventEmitter {
  readonly name: string
  #options: UpstreamOptions
  #client: UpstreamClient | undefined
  #connecting: Promise<UpstreamClient> | undefined
  #info: UpstreamInfo | undefined
  #state: UpstreamState = 'idle'
  #lastError: string | undefined
  #failures = 0
  #retryAt = 0
  #connectedAt = 0
  #idleTimer: NodeJS.Timeout | undefined
  #idleClosing = false
  #restartTimer: NodeJS.Timeout | undefined
  #lists = new Map<ListKey, Promise<JsonObject[]>>()
  #stopped = false
  /** The era verdict, kept across reconnects (era is a property of the server). */
  #verdict: EraVerdict | undefined
  /** Tool name → input schema, for `Mcp-Param-*` headers on the 2026 hop. */
  #toolSchemas = new Map<string, JsonObject>()
  /** Legacy clients' resource subscriptions toward a 2026 upstream: URI → subscriber count. */
  #watched = new Map<string, number>()
  #watchStream: AbortController | undefined
  /** Per-identity legacy sessions (sessionScope 'identity'), opened on first use. */
  #identitySessions = new Map<string, Promise<UpstreamClient>>()
  #identityTimers = new Map<string, NodeJS.Timeout>()

  constructor(options: UpstreamOptions) {
    super()
    this.name = options.name
    this.#options = options
  }

  get state(): UpstreamState {
    return this.#state
  }
  get lastError(): string | undefined {
    return this.#lastError
  }
  get info(): UpstreamInfo | undefined {
    return this.#info
  }
  /** The upstream's era once probed: 'modern' upstreams are spoken to statelessly. */
  get era(): 'legacy' | 'modern' | undefined {
    return this.#verdict?.era
  }

  /** Connects (once at a time) and runs the handshake; fails fast while backing off. */
  async connect(): Promise<UpstreamClient> {
    if (this.#client && !this.#client.closed) return this.#client
    if (this.#connecting) return this.#connecting
    if (this.#stopped) throw new BarbicanError('ERR_SHUTTING_DOWN', 'Barbican is shutting down')
    const wait = this.#retryAt - Date.now()
    if (wait > 0) {
      throw new BarbicanError(
        'ERR_UPSTREAM_UNAVAILABLE',
        `Upstream "${this.name}" is unavailable (${this.#lastError ?? 'failed'}); next attempt in ${wait} ms`,
      )
    }
    this.#setState('connecting')
    this.#connecting = this.#open().finally(() => {
      this.#connecting = undefined
    })
    return this.#connecting
  }

  /** A client on a fresh transport, started. */
  async #newClient(): Promise<UpstreamClient> {
    const transport = this.#options.createTransport()
    const client = new UpstreamClient(this.name, transport, {
      log: this.#options.log,
      timeoutMs: this.#options.requestTimeoutMs,
      revision: LATEST_LEGACY_REVISION,
      events: {
        onNotification: (n) => this.#onNotification(n),
        onRequest: (request, owners) => this.#options.onRequest(this, request, owners),
        onClose: () => this.#onClose(client),
      },
    })
    try {
      await transport.start()
    } catch (err) {
      await client.close().catch(() => {})
      throw err
    }
    return client
  }

  /** Barbican's own envelope, for requests made on nobody's behalf (lists, discover). */
  #ownEnvelope(): UpstreamEnvelope {
    return {
      clientCapabilities: this.#options.clientCapabilities,
      clientInfo: this.#options.clientInfo,
    }
  }

  /**
   * Probes a server of unknown era with `server/discover` (bridge/probe.ts). Returns the client
   * to continue with: the same one, or a fresh connection when the server closed on the probe.
   */
  async #probe(client: UpstreamClient): Promise<UpstreamClient> {
    client.setRevision(MODERN_UPSTREAM_REVISION)
    const verdict = await probeEra(
      (timeoutMs) =>
        client.request('server/discover', withEnvelope(undefined, this.#ownEnvelope()), {
          timeoutMs,
          send: { headers: modernHeaders('server/discover', undefined) } as RequestOptions['send'],
        }),
      this.#options.probeTimeoutMs,
    )
    this.#verdict = verdict
    this.#options.log.info('upstream era', {
      era: verdict.era,
      ...(verdict.era === 'legacy' ? { reason: verdict.reason } : {}),
    })
    if (verdict.era === 'modern') return client
    client.setRevision(LATEST_LEGACY_REVISION)
    if (!verdict.closed && !client.closed) return client
    await client.close().catch(() => {})
    return await this.#newClient()
  }

  /** A 2026-07-28 upstream is ready after discover; it listens for list changes upstream. */
  #readyModern(client: UpstreamClient, verdict: EraVerdict & { era: 'modern' }): UpstreamClient {
    const d = verdict.discover
    const info: UpstreamInfo = {
      protocolVersion: MODERN_UPSTREAM_REVISION,
      capabilities: isPlainObject(d.capabilities) ? d.capabilities : {},
      serverInfo: verdict.serverInfo,
      ...(typeof d.instructions === 'string' ? { instructions: d.instructions } : {}),
    }
    this.#becomeReady(client, info)
    this.#listenUpstream(client, info.capabilities)
    // Watches outlive a reconnect: reopen the resource listen stream on the new connection.
    if (this.#watched.size > 0) this.#openWatchStream()
    return client
  }

  /**
   * Opens a `subscriptions/listen` stream so the modern upstream's list changes reach Barbican
   * like a legacy server's notifications; it lives as long as the connection.
   */
  #listenUpstream(client: UpstreamClient, capabilities: JsonObject): void {
    const notifications: JsonObject = {}
    if (hasCapability(capabilities, ['tools', 'listChanged'])) notifications.toolsListChanged = true
    if (hasCapability(capabilities, ['prompts', 'listChanged'])) {
      notifications.promptsListChanged = true
    }
    if (hasCapability(capabilities, ['resources', 'listChanged'])) {
      notifications.resourcesListChanged = true
    }
    if (Object.keys(notifications).length === 0) return
    const params = withEnvelope({ notifications }, this.#ownEnvelope())
    client
      .request('subscriptions/listen', params, {
        timeoutMs: 2 ** 31 - 1,
        send: { headers: modernHeaders('subscriptions/listen', params) } as RequestOptions['send'],
      })
      .catch(() => {})
  }

  #becomeReady(client: UpstreamClient, info: UpstreamInfo): void {
    this.#info = info
    this.#client = client
    this.#connectedAt = Date.now()
    this.#retryAt = 0
    this.#lastError = undefined
    this.#lists.clear()
    this.#setState('ready')
    this.#options.log.info('upstream ready', {
      protocolVersion: info.protocolVersion,
      server: info.serverInfo.name,
    })
  }

  async #open(): Promise<UpstreamClient> {
    let client: UpstreamClient | undefined
    try {
      client = await this.#newClient()
      if (this.#verdict?.era !== 'legacy') {
        client = await this.#probe(client)
        const verdict = this.#verdict
        if (verdict?.era === 'modern') return this.#readyModern(client, verdict)
      }
      const info = await this.#initialize(client)
      this.#becomeReady(client, info)
      return client
    } catch (err) {
      await client?.close().catch(() => {})
      this.#fail(err)
      throw err instanceof BarbicanError
        ? err
        : new BarbicanError(
            'ERR_UPSTREAM_UNAVAILABLE',
            `Cannot connect to upstream "${this.name}": ${(err as Error).message}`,
            { cause: err },
          )
    }
  }

  /** The legacy handshake on `client`, on Barbican's behalf. */
  async #initialize(client: UpstreamClient): Promise<UpstreamInfo> {
    const reply = await client.request(
      'initialize',
      {
        protocolVersion: LATEST_LEGACY_REVISION,
        capabilities: this.#options.clientCapabilities,
        clientInfo: this.#options.clientInfo,
      },
      { timeoutMs: this.#options.connectTimeoutMs },
    )
    if (reply.kind === 'error') {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${this.name}" refused initialize: ${reply.message} (${reply.code})`,
      )
    }
    const r = reply.result
    const version = r.protocolVersion
    if (!isRevision(version)) {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${this.name}" answered initialize with unsupported protocol version ${JSON.stringify(version)}`,
      )
    }
    client.setRevision(version)
    const info: UpstreamInfo = {
      protocolVersion: version,
      capabilities: isPlainObject(r.capabilities) ? r.capabilities : {},
      serverInfo: isPlainObject(r.serverInfo) ? r.serverInfo : {},
      ...(typeof r.instructions === 'string' ? { instructions: r.instructions } : {}),
    }
    await client.notify('notifications/initialized')
    return info
  }

  /**
   * The caller's own legacy session (sessionScope 'identity'), opened on first use with its own
   * handshake and closed after IDENTITY_SESSION_IDLE_MS unused.
   */
  async #identitySession(key: string): Promise<UpstreamClient> {
    let opening = this.#identitySessions.get(key)
    const open = opening ? await opening.catch(() => undefined) : undefined
    if (!open || open.closed) {
      opening = (async () => {
        const client = await this.#newClient()
        try {
          await this.#initialize(client)
          return client
        } catch (err) {
          await client.close().catch(() => {})
          throw err
        }
      })()
      this.#identitySessions.set(key, opening)
      opening.catch(() => this.#identitySessions.delete(key))
    }
    const client = await opening!
    clearTimeout(this.#identityTimers.get(key))
    const timer = setTimeout(() => {
      if (client.inFlight > 0) return
      this.#identitySessions.delete(key)
      this.#identityTimers.delete(key)
      void client.close()
    }, IDENTITY_SESSION_IDLE_MS)
    timer.unref()
    this.#identityTimers.set(key, timer)
    return client
  }

  #fail(err: unknown): void {
    this.#failures++
    const delay =
      this.#failures <= 1
        ? 0
        : Math.min(RECONNECT_CAP_MS, RECONNECT_BASE_MS * 2 ** (this.#failures - 2))
    this.#retryAt = Date.now() + delay
    this.#lastError = err instanceof Error ? err.message : String(err)
    this.#setState('failed')
    this.#options.log.warn('upstream failed', { error: this.#lastError, retryInMs: delay })
  }

  #onClose(client: UpstreamClient): void {
    if (this.#client !== client) return
    this.#client = undefined
    if (this.#idleClosing) {
      // Closed by us for idleness: nothing failed, and the lists are still what it offers.
      this.#idleClosing = false
      this.#setState('idle')
      return
    }
    this.#lists.clear()
    if (this.#stopped) return
    // An upstream that dies is retried at once, then with growing delays if it keeps dying.
    if (Date.now() - this.#connectedAt >= STABLE_AFTER_MS) this.#failures = 0
    this.#fail(new Error('connection closed'))
    if (this.#options.restartOnExit) this.#scheduleRestart()
    this.emit('listChanged', [
      'tools',
      'prompts',
      'resources',
      'resourceTemplates',
    ] satisfies ListKey[])
  }

  #scheduleRestart(): void {
    clearTimeout(this.#restartTimer)
    this.#restartTimer = setTimeout(
      () => {
        if (this.#stopped || this.#client) return
        this.connect().catch(() => {
          // #fail recorded it and grew the delay; keep trying in the background.
          if (!this.#stopped) this.#scheduleRestart()
        })
      },
      Math.max(0, this.#retryAt - Date.now()),
    )
    this.#restartTimer.unref()
  }

  #setState(state: UpstreamState): void {
    if (this.#state === state) return
    this.#state = state
    this.emit('state', state)
  }

  #onNotification(notification: JsonRpcNotification): void {
    const keys = LIST_CHANGED[notification.method]
    if (keys) {
      for (const key of keys) this.#lists.delete(key)
      this.emit('listChanged', keys)
    }
    this.emit('notification', notification)
  }

  /**
   * Sends a request, connecting first if needed. To a 2026-07-28 upstream it goes stateless:
   * the envelope (the caller's, else Barbican's own) in `_meta` and the routing headers.
   */
  async request(method: string, params: JsonObject | undefined, options?: ModernRequestOptions) {
    clearTimeout(this.#idleTimer)
    const client = await this.connect()
    try {
      if (
        options?.sessionKey !== undefined &&
        this.#options.sessionScope === 'identity' &&
        this.#verdict?.era === 'legacy'
      ) {
        const own = await this.#identitySession(options.sessionKey)
        return await own.request(method, params, options)
      }
      if (this.#verdict?.era !== 'modern') return await client.request(method, params, options)
      const out = withEnvelope(params, options?.envelope ?? this.#ownEnvelope())
      const name = method === 'tools/call' ? params?.name : undefined
      const schema = typeof name === 'string' ? this.#toolSchemas.get(name) : undefined
      const headers = modernHeaders(method, out, schema)
      return await client.request(method, out, {
        ...options,
        send: { ...options?.send, headers } as RequestOptions['send'],
      })
    } finally {
      this.#armIdleTimer(client)
    }
  }

  #armIdleTimer(client: UpstreamClient): void {
    const idleMs = this.#options.idleTimeoutMs ?? 0
    if (idleMs <= 0 || client.inFlight > 0) return
    clearTimeout(this.#idleTimer)
    this.#idleTimer = setTimeout(() => {
      if (this.#client !== client || client.inFlight > 0) return
      this.#options.log.info('upstream idle; closing', { idleMs })
      this.#idleClosing = true
      void client.close()
    }, idleMs)
    this.#idleTimer.unref()
  }

  /**
   * A legacy `resources/subscribe` (or unsubscribe) toward a 2026-07-28 upstream, which has no
   * such method: Barbican keeps one listen stream naming every watched URI and, since a listen
   * filter cannot be edited, reopens it when the set changes (an update landing in that gap is
   * lost).
   */
  watchResource(uri: string, watch: boolean): void {
    const count = (this.#watched.get(uri) ?? 0) + (watch ? 1 : -1)
    if (count > 0) this.#watched.set(uri, count)
    else this.#watched.delete(uri)
    this.#openWatchStream()
  }

  #openWatchStream(): void {
    this.#watchStream?.abort()
    this.#watchStream = undefined
    const client = this.#client
    if (!client || client.closed || this.#watched.size === 0) return
    const controller = new AbortController()
    this.#watchStream = controller
    const params = withEnvelope(
      { notifications: { resourceSubscriptions: [...this.#watched.keys()] } },
      this.#ownEnvelope(),
    )
    client
      .request('subscriptions/listen', params, {
        signal: controller.signal,
        timeoutMs: 2 ** 31 - 1,
        send: { headers: modernHeaders('subscriptions/listen', params) } as RequestOptions['send'],
      })
      .catch(() => {})
  }

  async notify(method: string, params?: JsonObject): Promise<void> {
    const client = this.#client
    if (client && !client.closed) await client.notify(method, params)
  }

  /** The complete list (all pages), cached until the server signals a change. */
  async list(key: ListKey): Promise<JsonObject[]> {
    const known = this.#lists.get(key)
    if (known && this.#info) return await known
    await this.connect()
    const { method, capability } = LIST_METHODS[key]
    if (!hasCapability(this.#info?.capabilities, [capability])) return []
    let cached = this.#lists.get(key)
    if (!cached) {
      cached = this.#fetchAll(method, key)
      this.#lists.set(key, cached)
      cached.catch(() => this.#lists.delete(key))
    }
    return await cached
  }

  async #fetchAll(method: string, key: ListKey): Promise<JsonObject[]> {
    const items: JsonObject[] = []
    let cursor: string | undefined
    for (let page = 0; page < MAX_PAGES; page++) {
      const reply = await this.request(method, cursor === undefined ? undefined : { cursor })
      if (reply.kind === 'error') {
        throw new BarbicanError(
          'ERR_UPSTREAM_PROTOCOL',
          `Upstream "${this.name}" failed ${method}: ${reply.message}`,
        )
      }
      const pageItems = reply.result[key]
      if (Array.isArray(pageItems))
        for (const item of pageItems) if (isPlainObject(item)) items.push(item)
      if (key === 'tools' && this.#verdict?.era === 'modern') {
        // A 2026 client must leave out tools whose header annotations are invalid.
        for (let i = items.length - 1; i >= 0; i--) {
          const problem = xMcpHeaderProblem(items[i]?.inputSchema)
          if (problem === undefined) continue
          this.#options.log.warn('tool dropped: invalid x-mcp-header', {
            tool: items[i]?.name,
            problem,
          })
          items.splice(i, 1)
        }
      }
      if (key === 'tools') {
        for (const tool of items) {
          if (typeof tool.name === 'string' && isPlainObject(tool.inputSchema)) {
            this.#toolSchemas.set(tool.name, tool.inputSchema)
          }
        }
      }
      const next = reply.result.nextCursor
      if (typeof next !== 'string' || next === '') return items
      cursor = next
    }
    throw new BarbicanError(
      'ERR_UPSTREAM_PROTOCOL',
      `Upstream "${this.name}" returned more than ${MAX_PAGES} pages for ${method}`,
    )
  }

  async stop(): Promise<void> {
    this.#stopped = true
    clearTimeout(this.#idleTimer)
    clearTimeout(this.#restartTimer)
    for (const timer of this.#identityTimers.values()) clearTimeout(timer)
    const own = [...this.#identitySessions.values()]
    this.#identitySessions.clear()
    await Promise.allSettled(own.map(async (c) => (await c).close()))
    const client = this.#client
    this.#client = undefined
    this.#setState('stopped')
    if (client) await client.close()
  }
}
