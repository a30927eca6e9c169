/**
 * What a started server offers its callers (server.ts `startServer`): the CLI, the fleet, the
 * admin routes and tests. Its own module, so that the routes can name it without a cycle.
 */
import type { AuthRuntime } from '../auth/auth-runtime.ts'
import type { Identity } from '../auth/identity.ts'
import type { Config } from '../config/config.ts'
import type { Gateway } from '../gateway/gateway.ts'
import type { ConfigDiff } from '../gateway/reload.ts'
import type { SharedApiKeys } from '../gateway/shared-api-keys.ts'
import type { HttpInbound } from '../transports/http-inbound.ts'
import type { ConfigReloader } from './reloader.ts'

export interface RunningServer {
  readonly gateway: Gateway
  readonly http: HttpInbound
  readonly url: string
  /** Identity and credentials (present when the config has `auth:`). */
  readonly auth: AuthRuntime | undefined
  /** Settles when every eager upstream has connected or failed to (the gateway's start). */
  readonly started: Promise<void>
  /** The configuration the gateway runs now (what a reload is compared with). */
  readonly config: Config
  /**
   * Applies the hot part of a new, validated configuration (src/gateway/reload.ts) and returns
   * what differed; parts that need a restart keep their running values.
   */
  apply(next: Config): Promise<ConfigDiff>
  /**
   * The API keys in PostgreSQL this replica follows (`store.postgres`): from now on the
   * console creates and revokes keys there, like `barbican keys`, for every replica.
   */
  useSharedKeys(keys: SharedApiKeys): void
  /** The gateway serving a caller: its tenant's (ADR 060), or the main one. */
  gatewayOf(identity: Identity | undefined): Gateway | undefined
  /** Names this replica of a fleet in its gateways' held calls (docs/decisions/081). */
  nameReplica(id: string): void
  /** What `POST /admin/api/reload` runs; absent: the gateway has no file to reload. */
  reloader: ConfigReloader | undefined
  /** What the overview names as the configuration's origin. */
  configLabel: string
  stop(): Promise<void>
}
