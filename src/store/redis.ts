/**
 * The Redis connection of a replica (ADR 055): one client per process for the shared ephemeral
 * state (rate-limit counters, …), opened at start so a wrong URL or a server that is down fails
 * the start with ERR_STORE_UNAVAILABLE instead of the first call. `redis` is loaded only here.
 * Scripts run by SHA (EVALSHA) and are loaded once per connection: one round trip per use.
 */
import { createHash } from 'node:crypto'
import type { RedisClientType } from 'redis'
import { redactUrl } from '../common/backend-urls.ts'
import { BarbicanError } from '../common/errors.ts'
import { redis } from '../common/lazy-deps.ts'

export type RedisClient = RedisClientType

/** How long a command may wait for a connection before it fails (the reconnect keeps going). */
const CONNECT_TIMEOUT_MS = 5_000

/** A connected client on `url`. */
export async function openRedis(url: string): Promise<RedisClient> {
  let connected = false
  const client = redis().createClient({
    url,
    socket: {
      connectTimeout: CONNECT_TIMEOUT_MS,
      // Reconnect for ever once connected; a first connection that fails ends the start.
      reconnectStrategy: (retries: number, cause: Error) =>
        connected ? Math.min(retries * 100, 2000) : cause,
    },
    // A command issued while disconnected fails at once (the call is refused, not hung).
    disableOfflineQueue: true,
  }) as unknown as RedisClient
  // Errors are reported on the commands that meet them; the emitter must not crash the process.
  client.on('error', () => {})
  try {
    await client.connect()
    connected = true
  } catch (err) {
    client.destroy()
    throw new BarbicanError(
      'ERR_STORE_UNAVAILABLE',
      `Redis at ${redactUrl(url)} cannot be used: ${(err as Error).message}`,
      { cause: err },
    )
  }
  return client
}

/**
 * What a key built from a secret (a token, a ticket, an OAuth state) holds in its place: its
 * SHA-256, base64url, so the secret itself never reaches Redis, nor sits as a key in a cache of
 * this process (the introspection answers are kept by it too).
 */
export function secretDigest(secret: string): string {
  return createHash('sha256').update(secret).digest('base64url')
}

/** A Lua script run by its SHA, loaded again when the server does not know it (NOSCRIPT). */
export class RedisScript {
  readonly #source: string
  readonly #sha: string

  constructor(source: string) {
    this.#source = source
    this.#sha = createHash('sha1').update(source).digest('hex')
  }

  async run(client: RedisClient, keys: string[], args: string[]): Promise<unknown> {
    try {
      return await client.evalSha(this.#sha, { keys, arguments: args })
    } catch (err) {
      if (!String((err as Error).message).startsWith('NOSCRIPT')) throw err
      return await client.eval(this.#source, { keys, arguments: args })
    }
  }
}
