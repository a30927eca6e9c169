/**
 * Keeps a replica's API keys in step with the keys in PostgreSQL (ADR 055): read at start, then
 * again whenever the table's revision moves (polled every `pollMs`, default 250 ms) or the fleet
 * bus says a key changed (`refresh`). A revocation through any replica or the CLI therefore
 * holds everywhere within a bus hop, and within one poll if the bus message is lost. A read that
 * fails keeps the keys last read and is tried again at the next poll.
 */
import type { ApiKeyStore } from '../auth/api-keys.ts'
import { PostgresApiKeys, type StoredApiKey } from '../store/postgres-api-keys.ts'
import type { Logger } from '../telemetry/log.ts'

/**
 * Follows the keys in the PostgreSQL at `url` (whose schema the store has migrated already) on
 * its own small pool; `close` stops following and ends the pool.
 */
export async function followPostgresKeys(
  url: string,
  keys: ApiKeyStore,
  log: Logger,
): Promise<{ readonly follower: SharedApiKeys; close(): Promise<void> }> {
  const { openPostgresPool } = await import('../store/postgres.ts')
  const pool = await openPostgresPool(url, { migrate: false, maxConnections: 2 })
  const follower = new SharedApiKeys(keys, new PostgresApiKeys(pool), log)
  try {
    await follower.start()
  } catch (err) {
    await pool.end().catch(() => {})
    throw err
  }
  return {
    follower,
    async close() {
      follower.stop()
      await pool.end().catch(() => {})
    },
  }
}

export const SHARED_KEYS_POLL_MS = 250

export class SharedApiKeys {
  readonly #keys: ApiKeyStore
  readonly #table: PostgresApiKeys
  readonly #log: Logger
  #revision = -1
  #timer: NodeJS.Timeout | undefined
  /** The refresh under way, so a poll and a bus message never read twice at once. */
  #running: Promise<void> | undefined

  constructor(keys: ApiKeyStore, table: PostgresApiKeys, log: Logger) {
    this.#keys = keys
    this.#table = table
    this.#log = log
  }

  /** Reads the keys once (a failure fails the start), then follows the table. */
  async start(pollMs = SHARED_KEYS_POLL_MS): Promise<void> {
    await this.#load()
    this.#timer = setInterval(() => void this.refresh(false), pollMs)
    this.#timer.unref()
  }

  /** Re-reads the keys if the revision moved (`force`: read them whatever it says). */
  async refresh(force = true): Promise<void> {
    this.#running ??= (force ? this.#load() : this.#loadIfMoved())
      .catch((err) => this.#log.warn('could not read the shared API keys', { error: err }))
      .finally(() => {
        this.#running = undefined
      })
    await this.#running
  }

  stop(): void {
    clearInterval(this.#timer)
    this.#timer = undefined
  }

  /**
   * Told after a key is written through this replica (the console), so the other replicas of
   * a fleet re-read the keys at once instead of at their next poll (src/app/fleet.ts).
   */
  onWrite: (() => void) | undefined

  /** The keys in PostgreSQL now, with their creation times (the console's list). */
  async list(): Promise<StoredApiKey[]> {
    return await this.#table.list()
  }

  /** Adds a key for every replica; false when one with that id exists already. */
  async create(key: StoredApiKey): Promise<boolean> {
    return await this.#wrote(await this.#table.create(key))
  }

  /** Removes a key for every replica; false when there was none. */
  async revoke(id: string): Promise<boolean> {
    return await this.#wrote(await this.#table.revoke(id))
  }

  /** A write holds on this replica before the caller is answered, then on the others. */
  async #wrote(changed: boolean): Promise<boolean> {
    if (!changed) return false
    // A read under way may predate the write: wait for it, then read again.
    await this.#running?.catch(() => {})
    await this.refresh()
    this.onWrite?.()
    return true
  }

  async #loadIfMoved(): Promise<void> {
    if ((await this.#table.revision()) !== this.#revision) await this.#load()
  }

  async #load(): Promise<void> {
    // Read the revision first: a write landing in between makes the next poll read again.
    const revision = await this.#table.revision()
    const keys = await this.#table.list()
    this.#keys.replaceShared(keys)
    this.#revision = revision
  }
}
