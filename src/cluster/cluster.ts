/**
 * What makes several `barbican serve` processes one gateway (docs/decisions/058 and 059), over
 * Redis: each replica's liveness and address, which replica owns each legacy session (and the
 * relay of requests to it), one bus on which replicas tell each other what changed, and the
 * request-state key when none is configured.
 */
import { randomBytes, randomUUID } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { RedisClientType } from 'redis'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError, jsonRpcCodeOf } from '../common/errors.ts'
import { redis } from '../common/lazy-deps.ts'
import {
  errorResponse,
  INVALID_PARAMS,
  isPlainObject,
  type JsonRpcNotification,
  type JsonRpcRequest,
  type JsonRpcResponse,
} from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import { sendRpcError } from '../transports/http-io.ts'
import type { SessionDirectory, SocketRetry } from '../transports/session-directory.ts'
import { peerAgent, postTo, relayTo } from './relay.ts'

export interface ClusterOptions {
  readonly redisUrl: string
  /** Prepended to every key and channel, so several gateways can share one Redis. */
  readonly prefix: string
  readonly log: Logger
  /** How often this replica says it is alive (default 1 s). */
  readonly heartbeatMs?: number
  /** A replica silent this long is dead (default 3 s). */
  readonly deadAfterMs?: number
  /** Longest a session's ownership entry outlives a replica killed without a word (24 h). */
  readonly sessionTtlMs?: number
  /** A relay whose connection to the owner is not made by then answers 404 (default 1 s). */
  readonly connectTimeoutMs?: number
}

/**
 * Tells a fleet's replicas that `topic` happened, from a process that is not a replica (the
 * CLI after an operator's decision): one connection, one PUBLISH, closed. The replicas poll the
 * stores as well, so a message lost here only delays what they notice.
 */
export async function publishToFleet(
  options: Pick<ClusterOptions, 'redisUrl' | 'prefix'>,
  topic: string,
  data: unknown = null,
): Promise<void> {
  const { createClient } = redis()
  const client = createClient({
    url: options.redisUrl,
    socket: { connectTimeout: 2000, reconnectStrategy: false },
  })
  client.on('error', () => {})
  try {
    await client.connect()
    const message: BusMessage = { from: `cli:${randomUUID()}`, topic, data }
    await client.publish(`${options.prefix}bus`, JSON.stringify(message))
  } finally {
    client.destroy()
  }
}

/** A message on the bus; `from` lets a replica ignore its own. */
interface BusMessage {
  readonly from: string
  readonly topic: string
  readonly data: unknown
}

export type BusHandler = (data: unknown) => void

/** What a retry whose holder has stopped is told: start over, as after an expired state. */
const CALL_LOST = 'The requestState names a call held by a replica that has stopped; call again'
/** What a retry is told when its holder failed while answering it (it may have resumed). */
const CALL_CUT = 'The replica holding this call failed during the request'
/** The longest answer (a JSON body, or one event) read from a holder for a WebSocket client. */
const MAX_RELAYED_ANSWER_BYTES = 64 * 1024 * 1024

/** Sessions whose owner is remembered locally (an owner never changes; bounded all the same). */
const MAX_CACHED_OWNERS = 10_000

/** A `redis` client as `createClient` makes it with no modules, functions or scripts. */
type NoExtensions = Record<never, never>
type RedisClient = RedisClientType<NoExtensions, NoExtensions, NoExtensions, 3, NoExtensions>

export class Cluster implements SessionDirectory {
  /** This replica's id: new at every start, so a restarted process never inherits sessions. */
  readonly id = randomUUID()
  readonly #options: Required<Omit<ClusterOptions, 'log'>>
  /** This replica's base URL as the others reach it; set by `announce`. */
  #advertise = ''
  readonly #log: Logger
  readonly #client: RedisClient
  readonly #subscriber: RedisClient
  readonly #agent = peerAgent()
  /** Live replica id → advertised URL, refreshed with each heartbeat. */
  #peers = new Map<string, string>()
  readonly #owners = new Map<string, string>()
  readonly #handlers = new Map<string, Set<BusHandler>>()
  #timer: NodeJS.Timeout | undefined

  private constructor(options: ClusterOptions, client: RedisClient, subscriber: RedisClient) {
    this.#options = {
      heartbeatMs: 1000,
      deadAfterMs: 3000,
      sessionTtlMs: 24 * 3600_000,
      connectTimeoutMs: 1000,
      ...options,
    }
    this.#log = options.log
    this.#client = client
    this.#subscriber = subscriber
  }

  /** Connects to Redis and listens to the fleet's bus; `announce` then makes it a replica. */
  static async join(options: ClusterOptions): Promise<Cluster> {
    const { createClient } = redis()
    let joined = false
    const client = createClient({
      url: options.redisUrl,
      socket: {
        connectTimeout: 2000,
        // At start, an unreachable Redis fails the start (fail closed, said once); once joined,
        // a lost connection is retried for ever, backing off to 2 s.
        reconnectStrategy: (retries: number, cause: Error) =>
          joined ? Math.min(50 * 2 ** retries, 2000) : retries < 2 ? 100 : cause,
      },
    })
    const subscriber = client.duplicate()
    // Errors while connected are reported by the commands that fail; reconnection is automatic.
    client.on('error', () => {})
    subscriber.on('error', () => {})
    try {
      await client.connect()
      await subscriber.connect()
    } catch (err) {
      client.destroy()
      subscriber.destroy()
      throw new BarbicanError('ERR_CLUSTER_UNAVAILABLE', `Cannot reach Redis: ${String(err)}`, {
        cause: err,
      })
    }
    joined = true
    const cluster = new Cluster(options, client, subscriber)
    await subscriber.subscribe(cluster.#key('bus'), (message) => cluster.#onMessage(message))
    return cluster
  }

  /**
   * Starts the heartbeat under `advertise`, this replica's base URL as the others reach it
   * (`BARBICAN_ADVERTISE_URL`): from now on requests for its sessions are relayed to it.
   */
  async announce(advertise: string): Promise<void> {
    this.#advertise = advertise
    await this.#beat()
    this.#timer = setInterval(() => {
      this.#beat().catch((err) => this.#log.warn('heartbeat failed', { error: err }))
    }, this.#options.heartbeatMs)
    this.#timer.unref()
    this.#log.info('joined the fleet', { replica: this.id, advertise })
  }

  #key(name: string): string {
    return `${this.#options.prefix}${name}`
  }

  /** Says this replica is alive and reads which others are. */
  async #beat(): Promise<void> {
    const replicas = this.#key('replicas')
    await this.#client
      .multi()
      .set(this.#key(`replica:${this.id}`), this.#advertise, {
        PX: this.#options.deadAfterMs,
      })
      .sAdd(replicas, this.id)
      .exec()
    const ids = await this.#client.sMembers(replicas)
    const urls =
      ids.length === 0 ? [] : await this.#client.mGet(ids.map((id) => this.#key(`replica:${id}`)))
    const peers = new Map<string, string>()
    const dead: string[] = []
    ids.forEach((id, i) => {
      const url = urls[i]
      if (typeof url === 'string') peers.set(id, url)
      else dead.push(id)
    })
    if (dead.length > 0) await this.#client.sRem(replicas, dead)
    this.#peers = peers
  }

  /** Replicas alive at the last heartbeat (this one included). */
  get replicas(): ReadonlyMap<string, string> {
    return this.#peers
  }

  opened(id: string): void {
    this.#client
      .set(this.#key(`session:${id}`), this.id, { PX: this.#options.sessionTtlMs })
      .catch((err) => this.#log.warn('could not register a session', { error: err }))
  }

  closed(id: string): void {
    this.#client
      .del(this.#key(`session:${id}`))
      .catch((err) => this.#log.warn('could not release a session', { error: err }))
  }

  async relay(id: string, req: IncomingMessage, res: ServerResponse): Promise<boolean> {
    let owner = this.#owners.get(id)
    if (owner === undefined) {
      try {
        owner = (await this.#client.get(this.#key(`session:${id}`))) ?? undefined
      } catch (err) {
        this.#log.warn('session owner look-up failed', { error: err })
        sendRpcError(res, 503, 'Session directory unavailable', {
          code: jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'),
        })
        return true
      }
      if (owner === undefined || owner === this.id) return false
      if (this.#owners.size >= MAX_CACHED_OWNERS) this.#owners.clear()
      this.#owners.set(id, owner)
    }
    if (owner === this.id) return false
    const url = this.#peers.get(owner) ?? (await this.#liveUrl(owner))
    if (url === undefined) {
      this.#ownerGone(id)
      return false
    }
    const outcome = await relayTo(url, req, res, {
      from: this.id,
      connectTimeoutMs: this.#options.connectTimeoutMs,
      agent: this.#agent,
    })
    if (outcome === 'relayed') return true
    if (outcome === 'cut') {
      // The owner may have run the request before it failed: a 404 would invite the client to
      // send it again on a new session, so this is a failed request, not a lost session.
      sendRpcError(res, 502, 'The replica holding this session failed during the request', {
        code: jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'),
      })
      return true
    }
    // The owner died (or is dying): the spec's 404 makes the client start a new session. The
    // body may be partly read by now, so this replica answers rather than its endpoint.
    this.#log.info('session owner unreachable; answering 404', { owner })
    this.#ownerGone(id)
    sendRpcError(res, 404, 'Session not found')
    return true
  }

  /**
   * Reads which replica holds the call a 2026-07-28 retry's `requestState` names (the bridge
   * knows the seal; src/app/fleet.ts sets it). Unset: retries are served where they land.
   */
  heldCallOwner: ((requestState: unknown) => string | undefined) | undefined

  /**
   * The routing headers a 2026-07-28 request posted over HTTP carries (`MCP-Protocol-Version`,
   * `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`), for a WebSocket client's retry relayed to its
   * holder (ADR 088); the gateway knows the tools' schemas. Unset: such retries are not relayed.
   */
  retryHeaders:
    | ((
        server: string,
        request: JsonRpcRequest,
        identity: Identity | undefined,
      ) => Promise<Record<string, string>>)
    | undefined

  /**
   * Where the replica `owner` listens: its URL, `undefined` when it is gone, or `null` when Redis
   * cannot say (a heartbeat map miss is a replica started since the last beat, or a dead one).
   */
  async #holderUrl(owner: string): Promise<string | undefined | null> {
    const known = this.#peers.get(owner)
    if (known !== undefined) return known
    try {
      return (await this.#client.get(this.#key(`replica:${owner}`))) ?? undefined
    } catch (err) {
      this.#log.warn('held-call owner look-up failed', { error: err })
      return null
    }
  }

  async relayRetry(
    request: JsonRpcRequest,
    body: string,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<boolean> {
    const owner = this.heldCallOwner?.(request.params?.requestState)
    if (owner === undefined || owner === this.id) return false
    const url = await this.#holderUrl(owner)
    if (url === null) {
      sendRpcError(res, 503, 'Replica directory unavailable', {
        code: jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'),
        id: request.id,
      })
      return true
    }
    // The call died with its replica: the client can only start over, as after an expiry.
    const lost = () => sendRpcError(res, 200, CALL_LOST, { code: INVALID_PARAMS, id: request.id })
    if (url === undefined) {
      lost()
      return true
    }
    const outcome = await relayTo(url, req, res, {
      from: this.id,
      connectTimeoutMs: this.#options.connectTimeoutMs,
      agent: this.#agent,
      body,
    })
    if (outcome === 'unreachable') {
      this.#log.info('held-call owner unreachable; the call is lost', { owner })
      lost()
    } else if (outcome === 'cut') {
      // The owner may have resumed the call before it failed: a failed request, not a lost call.
      sendRpcError(res, 502, CALL_CUT, {
        code: jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'),
        id: request.id,
      })
    }
    return true
  }

  /**
   * A WebSocket client's retry (ADR 088): the same routing and the same answers as
   * `relayRetry`, but the request goes to the holder as one POST of its own, with the
   * client's credential from the upgrade, and the answer comes back as messages on the socket.
   */
  async relaySocketRetry(request: JsonRpcRequest, retry: SocketRetry): Promise<boolean> {
    const owner = this.heldCallOwner?.(request.params?.requestState)
    if (owner === undefined || owner === this.id || this.retryHeaders === undefined) return false
    const fail = (code: number, message: string) =>
      retry.send(errorResponse(request.id, code, message))
    const url = await this.#holderUrl(owner)
    if (url === null) {
      fail(jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'), 'Replica directory unavailable')
      return true
    }
    if (url === undefined) {
      fail(INVALID_PARAMS, CALL_LOST)
      return true
    }
    const routing = await this.retryHeaders(retry.server, request, retry.identity)
    let answered = false
    const path = retry.server === 'default' ? '/mcp' : `/mcp/${encodeURIComponent(retry.server)}`
    const outcome = await postTo(url, path, retry.headers, routing, JSON.stringify(request), {
      from: this.id,
      connectTimeoutMs: this.#options.connectTimeoutMs,
      agent: this.#agent,
      signal: retry.signal,
      maxBytes: MAX_RELAYED_ANSWER_BYTES,
      onMessage: (message) => {
        if (answered || !isPlainObject(message) || message.jsonrpc !== '2.0') return
        if ('result' in message || 'error' in message) {
          answered = true
          // A refusal before the request was read (401, 403, 429) names no id: it is this one's.
          retry.send({ ...(message as unknown as JsonRpcResponse), id: request.id })
        } else if (typeof message.method === 'string' && !('id' in message)) {
          retry.send(message as unknown as JsonRpcNotification)
        }
        // A request from the holder could not be answered across this hop; 2026-07-28 sends none.
      },
    })
    if (answered || retry.signal.aborted) return true
    if (outcome === 'unreachable') {
      this.#log.info('held-call owner unreachable; the call is lost', { owner })
      fail(INVALID_PARAMS, CALL_LOST)
    } else {
      // Cut, or an answer without a response: the call may have resumed there.
      fail(jsonRpcCodeOf('ERR_CLUSTER_UNAVAILABLE'), CALL_CUT)
    }
    return true
  }

  /** A replica the last heartbeat did not know yet may have started since. */
  async #liveUrl(replica: string): Promise<string | undefined> {
    try {
      return (await this.#client.get(this.#key(`replica:${replica}`))) ?? undefined
    } catch {
      return undefined
    }
  }

  #ownerGone(id: string): void {
    this.#owners.delete(id)
    this.#client.del(this.#key(`session:${id}`)).catch(() => {})
  }

  /** Tells every other replica that `topic` happened (at most once; no replay for latecomers). */
  publish(topic: string, data: unknown = null): void {
    const message: BusMessage = { from: this.id, topic, data }
    this.#client
      .publish(this.#key('bus'), JSON.stringify(message))
      .catch((err) => this.#log.warn('could not publish to the fleet', { topic, error: err }))
  }

  /** Runs `handler` for each `topic` another replica publishes. */
  on(topic: string, handler: BusHandler): void {
    const set = this.#handlers.get(topic) ?? new Set<BusHandler>()
    set.add(handler)
    this.#handlers.set(topic, set)
  }

  #onMessage(raw: string): void {
    let message: BusMessage
    try {
      message = JSON.parse(raw) as BusMessage
    } catch {
      return
    }
    if (message.from === this.id) return
    for (const handler of this.#handlers.get(message.topic) ?? []) {
      try {
        handler(message.data)
      } catch (err) {
        this.#log.warn('a fleet message handler failed', { topic: message.topic, error: err })
      }
    }
  }

  /**
   * The key that seals 2026-07-28 request states, the same on every replica (ADR 059): the
   * first replica to start writes a random one, every other reads it.
   */
  async sharedStateKey(): Promise<Buffer> {
    const key = this.#key('state-key')
    await this.#client.set(key, randomBytes(32).toString('base64'), { NX: true })
    const value = await this.#client.get(key)
    const bytes = value === null ? Buffer.alloc(0) : Buffer.from(value, 'base64')
    if (bytes.length !== 32) {
      throw new BarbicanError('ERR_CLUSTER_UNAVAILABLE', `Redis holds no valid key at ${key}`)
    }
    return bytes
  }

  /**
   * Says this replica is going (a graceful stop begins): the others stop relaying to it, so
   * its clients get the spec's 404 and start new sessions elsewhere instead of a 503.
   */
  async withdraw(): Promise<void> {
    clearInterval(this.#timer)
    this.#timer = undefined
    await this.#client
      .multi()
      .del(this.#key(`replica:${this.id}`))
      .sRem(this.#key('replicas'), this.id)
      .exec()
      .catch(() => {})
  }

  /** Leaves the fleet and closes the connections to Redis and to the other replicas. */
  async leave(): Promise<void> {
    await this.withdraw()
    this.#agent.destroy()
    await Promise.allSettled([this.#subscriber.close(), this.#client.close()])
  }
}
