/**
 * Verification of JWT access tokens (RFC 9068) against the issuer's JWKS. The key set is fetched
 * through the guarded client, cached, and refetched when a token names a key id it does not hold
 * (rotation), at most once per cooldown. Only asymmetric algorithms from the operator's list are
 * accepted: `none` and HMAC never, so a public key can never be used as an HMAC secret. In a
 * fleet the key set is shared in Redis (shared-cache.ts, ADR 082): a replica about to fetch it
 * takes the copy another replica fetched after its own, and asks the issuer only when there is
 * none, so a rotation still reaches the issuer once. Without a configured `jwksUri` the key set's
 * address comes from the issuer's metadata, through the same two levels (as-metadata.ts).
 */
import type { JWTPayload, JWTVerifyGetKey } from 'jose'
import { jose } from '../common/lazy-deps.ts'
import type { ASYMMETRIC_ALGORITHMS } from '../config/auth-schema.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { discoverAuthorizationServer, type IssuerMetadataCache } from './as-metadata.ts'
import { AuthFailure } from './auth-failure.ts'
import type { Identity } from './identity.ts'
import type { SharedCache } from './shared-cache.ts'

export type JwtAlgorithm = (typeof ASYMMETRIC_ALGORITHMS)[number]

export interface JwtVerifierOptions {
  readonly issuer: string
  /** Where the keys are; discovered from the issuer's metadata when absent. */
  readonly jwksUri?: string | undefined
  readonly algorithms: readonly JwtAlgorithm[]
  /** Leeway for `exp` and `nbf`, for clocks slightly apart. */
  readonly clockToleranceSeconds: number
  /** Claim holding the tenant (default `tenant`). */
  readonly tenantClaim?: string | undefined
  readonly fetch: GuardedFetch
  /**
   * Where the issuer's metadata comes from when `jwksUri` is absent: a cache shared with the
   * rest of the runtime (and, in a fleet, the other replicas). Absent: discovered here.
   */
  readonly metadata?: IssuerMetadataCache | undefined
  /** Least time between two JWKS refetches triggered by unknown key ids (default 30 s). */
  readonly cooldownMs?: number | undefined
  /** The fleet's second level (Redis), behind jose's in-process key set. */
  readonly shared?: SharedCache | undefined
}

/** How long a key set is used before it is fetched again (jose's cacheMaxAge), here or shared. */
const JWKS_MAX_AGE_MS = 10 * 60_000

/** Verifies JWT access tokens for one issuer. */
export interface JwtVerifier {
  /** Resolves the caller's identity, or throws AuthFailure('invalid_token'). */
  verify(token: string, audiences: readonly string[]): Promise<Identity>
  /**
   * True once an identity this verifier returned is past its `exp` (with the clock tolerance):
   * the one property of a verified token that changes while a connection holds it.
   */
  expired(identity: Identity, nowMs?: number): boolean
}

export function createJwtVerifier(options: JwtVerifierOptions): JwtVerifier {
  let keys: Promise<JWTVerifyGetKey> | undefined
  const keySet = (): Promise<JWTVerifyGetKey> => {
    keys ??= (async () => {
      const uri =
        options.jwksUri ??
        (options.metadata === undefined
          ? await discoverAuthorizationServer(options.issuer, options.fetch)
          : await options.metadata.get(options.issuer)
        ).jwks_uri
      if (typeof uri !== 'string') throw new Error(`Issuer ${options.issuer} publishes no jwks_uri`)
      const j = jose()
      const fetchKeys = (url: string, init: RequestInit) => options.fetch(url, init)
      // When the key set this verifier holds was fetched, by this replica or another.
      const held = { at: 0 }
      return j.createRemoteJWKSet(new URL(uri), {
        cooldownDuration: options.cooldownMs ?? 30_000,
        cacheMaxAge: JWKS_MAX_AGE_MS,
        [j.customFetch]: (url, init) =>
          options.shared === undefined
            ? fetchKeys(url, init as RequestInit)
            : sharedKeySet(options.shared, held, url, init as RequestInit, fetchKeys),
      })
    })()
    // A failed discovery is retried on the next request rather than cached.
    keys.catch(() => {
      keys = undefined
    })
    return keys
  }
  const tenantClaim = options.tenantClaim ?? 'tenant'

  return {
    expired(identity, nowMs = Date.now()) {
      const exp = identity.claims?.exp
      // jose's rule: expired when exp <= now - tolerance. No exp was refused by verify().
      return (
        typeof exp !== 'number' || exp <= Math.floor(nowMs / 1000) - options.clockToleranceSeconds
      )
    },
    async verify(token, audiences) {
      let payload: JWTPayload
      let getKey: JWTVerifyGetKey
      try {
        getKey = await keySet()
      } catch (err) {
        throw new AuthFailure('invalid_token', 'The issuer cannot be reached to check the token', {
          cause: err,
          unavailable: true,
        })
      }
      try {
        ;({ payload } = await jose().jwtVerify(token, getKey, {
          issuer: options.issuer,
          audience: [...audiences],
          algorithms: [...options.algorithms],
          clockTolerance: options.clockToleranceSeconds,
          requiredClaims: ['exp', 'sub'],
        }))
      } catch (err) {
        throw new AuthFailure('invalid_token', describe(err), {
          cause: err,
          // Not a verdict on the token: the key set could not be fetched.
          unavailable:
            !(err instanceof jose().errors.JOSEError) || err instanceof jose().errors.JWKSTimeout,
        })
      }
      const scopes =
        typeof payload.scope === 'string'
          ? payload.scope.split(' ').filter(Boolean)
          : Array.isArray(payload.scp)
            ? payload.scp.filter((s): s is string => typeof s === 'string')
            : []
      const client =
        typeof payload.client_id === 'string'
          ? payload.client_id
          : typeof payload.azp === 'string'
            ? payload.azp
            : undefined
      const tenant = payload[tenantClaim]
      return {
        subject: payload.sub as string,
        tenant: typeof tenant === 'string' ? tenant : undefined,
        client,
        scopes,
        method: 'jwt',
        claims: payload as JsonObject,
      }
    },
  }
}

/**
 * jose's fetch of a key set, through the fleet's cache: a copy fetched after the one the
 * verifier holds (`held`) is used as it is (jose asks again only for an unknown key id, after its
 * cooldown, or when its copy aged out, and in each case a newer copy is what it needs);
 * otherwise the issuer is asked and its answer shared for the key set's lifetime.
 */
async function sharedKeySet(
  shared: SharedCache,
  held: { at: number },
  url: string,
  init: RequestInit,
  fetchKeys: (url: string, init: RequestInit) => Promise<Response>,
): Promise<Response> {
  const copy = parseKeySet(await shared.get('jwks', url))
  if (copy !== undefined && copy.at > held.at && Date.now() - copy.at < JWKS_MAX_AGE_MS) {
    held.at = copy.at
    return new Response(copy.body, {
      status: 200,
      headers: { 'content-type': 'application/json' },
    })
  }
  const response = await fetchKeys(url, init)
  if (response.status !== 200) return response
  const body = await response.text()
  const at = Date.now()
  held.at = at
  await shared.set('jwks', url, JSON.stringify({ at, body }), JWKS_MAX_AGE_MS)
  return new Response(body, { status: 200, headers: { 'content-type': 'application/json' } })
}

function parseKeySet(text: string | undefined): { at: number; body: string } | undefined {
  if (text === undefined) return undefined
  try {
    const copy = JSON.parse(text) as { at?: unknown; body?: unknown }
    return typeof copy.at === 'number' && typeof copy.body === 'string'
      ? { at: copy.at, body: copy.body }
      : undefined
  } catch {
    return undefined
  }
}

/** A short reason for the caller; detailed enough to fix a client, never leaking keys. */
function describe(err: unknown): string {
  const { errors } = jose()
  if (err instanceof errors.JWTExpired) return 'The token has expired'
  if (err instanceof errors.JWTClaimValidationFailed) {
    if (err.claim === 'aud') return 'The token was not issued for this resource (audience)'
    if (err.claim === 'iss') return 'The token was not issued by the trusted issuer'
    if (err.claim === 'nbf') return 'The token is not valid yet'
    return `The token's "${err.claim}" claim is invalid`
  }
  if (err instanceof errors.JOSEAlgNotAllowed) return 'The token is signed with a refused algorithm'
  if (err instanceof errors.JWSSignatureVerificationFailed) return 'The token signature is invalid'
  if (err instanceof errors.JWKSNoMatchingKey) return 'The token is signed with an unknown key'
  if (err instanceof errors.JWSInvalid || err instanceof errors.JWTInvalid) {
    return 'The token is malformed'
  }
  if (err instanceof errors.JOSEError) return 'The token is invalid'
  return 'The token could not be verified'
}
