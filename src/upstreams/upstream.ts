/**
 * One upstream MCP server as the gateway sees it: its connection (made on demand, remade after
 * a failure with growing delays), the legacy handshake run on Barbican's behalf, what the server
 * advertised, and its cached lists, refreshed when the server says they changed.
 */
import { EventEmitter } from 'node:events'
import { modernHeaders, type UpstreamEnvelope, withEnvelope } from '../bridge/envelope.ts'
import type { EraVerdict } from '../bridge/probe.ts'
import { BarbicanError } from '../common/errors.ts'
import type { JsonObject, JsonRpcNotification, JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { hasCapability } from '../protocol/methods.ts'
import { LATEST_LEGACY_REVISION } from '../protocol/revisions.ts'
import type { RefusalHints } from '../sandbox/hints.ts'
import { Hush, type Logger } from '../telemetry/log.ts'
import type { Transport } from '../transports/transport.ts'
import { IdentitySessions } from './identity-sessions.ts'
import { RECONNECT_CAP_MS, reconnectDelay, STABLE_AFTER_MS } from './reconnect-backoff.ts'
import {
  type CallOwner,
  type RequestOptions,
  UpstreamClient,
  type UpstreamReply,
} from './upstream-client.ts'
import {
  initializeLegacy,
  isModernRefusal,
  modernInfo,
  ownEnvelope,
  probeUpstream,
  type UpstreamInfo,
} from './upstream-handshake.ts'
import { listenForListChanges, ResourceWatches } from './upstream-listens.ts'
import {
  ALL_LIST_KEYS,
  fetchAllPages,
  type HeldList,
  LIST_CHANGED,
  LIST_METHODS,
  type ListKey,
  listAnsweredBadly,
  OPTIONAL_LISTS,
} from './upstream-lists.ts'

/** Re-exported: the virtual server and the gateway know these as the Upstream's own. */
export type { HeldList, ListKey, UpstreamInfo }

/** Where the connection stands; 'failed' means backing off until the next attempt. */
export type UpstreamState = 'idle' | 'connecting' | 'ready' | 'failed' | 'stopped'

/** One upstream's configuration, as the gateway plan builds it. */
export interface UpstreamOptions {
  readonly name: string
  readonly log: Logger
  readonly requestTimeoutMs: number
  /** Longest the connection and handshake may take (default: requestTimeoutMs). */
  readonly connectTimeoutMs?: number | undefined
  /** Most bytes the upstream may send for one request (default 16 MiB; UpstreamClient). */
  readonly maxCallOutputBytes?: number | undefined
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
  /** A confined upstream's refusal hints (sandbox/hints.ts, ADR 100); absent: unconfined. */
  readonly hints?: RefusalHints | undefined
  /**
   * Turned on while the upstream keeps failing, so the lines of its retries drop to debug; the
   * plan wraps the transports' logger in the same switch (ADR 120). Absent: the upstream's own.
   */
  readonly hush?: Hush | undefined
  /** What Barbican declares to upstreams in `initialize`. */
  readonly clientInfo: JsonObject
  readonly clientCapabilities: JsonObject
  /** How long the `server/discover` era probe waits (bridge/probe.ts default when absent). */
  readonly probeTimeoutMs?: number | undefined
  /** Answers upstream → client requests (sampling, elicitation, roots/list). */
  readonly onRequest: (
    upstream: Upstream,
    request: JsonRpcRequest,
    owners: readonly CallOwner[],
  ) => Promise<UpstreamReply>
}

/** Per-request facts for a 2026-07-28 upstream; Barbican's own when the caller gives none. */
export interface ModernRequestOptions extends RequestOptions {
  readonly envelope?: UpstreamEnvelope | undefined
  /** The caller's identity key, for per-identity legacy sessions (`sessionScope: 'identity'`). */
  readonly sessionKey?: string | undefined
}

/** What an Upstream emits; tsc checks every `emit` and `on` against it. */
export interface UpstreamEvents {
  /** These lists may differ now: the upstream said so, or it went away. */
  listChanged: [keys: readonly ListKey[]]
  /** Every notification the upstream sends on its own. */
  notification: [notification: JsonRpcNotification]
  /** The connection moved to another state. */
  state: [state: UpstreamState]
}

export class Upstream extends EventEmitter<UpstreamEvents> {
  readonly name: string
  /** Options with a hushed logger: what runs during a connection attempt. */
  #options: UpstreamOptions
  /** The logger of state changes, never hushed. */
  #log: Logger
  #hush: Hush
  /** When the current run of failures began (the first failure logged), for the reminder. */
  #failingSince = 0
  /** Whether the run of failures has been logged again on reaching the longest backoff. */
  #remindedAtCap = false
  #client: UpstreamClient | undefined
  #connecting: Promise<UpstreamClient> | undefined
  /** The connection being opened (handshake under way): stop() must not leave it running. */
  #opening: UpstreamClient | undefined
  #info: UpstreamInfo | undefined
  #state: UpstreamState = 'idle'
  #lastError: string | undefined
  #failures = 0
  #retryAt = 0
  #connectedAt = 0
  #idleTimer: NodeJS.Timeout | undefined
  #idleClosing = false
  #restartTimer: NodeJS.Timeout | undefined
  /** Set by start(): a failed attempt is retried in the background (eager upstreams). */
  #keepTrying = false
  #lists = new Map<ListKey, Promise<JsonObject[]>>()
  /** Optional lists the server answered with an error, held back alone until listed again. */
  #held = new Map<ListKey, HeldList>()
  #stopped = false
  /** The era verdict, kept across reconnects (era is a property of the server). */
  #verdict: EraVerdict | undefined
  /** Tool name → input schema, for `Mcp-Param-*` headers on the 2026 hop. */
  #toolSchemas = new Map<string, JsonObject>()
  /** Legacy clients' resource subscriptions toward a 2026 upstream. */
  #watches: ResourceWatches
  /** Per-identity legacy sessions (sessionScope 'identity'), opened on first use. */
  #identitySessions: IdentitySessions

  constructor(options: UpstreamOptions) {
    super()
    this.name = options.name
    this.#hush = options.hush ?? new Hush()
    this.#log = options.log
    this.#options = { ...options, log: this.#hush.wrap(options.log) }
    this.#watches = new ResourceWatches(ownEnvelope(this.#options))
    this.#identitySessions = new IdentitySessions(async () => {
      const client = await this.#newClient()
      try {
        await initializeLegacy(client, this.#options)
        return client
      } catch (err) {
        await client.close().catch(() => {})
        throw err
      }
    })
  }

  /** Where the connection stands now (also emitted as 'state' when it changes). */
  get state(): UpstreamState {
    return this.#state
  }
  /** Why the last connection attempt failed or the connection died, until the next success. */
  get lastError(): string | undefined {
    return this.#lastError
  }
  /** Says which grant a refused path or host needs (confined upstreams only). */
  get hints(): RefusalHints | undefined {
    return this.#options.hints
  }
  /** What the upstream advertised at its last handshake; undefined before the first. */
  get info(): UpstreamInfo | undefined {
    return this.#info
  }
  /** The upstream's era once probed: 'modern' upstreams are spoken to statelessly. */
  get era(): 'legacy' | 'modern' | undefined {
    return this.#verdict?.era
  }

  /**
   * Connects now and, if that fails, keeps trying in the background with the backoff until it
   * succeeds, so an eager upstream that was down at startup (a remote host not reachable yet)
   * becomes ready without a client asking. Settles after the first attempt; never rejects.
   */
  async start(): Promise<void> {
    this.#keepTrying = this.#options.restartOnExit === true
    await this.connect().catch(() => {})
  }

  /** Connects (once at a time) and runs the handshake; fails fast while backing off. */
  connect(): Promise<UpstreamClient> {
    return this.#connect(false)
  }

  /**
   * `background`: a retry nobody waits for. The state stays 'failed' (with its last error) until
   * the retry succeeds, so readiness does not flap between 'failed' and 'connecting'.
   */
  async #connect(background: boolean): Promise<UpstreamClient> {
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
    if (!background || this.#state !== 'failed') this.#setState('connecting')
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
      maxCallOutputBytes: this.#options.maxCallOutputBytes,
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

  /** A 2026-07-28 upstream is ready after discover; it listens for list changes upstream. */
  #readyModern(client: UpstreamClient, verdict: EraVerdict & { era: 'modern' }): UpstreamClient {
    const info = modernInfo(verdict)
    this.#becomeReady(client, info)
    listenForListChanges(client, info.capabilities, ownEnvelope(this.#options))
    // Watches outlive a reconnect: reopen the resource listen stream on the new connection.
    if (this.#watches.size > 0) this.#watches.reopen(client)
    return client
  }

  #becomeReady(client: UpstreamClient, info: UpstreamInfo): void {
    this.#opening = undefined
    this.#info = info
    this.#client = client
    this.#connectedAt = Date.now()
    this.#retryAt = 0
    this.#lastError = undefined
    this.#forgetLists(ALL_LIST_KEYS)
    this.#setState('ready')
    const failed = this.#hush.on ? this.#failures : 0
    this.#hush.on = false
    this.#log.info('upstream ready', {
      protocolVersion: info.protocolVersion,
      server: info.serverInfo.name,
      ...(failed > 0 ? { afterFailedAttempts: failed } : {}),
    })
  }

  async #open(): Promise<UpstreamClient> {
    let client: UpstreamClient | undefined
    try {
      client = await this.#opened(await this.#newClient())
      if (this.#verdict?.era !== 'legacy') {
        const verdict = await probeUpstream(client, this.#options)
        // The era is a property of the server: kept even if reconnecting below fails.
        this.#verdict = verdict
        if (verdict.era === 'modern') return this.#readyModern(client, verdict)
        if (verdict.closed || client.closed) {
          // The server hung up on the probe: continue on a fresh connection.
          await client.close().catch(() => {})
          client = await this.#opened(await this.#newClient())
        }
      }
      return await this.#initialize(client)
    } catch (err) {
      await client?.close().catch(() => {})
      this.#opening = undefined
      if (this.#stopped) throw new BarbicanError('ERR_SHUTTING_DOWN', 'Barbican is shutting down')
      this.#fail(err)
      if (this.#keepTrying) this.#scheduleRestart()
      throw err instanceof BarbicanError
        ? err
        : new BarbicanError(
            'ERR_UPSTREAM_UNAVAILABLE',
            `Cannot connect to upstream "${this.name}": ${(err as Error).message}`,
            { cause: err },
          )
    }
  }

  /**
   * The legacy handshake. A server that refuses it as serving 2026-07-28 took the era probe
   * after it had timed out (a slow start, such as a Python server importing its SDK under
   * load): it is probed again, and kept as modern.
   */
  async #initialize(client: UpstreamClient): Promise<UpstreamClient> {
    try {
      this.#becomeReady(client, await initializeLegacy(client, this.#options))
      return client
    } catch (err) {
      if (!isModernRefusal(err)) throw err
      const verdict = await probeUpstream(client, this.#options)
      if (verdict.era !== 'modern') throw err
      this.#verdict = verdict
      return this.#readyModern(client, verdict)
    }
  }

  /** Records `client` as the connection being opened; one opened after stop() is closed. */
  async #opened(client: UpstreamClient): Promise<UpstreamClient> {
    this.#opening = client
    if (this.#stopped) await client.close()
    return client
  }

  #fail(err: unknown): void {
    this.#failures++
    const delay = reconnectDelay(this.#failures)
    this.#retryAt = Date.now() + delay
    this.#lastError = err instanceof Error ? err.message : String(err)
    this.#setState('failed')
    this.#reportFailure(delay)
  }

  /**
   * One line per state change (ADR 120): the first failure of a run is a warning; the retries
   * after it, and the lines of their attempts (process started and exited, transport errors),
   * are debug until the upstream is ready again, which is logged with the count. One reminder
   * when the backoff reaches its longest delay says it is still failing.
   */
  #reportFailure(delay: number): void {
    const fields = { error: this.#lastError, retryInMs: delay, failedAttempts: this.#failures }
    if (!this.#hush.on) {
      this.#hush.on = true
      this.#failingSince = Date.now()
      this.#remindedAtCap = false
      this.#log.warn('upstream failed', {
        ...fields,
        // What the operator will (not) see next, so silence is not read as recovery.
        next: this.#options.restartOnExit
          ? `retrying with backoff up to ${RECONNECT_CAP_MS / 1000} s; logged again when ready`
          : 'retried at the next request; logged again when ready',
      })
    } else if (delay >= RECONNECT_CAP_MS && !this.#remindedAtCap) {
      this.#remindedAtCap = true
      this.#log.warn('upstream still failing', {
        ...fields,
        failingForMs: Date.now() - this.#failingSince,
      })
    } else {
      this.#log.debug('upstream failed again', fields)
    }
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
    this.#forgetLists(ALL_LIST_KEYS)
    if (this.#stopped) return
    // An upstream that dies is retried at once, then with growing delays if it keeps dying.
    if (Date.now() - this.#connectedAt >= STABLE_AFTER_MS) this.#failures = 0
    this.#fail(client.closeError ?? new Error('connection closed'))
    if (this.#options.restartOnExit) this.#scheduleRestart()
    this.emit('listChanged', [...ALL_LIST_KEYS])
  }

  #scheduleRestart(): void {
    clearTimeout(this.#restartTimer)
    this.#restartTimer = setTimeout(
      () => {
        if (this.#stopped || this.#client) return
        this.#connect(true).catch(() => {
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

  /**
   * The same list changed on another replica's connection to this server (src/app/fleet.ts):
   * this replica lists it again too and tells its clients. `method` is the list_changed one.
   */
  listsChangedElsewhere(method: string): void {
    const keys = LIST_CHANGED[method]
    if (!keys) return
    this.#forgetLists(keys)
    this.emit('listChanged', keys)
  }

  #onNotification(notification: JsonRpcNotification): void {
    const keys = LIST_CHANGED[notification.method]
    if (keys) {
      this.#forgetLists(keys)
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
    // Connected: no detour through connect()'s promise on every call.
    const current = this.#client
    const client = current !== undefined && !current.closed ? current : await this.connect()
    try {
      if (
        options?.sessionKey !== undefined &&
        this.#options.sessionScope === 'identity' &&
        this.#verdict?.era === 'legacy'
      ) {
        const own = await this.#identitySessions.get(options.sessionKey)
        return await own.request(method, params, options)
      }
      if (this.#verdict?.era !== 'modern') return await client.request(method, params, options)
      const out = withEnvelope(params, options?.envelope ?? ownEnvelope(this.#options))
      const name = method === 'tools/call' ? params?.name : undefined
      const schema = typeof name === 'string' ? this.#toolSchemas.get(name) : undefined
      const headers = modernHeaders(method, out, schema)
      // Headers the caller set (the trace context of its span) travel beside the routing ones.
      const own = options?.send?.headers
      const send: RequestOptions['send'] = {
        ...options?.send,
        headers: own ? { ...own, ...headers } : headers,
      }
      return await client.request(method, out, { ...options, send })
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
    this.#watches.count(uri, watch)
    this.#watches.reopen(this.#client)
  }

  /** Sends a notification if connected; a notification is never worth connecting for. */
  async notify(method: string, params?: JsonObject): Promise<void> {
    const client = this.#client
    if (client && !client.closed) await client.notify(method, params)
  }

  /** The complete list (all pages), cached until the server signals a change. */
  async list(key: ListKey): Promise<JsonObject[]> {
    const known = this.#lists.get(key)
    if (known && this.#info) return await known
    await this.connect()
    const { capability } = LIST_METHODS[key]
    if (!hasCapability(this.#info?.capabilities, [capability])) return []
    let cached = this.#lists.get(key)
    if (!cached) {
      cached = fetchAllPages(
        {
          name: this.name,
          log: this.#options.log,
          request: (method, params) => this.request(method, params),
          isModern: () => this.#verdict?.era === 'modern',
          toolSchemas: this.#toolSchemas,
        },
        key,
      )
      if (OPTIONAL_LISTS.has(key)) cached = cached.catch((err: unknown) => this.#holdBack(key, err))
      this.#lists.set(key, cached)
      cached.catch(() => this.#lists.delete(key))
    }
    return await cached
  }

  /**
   * The optional lists held back because the server answered them with an error (ADR 099): the
   * rest of the server is listed as usual. Each is asked again when the server says the list
   * changed or reconnects.
   */
  get heldLists(): readonly HeldList[] {
    return [...this.#held.values()]
  }

  /**
   * An optional list failed: when the server answered (an error, endless cursors), that list is
   * empty, its reason kept and logged; when it could not be reached, the failure stands.
   */
  #holdBack(key: ListKey, err: unknown): JsonObject[] {
    if (!listAnsweredBadly(err)) throw err
    const held: HeldList = { list: LIST_METHODS[key].method, reason: err.message }
    this.#held.set(key, held)
    this.#options.log.warn('list held back', { list: held.list, reason: held.reason })
    return []
  }

  #forgetLists(keys: readonly ListKey[]): void {
    for (const key of keys) {
      this.#lists.delete(key)
      this.#held.delete(key)
    }
  }

  /** Stops for good: timers cleared, every session closed, no reconnects afterwards. */
  async stop(): Promise<void> {
    this.#stopped = true
    this.#hush.on = false
    clearTimeout(this.#idleTimer)
    clearTimeout(this.#restartTimer)
    await this.#identitySessions.closeAll()
    const client = this.#client
    this.#client = undefined
    this.#setState('stopped')
    // A handshake under way (an upstream that never answers) ends now, not at its timeout.
    const opening = this.#opening
    this.#opening = undefined
    await opening?.close().catch(() => {})
    if (client) await client.close()
  }
}
