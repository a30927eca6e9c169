/**
 * The on-behalf-of assertion: a short-lived JWT Barbican signs for every upstream request,
 * saying which user, tenant and client the request is for. Upstreams verify it against
 * Barbican's published JWKS (`/.well-known/jwks.json`) instead of trusting a header anyone on
 * the path could set. The claims follow RFC 8693's vocabulary: `sub` is the user, `act` names
 * Barbican as the party acting for them, `aud` the one upstream it is meant for.
 *
 * An assertion names a caller and an upstream, not a call, so one signed assertion serves every
 * request of the same caller to the same upstream while more than half of its lifetime remains
 * (ADR 013): signing (ES256 through WebCrypto) was the largest cost of an authenticated call.
 * In a fleet whose replicas share the signing key (`assertion.privateKeyPem`), the assertions
 * are shared in Redis too (shared-cache.ts, ADR 082): a replica that has none in memory takes
 * the one another replica signed while more than half its lifetime remains.
 */
import { randomUUID } from 'node:crypto'
import type { CryptoKey, JWK } from 'jose'
import { jose } from '../common/lazy-deps.ts'
import type { Identity } from './identity.ts'
import type { SharedCache } from './shared-cache.ts'

/** The JWT `typ` of assertions, so they can never be mistaken for access tokens. */
export const ASSERTION_TYPE = 'obo+jwt'

export interface AssertionSignerOptions {
  /** Barbican's public base URL, the `iss` of every assertion (a function: known after listen). */
  readonly issuer: () => string
  readonly ttlSeconds: number
  /** PKCS#8 PEM of an EC P-256 key; absent: a key generated at start (fine for one instance). */
  readonly privateKeyPem?: string | undefined
  /**
   * The fleet's second level (Redis). Used only with `privateKeyPem`: a key generated at start
   * is this replica's alone, and its assertions verify against no other replica's JWKS.
   */
  readonly shared?: SharedCache | undefined
}

export interface AssertionInput {
  readonly identity: Identity
  /** Who the assertion is for: the upstream's URL or `barbican:upstream:NAME`. */
  readonly audience: string
}

/** How many (audience, caller) assertions are kept for reuse; the oldest go first. */
const MAX_CACHED = 10_000

interface Cached {
  /** The signed assertion (a promise while it is being signed, shared by concurrent calls). */
  readonly token: Promise<string>
  readonly issuer: string
  readonly life: Lifetime
}

/** When an assertion was signed, and when it stops being reused (ms). */
interface Lifetime {
  /** The clock jose reads for `iat`; earlier than the entry when another replica signed it. */
  signedAt: number
  /** Half the lifetime after signing: a new one is signed from then on. */
  renewAt: number
}

/** An assertion as the fleet shares it. */
interface SharedAssertion {
  readonly token: string
  readonly kid: string
  readonly signedAt: number
  readonly renewAt: number
}

/** Signs assertions with one ES256 key and publishes its public half. */
export class AssertionSigner {
  readonly #options: AssertionSignerOptions
  #key: Promise<{ privateKey: CryptoKey; jwk: JWK }> | undefined
  /** Reusable assertions by audience and caller (see `assertion`). */
  readonly #cache = new Map<string, Cached>()

  readonly #shared: SharedCache | undefined

  constructor(options: AssertionSignerOptions) {
    this.#options = options
    this.#shared = options.privateKeyPem ? options.shared : undefined
  }

  async #material(): Promise<{ privateKey: CryptoKey; jwk: JWK }> {
    this.#key ??= (async () => {
      const { calculateJwkThumbprint, exportJWK, generateKeyPair, importPKCS8 } = jose()
      let privateKey: CryptoKey
      let publicJwk: JWK
      if (this.#options.privateKeyPem) {
        privateKey = await importPKCS8(this.#options.privateKeyPem, 'ES256', { extractable: true })
        const { d: _d, ...pub } = await exportJWK(privateKey)
        publicJwk = pub
      } else {
        const pair = await generateKeyPair('ES256')
        privateKey = pair.privateKey
        publicJwk = await exportJWK(pair.publicKey)
      }
      const kid = await calculateJwkThumbprint(publicJwk)
      return { privateKey, jwk: { ...publicJwk, kid, alg: 'ES256', use: 'sig' } }
    })()
    return this.#key
  }

  /** The JWKS document upstreams fetch to verify assertions. */
  async jwks(): Promise<{ keys: JWK[] }> {
    return { keys: [(await this.#material()).jwk] }
  }

  /**
   * The assertion for a request of `input.identity` to `input.audience`: the one signed last for
   * exactly this caller and audience while more than half its lifetime remains, a new one
   * otherwise. The cache key holds every claim the assertion states about the caller, so a
   * different caller, tenant, client, scope set or audience never shares one.
   */
  assertion(input: AssertionInput): Promise<string> {
    const issuer = this.#options.issuer()
    const key = cacheKey(input)
    const now = Date.now()
    const cached = this.#cache.get(key)
    // A clock set back (now < signedAt) would make `iat`/`nbf` lie in the future: sign anew.
    if (
      cached !== undefined &&
      now < cached.life.renewAt &&
      now >= cached.life.signedAt &&
      cached.issuer === issuer
    ) {
      return cached.token
    }
    if (cached !== undefined) this.#cache.delete(key)
    else if (this.#cache.size >= MAX_CACHED) {
      // Map order is insertion order: the first key is the one signed longest ago.
      this.#cache.delete(this.#cache.keys().next().value as string)
    }
    const life: Lifetime = { signedAt: now, renewAt: now + this.#options.ttlSeconds * 500 }
    const token =
      this.#shared === undefined
        ? this.sign(input)
        : this.#sharedOrSigned(this.#shared, input, life, `${issuer}\n${key}`)
    const entry: Cached = { token, issuer, life }
    this.#cache.set(key, entry)
    // A failed signature is not kept: the next request tries again.
    token.catch(() => {
      if (this.#cache.get(key) === entry) this.#cache.delete(key)
    })
    return token
  }

  /**
   * The assertion another replica signed for this caller and audience, with the same key and
   * more than half its lifetime left; else a new one, shared until its half-life.
   */
  async #sharedOrSigned(
    shared: SharedCache,
    input: AssertionInput,
    life: Lifetime,
    name: string,
  ): Promise<string> {
    const { jwk } = await this.#material()
    const copy = parseShared(await shared.get('assertion', name))
    const now = Date.now()
    if (copy !== undefined && copy.kid === jwk.kid && now >= copy.signedAt && now < copy.renewAt) {
      life.signedAt = copy.signedAt
      life.renewAt = copy.renewAt
      return copy.token
    }
    const token = await this.sign(input)
    const value: SharedAssertion = {
      token,
      kid: jwk.kid!,
      signedAt: life.signedAt,
      renewAt: life.renewAt,
    }
    await shared.set('assertion', name, JSON.stringify(value), life.renewAt - Date.now())
    return token
  }

  /** A newly signed assertion (its own `jti` and `iat`); `assertion` reuses them instead. */
  async sign(input: AssertionInput): Promise<string> {
    const { privateKey, jwk } = await this.#material()
    const { identity } = input
    const issuer = this.#options.issuer()
    const claims: Record<string, unknown> = {
      act: { sub: issuer },
      auth_method: identity.method,
    }
    if (identity.tenant !== undefined) claims.tenant = identity.tenant
    if (identity.client !== undefined) claims.client_id = identity.client
    if (identity.scopes.length > 0) claims.scope = identity.scopes.join(' ')
    return await new (jose().SignJWT)(claims)
      .setProtectedHeader({ alg: 'ES256', typ: ASSERTION_TYPE, kid: jwk.kid! })
      .setIssuer(issuer)
      .setSubject(identity.subject)
      .setAudience(input.audience)
      .setIssuedAt()
      .setNotBefore('0s')
      .setExpirationTime(`${this.#options.ttlSeconds}s`)
      .setJti(randomUUID())
      .sign(privateKey)
  }
}

/** Everything an assertion states about its caller and audience, unambiguously joined. */
function cacheKey({ identity, audience }: AssertionInput): string {
  return JSON.stringify([
    audience,
    identity.method,
    identity.subject,
    identity.tenant ?? null,
    identity.client ?? null,
    identity.scopes,
  ])
}

function parseShared(text: string | undefined): SharedAssertion | undefined {
  if (text === undefined) return undefined
  try {
    const v = JSON.parse(text) as Partial<SharedAssertion>
    return typeof v.token === 'string' &&
      typeof v.kid === 'string' &&
      typeof v.signedAt === 'number' &&
      typeof v.renewAt === 'number'
      ? (v as SharedAssertion)
      : undefined
  } catch {
    return undefined
  }
}
