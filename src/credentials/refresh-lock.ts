/**
 * A fleet-wide lock per linked account around a token refresh (docs/decisions/089). Issuers that
 * rotate refresh tokens treat a second use of a consumed one as theft and revoke the whole grant,
 * so two replicas must not refresh the same link at once. The lock is Redis `SET key token NX PX`,
 * released by compare-and-delete (a script), so a replica never frees a lock that expired and
 * was taken by another. Keys are `<prefix>link:refresh:<SHA-256 of the link's key>`.
 */
import { randomBytes } from 'node:crypto'
import { type RedisClient, RedisScript, secretDigest } from '../store/redis.ts'

const RELEASE = new RedisScript(
  "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
)

export interface RefreshLocks {
  /** A token when the lock of `name` was free and is now held for `ttlMs`; undefined when held. */
  acquire(name: string, ttlMs: number): Promise<string | undefined>
  /** Frees the lock if `token` still holds it. */
  release(name: string, token: string): Promise<void>
}

export class RedisRefreshLocks implements RefreshLocks {
  readonly #client: RedisClient
  readonly #prefix: string

  constructor(client: RedisClient, prefix: string) {
    this.#client = client
    this.#prefix = prefix
  }

  #key(name: string): string {
    return `${this.#prefix}link:refresh:${secretDigest(name)}`
  }

  async acquire(name: string, ttlMs: number): Promise<string | undefined> {
    const token = randomBytes(16).toString('base64url')
    const ok = await this.#client.set(this.#key(name), token, { NX: true, PX: ttlMs })
    return ok === null ? undefined : token
  }

  async release(name: string, token: string): Promise<void> {
    await RELEASE.run(this.#client, [this.#key(name)], [token])
  }
}
