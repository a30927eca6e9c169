/**
 * The second level of the identity caches in a fleet (docs/decisions/082): JWKS documents,
 * introspection answers, signed assertions and issuers' metadata, shared in Redis so that what one replica asked
 * the authorization server (or signed) serves the others. Each cache keeps its in-process level
 * first, so a hit costs no round trip; Redis is read only on a memory miss, before the
 * authorization server, and written through with the entry's own lifetime.
 *
 * Keys are SHA-256 digests of what names the entry (never a raw token), under
 * `<prefix>cache:<kind>:`. Redis failing is a cache miss: the authorization server stays the
 * authority, and a cache never refuses a caller.
 */
import { type RedisClient, secretDigest } from '../store/redis.ts'

export type SharedCacheKind = 'jwks' | 'introspection' | 'assertion' | 'metadata'

export interface SharedCache {
  /** The value under `name`, or undefined (absent, expired, or Redis unreachable). */
  get(kind: SharedCacheKind, name: string): Promise<string | undefined>
  /** Keeps `value` for `ttlMs` (nothing when not positive); failures are ignored. */
  set(kind: SharedCacheKind, name: string, value: string, ttlMs: number): Promise<void>
}

export class RedisSharedCache implements SharedCache {
  readonly #client: RedisClient
  readonly #prefix: string

  constructor(client: RedisClient, prefix: string) {
    this.#client = client
    this.#prefix = prefix
  }

  #key(kind: SharedCacheKind, name: string): string {
    return `${this.#prefix}cache:${kind}:${secretDigest(name)}`
  }

  async get(kind: SharedCacheKind, name: string): Promise<string | undefined> {
    try {
      return (await this.#client.get(this.#key(kind, name))) ?? undefined
    } catch {
      return undefined
    }
  }

  async set(kind: SharedCacheKind, name: string, value: string, ttlMs: number): Promise<void> {
    const ms = Math.floor(ttlMs)
    if (!(ms > 0)) return
    try {
      await this.#client.set(this.#key(kind, name), value, { PX: ms })
    } catch {
      // A lost write costs the next replica one question to the authorization server.
    }
  }
}
