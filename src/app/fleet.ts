/**
 * `barbican serve` as one replica of a fleet (docs/decisions/058, 059): joins when Redis is
 * configured (`redis:` or `BARBICAN_REDIS_URL`), shares the request-state key, relays legacy sessions to their
 * owners, and passes list changes, resource updates and config reloads between replicas.
 */
import { hostname } from 'node:os'
import type { Identity } from '../auth/identity.ts'
import { Cluster, publishToFleet } from '../cluster/cluster.ts'
import type { RedisConfig } from '../config/backends.ts'
import type { Gateway } from '../gateway/gateway.ts'
import type { JsonRpcNotification } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import type { HttpInbound } from '../transports/http-inbound.ts'

/** What of a running `serve` the fleet needs (server.ts RunningServer). */
export interface FleetMember {
  readonly gateway: Gateway
  /** The gateway serving a caller: its tenant's, or the main one (undefined: none). */
  gatewayOf?(identity: Identity | undefined): Gateway | undefined
  readonly http: HttpInbound
  readonly url: string
  nameReplica(id: string): void
  readonly reloader: { reload(trigger: string): Promise<unknown> } | undefined
}

/** Bus topics. */
const UPSTREAM_CHANGE = 'upstream-change'
const RELOAD = 'reload'
/** An operator decided on pins (console or CLI): every replica re-reads the pin store now. */
export const TRUST_DECISION = 'trust-decision'
/** An API key was created or revoked in the shared store: every replica re-reads the keys. */
export const API_KEYS_CHANGED = 'api-keys'
/** The reload trigger named for a reload another replica asked for (never published again). */
const FLEET_TRIGGER = 'fleet'

/**
 * Joins the fleet on the configured Redis; undefined when there is none (one process). `env`
 * receives the shared request-state key when it has none.
 */
export async function joinFleet(
  redis: RedisConfig | undefined,
  env: NodeJS.ProcessEnv,
  log: Logger,
): Promise<Cluster | undefined> {
  if (redis === undefined) return undefined
  const cluster = await Cluster.join({
    redisUrl: redis.url,
    prefix: redis.prefix,
    log: log.child({ part: 'fleet' }),
  })
  // Without a configured key, every replica seals with the one held in Redis (ADR 059).
  if (!env.BARBICAN_STATE_KEY)
    env.BARBICAN_STATE_KEY = (await cluster.sharedStateKey()).toString('hex')
  return cluster
}

/**
 * The address other replicas relay to: `BARBICAN_ADVERTISE_URL`, else the listener's own,
 * with the machine's host name when it listens on every interface.
 */
export function advertisedUrl(env: NodeJS.ProcessEnv, listenerUrl: string): string {
  if (env.BARBICAN_ADVERTISE_URL) return env.BARBICAN_ADVERTISE_URL.replace(/\/+$/, '')
  const url = new URL(listenerUrl)
  if (url.hostname === '0.0.0.0' || url.hostname === '[::]') url.hostname = hostname()
  return url.origin
}

/** Makes a started server one replica of the fleet. */
export async function serveInFleet(
  cluster: Cluster,
  server: FleetMember,
  env: NodeJS.ProcessEnv,
  /** Follows the API keys in PostgreSQL, when they live there. */
  sharedKeys?: { refresh(): Promise<void>; onWrite: (() => void) | undefined },
): Promise<void> {
  const { gateway, http } = server
  gateway.onUpstreamChange = (upstream, n) => cluster.publish(UPSTREAM_CHANGE, { upstream, n })
  cluster.on(UPSTREAM_CHANGE, (data) => {
    const { upstream, n } = data as { upstream: string; n: JsonRpcNotification }
    if (typeof upstream === 'string' && typeof n?.method === 'string')
      gateway.applyPeerChange(upstream, n)
  })
  cluster.on(RELOAD, () => void server.reloader?.reload(FLEET_TRIGGER))
  gateway.onTrustDecision = () => cluster.publish(TRUST_DECISION)
  cluster.on(TRUST_DECISION, () => void gateway.trustChangedElsewhere())
  cluster.on(API_KEYS_CHANGED, () => void sharedKeys?.refresh())
  // A key created or revoked in this replica's console: the others re-read the keys now.
  if (sharedKeys) sharedKeys.onWrite = () => cluster.publish(API_KEYS_CHANGED)
  // Held 2026-07-28 calls name this replica in their state; a retry elsewhere comes back here.
  server.nameReplica(cluster.id)
  cluster.heldCallOwner = (requestState) => gateway.heldCallOwner(requestState)
  // A WebSocket client's retry is posted to the holder with the headers HTTP clients send.
  cluster.retryHeaders = async (name, request, identity) =>
    await (server.gatewayOf?.(identity) ?? gateway).retryHeaders(name, request)
  http.sessionDirectory = cluster
  await cluster.announce(advertisedUrl(env, server.url))
}

/**
 * Tells the other replicas to reload their configuration too after a reload asked of this one
 * (admin API, SIGHUP). Not after a file change, which each replica sees in its own copy, nor
 * after a reload another replica asked for.
 */
export function shareReload(cluster: Cluster | undefined, trigger: string, ok: boolean): void {
  if (cluster === undefined || !ok || trigger === FLEET_TRIGGER || trigger === 'file') return
  cluster.publish(RELOAD)
}

/**
 * Tells the fleet about a decision the CLI made (`topic`), when Redis is configured, so that
 * replicas act on it at once instead of at their next poll. A failure is said and otherwise
 * harmless: the decision is stored, and the replicas' poll finds it.
 */
export async function tellFleet(
  redis: RedisConfig | undefined,
  topic: string,
  stderr: (text: string) => void,
): Promise<void> {
  if (redis === undefined) return
  try {
    await publishToFleet({ redisUrl: redis.url, prefix: redis.prefix }, topic)
  } catch (err) {
    stderr(
      `barbican: could not tell the fleet at once (${(err as Error).message}); replicas notice within seconds\n`,
    )
  }
}
