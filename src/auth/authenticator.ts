/**
 * Inbound authentication for HTTP: turns the `Authorization` header of every request into an
 * Identity or into the precise refusal the MCP authorization spec asks for (401 with a challenge
 * naming the resource's metadata, 403 `insufficient_scope` for step-up). It runs on every
 * request, before any session exists and again on every request of a session, so an expired
 * token or a revoked key stops working at once.
 */
import type { IncomingHttpHeaders } from 'node:http'
import { BarbicanError, jsonRpcCodeOf } from '../common/errors.ts'
import { API_KEY_PREFIX, type ApiKeyStore } from './api-keys.ts'
import { AuthFailure } from './auth-failure.ts'
import type { JwtVerifier } from './bearer.ts'
import type { Identity } from './identity.ts'
import type { Introspector } from './introspection.ts'
import { rememberSubjectToken } from './request-identity.ts'
import { metadataUrl, resourceMetadata, resourceUri, wwwAuthenticate } from './resource-metadata.ts'

export interface InboundAuthOptions {
  /** Barbican's public base URL (`https://gw.example.com`); a function because a test's port is known late. */
  readonly baseUrl: () => string
  /** Names of the virtual servers (each one a protected resource). */
  readonly servers: () => readonly string[]
  readonly jwt?: JwtVerifier | undefined
  readonly introspection?: Introspector | undefined
  readonly apiKeys?: ApiKeyStore | undefined
  /** Scopes every token must carry (also advertised in challenges and metadata). */
  readonly requiredScopes: readonly string[]
  /** Extra scopes per virtual server, for step-up authorization. */
  readonly serverScopes?: Readonly<Record<string, readonly string[]>> | undefined
  /** Issuers listed in the metadata documents. */
  readonly authorizationServers: readonly string[]
  /** Barbican's JWKS URL, listed in the metadata documents. */
  readonly jwksUri?: (() => string) | undefined
}

export type AuthResult =
  | { readonly ok: true; readonly identity: Identity }
  | {
      readonly ok: false
      readonly status: 401 | 403 | 503
      readonly message: string
      readonly wwwAuthenticate: string
      /** The JSON-RPC error code of the refusal's body, when not the generic -32600. */
      readonly code?: number
    }

/**
 * A credential verified for a connection that outlives one request (a WebSocket): the
 * `Authorization` header it presented, the virtual server it was verified for, and the identity
 * it stood for.
 */
export interface HeldCredential {
  readonly authorization: string | undefined
  readonly server: string
  readonly identity: Identity
}

/** Authenticates requests for the virtual servers of one gateway. */
export class InboundAuthenticator {
  readonly #options: InboundAuthOptions
  /** The scopes each server requires, worked out once (the options do not change). */
  readonly #required = new Map<string | undefined, readonly string[]>()
  /**
   * The tenants the gateway configures (docs/tenants.md); a credential naming any other is
   * refused (fail closed). Undefined: no `tenants:` section, the tenant is only a label.
   */
  knownTenants: ReadonlySet<string> | undefined

  constructor(options: InboundAuthOptions) {
    this.#options = options
  }

  /**
   * Authenticates one request addressed to `server`; `undefined` accepts a token for any of the
   * gateway's servers (only for a legacy `/messages` POST naming no live session, which is then
   * refused anyway: a live session's own server is always named).
   */
  async authenticate(
    headers: IncomingHttpHeaders,
    server: string | undefined,
  ): Promise<AuthResult> {
    try {
      const token = bearerToken(headers.authorization)
      return this.#admit(await this.#verify(token, server), server)
    } catch (err) {
      return this.#refusal(err, server)
    }
  }

  /**
   * Checks again a credential a long-lived connection (a WebSocket) was opened with, before each
   * message it carries; cheap enough for that. An API key is looked up again, so a revoked or
   * removed key fails at once. A JWT cannot change (signature, issuer and audience were verified
   * at the upgrade) except by expiring, so only `exp` is compared with the clock. Other tokens
   * are authenticated again (introspection answers are cached briefly). Synchronous except for
   * that last case, so a connection's messages need not wait a turn of the event loop.
   */
  recheck(held: HeldCredential): AuthResult | Promise<AuthResult> {
    const { identity, server } = held
    const { jwt, apiKeys } = this.#options
    try {
      if (identity.method === 'jwt' && jwt !== undefined) {
        if (jwt.expired(identity)) throw new AuthFailure('invalid_token', 'The token has expired')
        return this.#admit(identity, server)
      }
      if (identity.method === 'api-key' && apiKeys !== undefined) {
        const current = apiKeys.verify(bearerToken(held.authorization))
        if (!current) throw new AuthFailure('invalid_token', 'The API key is unknown or revoked')
        return this.#admit(current, server)
      }
    } catch (err) {
      return this.#refusal(err, server)
    }
    return this.authenticate({ authorization: held.authorization }, server)
  }

  /** `identity` if it carries every scope `server` requires; throws insufficient_scope if not. */
  #admit(identity: Identity, server: string | undefined): AuthResult {
    const tenants = this.knownTenants
    if (tenants !== undefined && identity.tenant !== undefined && !tenants.has(identity.tenant)) {
      throw new BarbicanError(
        'ERR_TENANT_UNKNOWN',
        `The credential names tenant "${identity.tenant.slice(0, 64)}", which this gateway does not serve`,
      )
    }
    const required = this.#scopesFor(server)
    const missing =
      required.length === 0 ? required : required.filter((s) => !identity.scopes.includes(s))
    if (missing.length > 0) {
      throw new AuthFailure(
        'insufficient_scope',
        `The token lacks the scope${missing.length > 1 ? 's' : ''} ${missing.join(' ')}`,
      )
    }
    return { ok: true, identity }
  }

  /** The refusal (status, reason, challenge) for what authenticating threw. */
  #refusal(err: unknown, server: string | undefined): AuthResult {
    if (err instanceof BarbicanError && err.code === 'ERR_TENANT_UNKNOWN') {
      // A valid credential for nobody here: signing in again cannot help, so no OAuth error.
      return {
        ok: false,
        status: 403,
        message: err.message,
        wwwAuthenticate: 'Bearer realm="barbican"',
        code: jsonRpcCodeOf(err.code),
      }
    }
    const failure =
      err instanceof AuthFailure ? err : new AuthFailure('invalid_token', 'Authentication failed')
    return {
      ok: false,
      status: failure.status,
      message: failure.message,
      wwwAuthenticate: wwwAuthenticate({
        resourceMetadata: this.publishesMetadata
          ? metadataUrl(this.#options.baseUrl(), server ?? 'default')
          : undefined,
        // All the scopes the operation needs, in one challenge (MCP 2026-07-28 step-up).
        scopes: this.#scopesFor(server),
        // An unverifiable token is not known to be bad: no error the client would act on.
        error: failure.unavailable ? undefined : failure.error,
        description: failure.error && !failure.unavailable ? failure.message : undefined,
      }),
    }
  }

  /** RFC 9728 documents exist only when there is an authorization server to name. */
  get publishesMetadata(): boolean {
    return this.#options.authorizationServers.length > 0
  }

  /** The RFC 9728 document of one virtual server. */
  metadata(server: string): Record<string, unknown> {
    return resourceMetadata({
      resource: resourceUri(this.#options.baseUrl(), server),
      authorizationServers: this.#options.authorizationServers,
      scopes: this.#scopesFor(server),
      name: server === 'default' ? 'Barbican' : `Barbican: ${server}`,
      jwksUri: this.#options.jwksUri?.(),
    })
  }

  #scopesFor(server: string | undefined): readonly string[] {
    let scopes = this.#required.get(server)
    if (scopes === undefined) {
      const extra = server === undefined ? [] : (this.#options.serverScopes?.[server] ?? [])
      scopes = Object.freeze([...new Set([...this.#options.requiredScopes, ...extra])])
      // Only the gateway's own server names are kept (a request names one of a fixed few).
      if (server === undefined || this.#options.servers().includes(server)) {
        this.#required.set(server, scopes)
      }
    }
    return scopes
  }

  async #verify(token: string, server: string | undefined): Promise<Identity> {
    const { apiKeys, jwt, introspection } = this.#options
    if (token.startsWith(API_KEY_PREFIX) && apiKeys) {
      const identity = apiKeys.verify(token)
      if (!identity) throw new AuthFailure('invalid_token', 'The API key is unknown or revoked')
      return identity
    }
    const base = this.#options.baseUrl()
    const names = server === undefined ? this.#options.servers() : [server]
    const audiences = names.map((name) => resourceUri(base, name))
    let identity: Identity
    if (jwt && looksLikeJwt(token)) identity = await jwt.verify(token, audiences)
    else if (introspection) identity = await introspection.introspect(token, audiences)
    else if (jwt) identity = await jwt.verify(token, audiences)
    else throw new AuthFailure('invalid_token', 'The token is not accepted here')
    rememberSubjectToken(identity, token)
    return identity
  }
}

/**
 * The bearer token of an `Authorization` header (RFC 6750 §2.1); never from the query. Every
 * header that yields no usable token is a 401 with a challenge, since MCP clients start OAuth
 * discovery only on a 401 (docs/decisions/019): another scheme (`Basic …`) is treated as no
 * credentials (RFC 6750 §3.1: no error code for an unsupported method), an empty `Bearer` as
 * `invalid_request`, a value that is not token68 as `invalid_token` (malformed).
 */
export function bearerToken(header: string | undefined): string {
  if (header === undefined || header.trim() === '') {
    throw new AuthFailure(undefined, 'Authentication required')
  }
  const scheme = /^\s*(\S+)/.exec(header)?.[1] ?? ''
  if (scheme.toLowerCase() !== 'bearer') {
    throw new AuthFailure(undefined, 'Authentication required: only Bearer tokens are accepted')
  }
  const value = header.trim().slice(scheme.length).trim()
  if (value === '') {
    throw new AuthFailure('invalid_request', 'The Authorization header carries no Bearer token')
  }
  if (!/^[A-Za-z0-9\-._~+/]+=*$/.test(value)) {
    throw new AuthFailure('invalid_token', 'The Bearer token is malformed')
  }
  return value
}

function looksLikeJwt(token: string): boolean {
  return /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*$/.test(token)
}
