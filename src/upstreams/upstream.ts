/**
 * One upstream MCP server as the gateway sees it: its connection (made on demand, remade after
 * a failure with growing delays), the legacy handshake run on Barbican's behalf, what the server
 * advertised, and its cached lists, refreshed when the server says they changed.
 */
import { EventEmitter } from 'node:events'
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
  /** Makes a fresh, unstarted transport for each connection attempt. */
  readonly createTransport: () => Transport
  /** What Barbican declares to upstreams in `initialize`. */
  readonly clientInfo: JsonObject
  readonly clientCapabilities: JsonObject
  /** Answers upstream → client requests (sampling, elicitation, roots/list). */
  readonly onRequest: (
    upstream: Upstream,
    request: JsonRpcRequest,
    owners: readonly unknown[],
  ) => Promise<UpstreamReply>
}

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

  async #open(): Promise<UpstreamClient> {
    const { log } = this.#options
    const transport = this.#options.createTransport()
    const client = new UpstreamClient(this.name, transport, {
      log,
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
      this.#info = info
      this.#client = client
      this.#connectedAt = Date.now()
      this.#retryAt = 0
      this.#lastError = undefined
      this.#lists.clear()
      this.#setState('ready')
      log.info('upstream ready', {
        protocolVersion: version,
        server: info.serverInfo.name,
      })
      return client
    } catch (err) {
      await client.close().catch(() => {})
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

  /** Sends a request, connecting first if needed. */
  async request(method: string, params: JsonObject | undefined, options?: RequestOptions) {
    clearTimeout(this.#idleTimer)
    const client = await this.connect()
    try {
      return await client.request(method, params, options)
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
    const client = this.#client
    this.#client = undefined
    this.#setState('stopped')
    if (client) await client.close()
  }
}
