/**
 * The on-behalf-of assertion: a short-lived JWT Barbican signs for every upstream request,
 * saying which user, tenant and client the request is for. Upstreams verify it against
 * Barbican's published JWKS (`/.well-known/jwks.json`) instead of trusting a header anyone on
 * the path could set. The claims follow RFC 8693's vocabulary: `sub` is the user, `act` names
 * Barbican as the party acting for them, `aud` the one upstream it is meant for.
 */
import { randomUUID } from 'node:crypto'
import type { CryptoKey, JWK } from 'jose'
import { jose } from '../lazy-deps.ts'
import type { Identity } from './identity.ts'

/** The JWT `typ` of assertions, so they can never be mistaken for access tokens. */
export const ASSERTION_TYPE = 'obo+jwt'

export interface AssertionSignerOptions {
  /** Barbican's public base URL, the `iss` of every assertion (a function: known after listen). */
  readonly issuer: () => string
  readonly ttlSeconds: number
  /** PKCS#8 PEM of an EC P-256 key; absent: a key generated at start (fine for one instance). */
  readonly privateKeyPem?: string | undefined
}

export interface AssertionInput {
  readonly identity: Identity
  /** Who the assertion is for: the upstream's URL or `barbican:upstream:NAME`. */
  readonly audience: string
  /** The gateway's call id, which ties the upstream's logs to Barbican's audit. */
  readonly callId?: string | undefined
}

/** Signs assertions with one ES256 key and publishes its public half. */
export class AssertionSigner {
  readonly #options: AssertionSignerOptions
  #key: Promise<{ privateKey: CryptoKey; jwk: JWK }> | undefined

  constructor(options: AssertionSignerOptions) {
    this.#options = options
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

  /** A signed assertion for one upstream request. */
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
    if (input.callId !== undefined) claims.call_id = input.callId
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
