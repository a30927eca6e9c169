/**
 * Opaque access tokens, checked by RFC 7662 token introspection at the issuer. Answers are cached
 * briefly (keyed by a hash of the token, never the token itself) so a busy client does not cost
 * one introspection call per request; the cache never outlives the token's own `exp`. In a fleet
 * the answers for active tokens are shared in Redis too (shared-cache.ts, ADR 082), read on a
 * memory miss before the issuer is asked, so a token introspected by one replica is known to all.
 */
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { secretDigest } from '../store/redis.ts'
import { AuthFailure } from './auth-failure.ts'
import type { Identity } from './identity.ts'
import type { SharedCache } from './shared-cache.ts'

export interface IntrospectorOptions {
  readonly endpoint: string
  readonly clientId: string
  readonly clientSecret: string
  /** The issuer the answers must name when they carry `iss`. */
  readonly issuer?: string | undefined
  readonly cacheSeconds: number
  readonly tenantClaim?: string | undefined
  readonly fetch: GuardedFetch
  /** Clock, for tests. */
  readonly now?: (() => number) | undefined
  /** The fleet's second level (Redis), behind the in-process cache. */
  readonly shared?: SharedCache | undefined
}

/** An answer as cached: until when it may be used (epoch ms). */
interface CachedAnswer {
  readonly answer: JsonObject
  readonly until: number
}

/** Resolves opaque tokens to identities. */
export interface Introspector {
  introspect(token: string, audiences: readonly string[]): Promise<Identity>
}

const MAX_CACHE_ENTRIES = 10_000

export function createIntrospector(options: IntrospectorOptions): Introspector {
  const cache = new Map<string, CachedAnswer>()
  const now = options.now ?? Date.now
  const { shared } = options
  const remember = (key: string, entry: CachedAnswer) => {
    if (cache.size >= MAX_CACHE_ENTRIES) cache.delete(cache.keys().next().value as string)
    cache.set(key, entry)
  }
  const ask = async (token: string): Promise<JsonObject> => {
    const key = secretDigest(token)
    const hit = cache.get(key)
    if (hit && hit.until > now()) return hit.answer
    // The same token at another server or for another client is another answer.
    const sharedName = `${options.endpoint}\n${options.clientId}\n${token}`
    if (shared !== undefined) {
      const entry = sharedAnswer(await shared.get('introspection', sharedName))
      if (entry !== undefined && entry.until > now()) {
        remember(key, entry)
        return entry.answer
      }
    }
    const basic = Buffer.from(
      `${encodeURIComponent(options.clientId)}:${encodeURIComponent(options.clientSecret)}`,
    ).toString('base64')
    const response = await options.fetch(options.endpoint, {
      method: 'POST',
      headers: {
        authorization: `Basic ${basic}`,
        'content-type': 'application/x-www-form-urlencoded',
        accept: 'application/json',
      },
      body: new URLSearchParams({ token, token_type_hint: 'access_token' }).toString(),
    })
    if (!response.ok) {
      await response.body?.cancel()
      throw new Error(`introspection answered HTTP ${response.status}`)
    }
    const answer = (await response.json()) as JsonObject
    const exp = typeof answer.exp === 'number' ? answer.exp * 1000 : Number.POSITIVE_INFINITY
    const until = Math.min(now() + options.cacheSeconds * 1000, exp)
    remember(key, { answer, until })
    // Only active tokens are shared: a refusal is cheap to ask again, and a token that becomes
    // active (it cannot) or is revoked is the issuer's word within cacheSeconds either way.
    if (shared !== undefined && answer.active === true && until > now()) {
      await shared.set(
        'introspection',
        sharedName,
        JSON.stringify({ answer, until }),
        until - now(),
      )
    }
    return answer
  }
  const tenantClaim = options.tenantClaim ?? 'tenant'

  return {
    async introspect(token, audiences) {
      let answer: JsonObject
      try {
        answer = await ask(token)
      } catch (err) {
        throw new AuthFailure('invalid_token', 'The token could not be introspected', {
          cause: err,
          unavailable: true,
        })
      }
      if (answer.active !== true) throw new AuthFailure('invalid_token', 'The token is not active')
      if (typeof answer.exp === 'number' && answer.exp * 1000 <= now()) {
        throw new AuthFailure('invalid_token', 'The token has expired')
      }
      if (
        options.issuer !== undefined &&
        answer.iss !== undefined &&
        answer.iss !== options.issuer
      ) {
        throw new AuthFailure('invalid_token', 'The token was not issued by the trusted issuer')
      }
      const aud = Array.isArray(answer.aud) ? answer.aud : [answer.aud]
      if (!aud.some((a) => typeof a === 'string' && audiences.includes(a))) {
        throw new AuthFailure(
          'invalid_token',
          'The token was not issued for this resource (audience)',
        )
      }
      // A client-credentials token has no user: the client is its own subject (as in RFC 9068).
      const subject = typeof answer.sub === 'string' ? answer.sub : answer.client_id
      if (typeof subject !== 'string') {
        throw new AuthFailure('invalid_token', 'The token has no subject')
      }
      const tenant = answer[tenantClaim]
      return {
        subject,
        tenant: typeof tenant === 'string' ? tenant : undefined,
        client: typeof answer.client_id === 'string' ? answer.client_id : undefined,
        scopes: typeof answer.scope === 'string' ? answer.scope.split(' ').filter(Boolean) : [],
        method: 'introspection',
        claims: answer,
      }
    },
  }
}

/** An entry read back from the shared cache, or undefined when it is not one. */
function sharedAnswer(text: string | undefined): CachedAnswer | undefined {
  if (text === undefined) return undefined
  try {
    const entry = JSON.parse(text) as Partial<CachedAnswer>
    return typeof entry.until === 'number' &&
      typeof entry.answer === 'object' &&
      entry.answer !== null &&
      entry.answer.active === true
      ? { answer: entry.answer, until: entry.until }
      : undefined
  } catch {
    return undefined
  }
}
