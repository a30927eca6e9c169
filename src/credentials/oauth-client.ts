/**
 * Barbican as an OAuth client of an upstream's authorization server: discovery (RFC 9728 from the
 * upstream, then RFC 8414 / OpenID Connect metadata), authorization code with PKCE S256 and the
 * RFC 8707 `resource` on both legs, the RFC 9207 `iss` check on the way back, refresh with
 * rotation, client credentials and RFC 8693 token exchange. Every request goes through the
 * guarded fetch client.
 */
import { createHash, randomBytes } from 'node:crypto'
import {
  type AuthorizationServerMetadata,
  discoverAuthorizationServer,
} from '../auth/as-metadata.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import type { TokenSet } from './token-store.ts'

/** Thrown for any OAuth failure; `code` is stable, `message` names the step. */
export class OAuthError extends Error {
  override readonly name: string = 'OAuthError'
  readonly code = 'ERR_OAUTH'
  /** The server's OAuth `error` (e.g. `invalid_client`), when it gave one. */
  readonly error: string | undefined

  constructor(message: string, options?: ErrorOptions & { error?: string | undefined }) {
    super(message, options)
    this.error = options?.error
  }
}

export interface OAuthClientConfig {
  readonly clientId: string
  readonly clientSecret?: string | undefined
}

/** A PKCE pair (RFC 7636, S256 only). */
export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url')
  const challenge = createHash('sha256').update(verifier).digest('base64url')
  return { verifier, challenge }
}

/**
 * The issuer protecting an upstream MCP server, from its RFC 9728 metadata (path-inserted form
 * first, then the root form).
 */
export async function discoverResourceIssuer(
  resource: string,
  fetch: GuardedFetch,
): Promise<string> {
  const url = new URL(resource)
  const path = url.pathname.replace(/\/+$/, '')
  const candidates = [
    `${url.origin}/.well-known/oauth-protected-resource${path}`,
    `${url.origin}/.well-known/oauth-protected-resource`,
  ]
  for (const candidate of candidates) {
    const res = await fetch(candidate, { headers: { accept: 'application/json' } }).catch(
      () => undefined,
    )
    if (!res?.ok) {
      await res?.body?.cancel()
      continue
    }
    const doc = (await res.json()) as { authorization_servers?: unknown }
    const first = Array.isArray(doc.authorization_servers)
      ? doc.authorization_servers[0]
      : undefined
    if (typeof first === 'string') return first
  }
  throw new OAuthError(
    `No protected resource metadata names an authorization server for ${resource}`,
  )
}

/**
 * Validated metadata, refusing servers that do not support PKCE S256; `discover` may be a cache
 * (IssuerMetadataCache) in place of asking the issuer.
 */
export async function authorizationServer(
  issuer: string,
  fetch: GuardedFetch,
  discover: (issuer: string) => Promise<AuthorizationServerMetadata> = (i) =>
    discoverAuthorizationServer(i, fetch),
): Promise<AuthorizationServerMetadata> {
  const metadata = await discover(issuer).catch((err: unknown) => {
    throw new OAuthError((err as Error).message, { cause: err })
  })
  if (!metadata.code_challenge_methods_supported?.includes('S256')) {
    throw new OAuthError(`${issuer} does not advertise PKCE S256 support; refusing to use it`)
  }
  return metadata
}

export interface AuthorizationRequest {
  readonly clientId: string
  readonly redirectUri: string
  readonly scopes: readonly string[]
  readonly resource: string
  readonly state: string
  readonly challenge: string
}

/** The URL the user's browser opens to authorize Barbican at the upstream's issuer. */
export function authorizationUrl(
  metadata: AuthorizationServerMetadata,
  r: AuthorizationRequest,
): string {
  if (!metadata.authorization_endpoint) {
    throw new OAuthError(`${metadata.issuer} has no authorization endpoint`)
  }
  const url = new URL(metadata.authorization_endpoint)
  url.searchParams.set('response_type', 'code')
  url.searchParams.set('client_id', r.clientId)
  url.searchParams.set('redirect_uri', r.redirectUri)
  url.searchParams.set('state', r.state)
  url.searchParams.set('code_challenge', r.challenge)
  url.searchParams.set('code_challenge_method', 'S256')
  url.searchParams.set('resource', r.resource)
  if (r.scopes.length > 0) url.searchParams.set('scope', r.scopes.join(' '))
  return url.toString()
}

/**
 * RFC 9207: an `iss` in the authorization response must equal the issuer we sent the user to,
 * by simple string comparison; a server that advertises the parameter must send it.
 */
export function checkResponseIssuer(
  metadata: AuthorizationServerMetadata,
  iss: string | null,
): void {
  if (iss !== null && iss !== metadata.issuer) {
    throw new OAuthError('The authorization response came from another issuer (iss mismatch)')
  }
  if (iss === null && metadata.authorization_response_iss_parameter_supported === true) {
    throw new OAuthError('The authorization response lacks the iss parameter its issuer promises')
  }
}

/** Posts a token request and turns the answer into a TokenSet. */
export async function tokenRequest(
  metadata: Pick<AuthorizationServerMetadata, 'token_endpoint' | 'issuer'>,
  client: OAuthClientConfig,
  params: Record<string, string>,
  fetch: GuardedFetch,
): Promise<TokenSet> {
  if (!metadata.token_endpoint) throw new OAuthError(`${metadata.issuer} has no token endpoint`)
  const body = new URLSearchParams(params)
  const headers: Record<string, string> = {
    'content-type': 'application/x-www-form-urlencoded',
    accept: 'application/json',
  }
  if (client.clientSecret !== undefined) {
    const user = encodeURIComponent(client.clientId)
    const pass = encodeURIComponent(client.clientSecret)
    headers.authorization = `Basic ${Buffer.from(`${user}:${pass}`).toString('base64')}`
  } else {
    body.set('client_id', client.clientId)
  }
  const res = await fetch(metadata.token_endpoint, {
    method: 'POST',
    headers,
    body: body.toString(),
  })
  const answer = (await res.json().catch(() => ({}))) as Record<string, unknown>
  if (!res.ok || typeof answer.access_token !== 'string') {
    const reason = typeof answer.error === 'string' ? answer.error : `HTTP ${res.status}`
    throw new OAuthError(`The token request (${params.grant_type}) failed: ${reason}`, {
      error: typeof answer.error === 'string' ? answer.error : undefined,
    })
  }
  return {
    accessToken: answer.access_token,
    refreshToken: typeof answer.refresh_token === 'string' ? answer.refresh_token : undefined,
    expiresAt:
      typeof answer.expires_in === 'number' ? Date.now() + answer.expires_in * 1000 : undefined,
    scope: typeof answer.scope === 'string' ? answer.scope : undefined,
  }
}

/**
 * Refreshes; when the server rotates the refresh token the new one replaces the old, and when it
 * does not, the old one is kept.
 */
export async function refreshTokens(
  metadata: AuthorizationServerMetadata,
  client: OAuthClientConfig,
  tokens: TokenSet,
  resource: string,
  fetch: GuardedFetch,
): Promise<TokenSet> {
  if (!tokens.refreshToken) throw new OAuthError('No refresh token')
  const next = await tokenRequest(
    metadata,
    client,
    { grant_type: 'refresh_token', refresh_token: tokens.refreshToken, resource },
    fetch,
  )
  return { ...next, refreshToken: next.refreshToken ?? tokens.refreshToken }
}
