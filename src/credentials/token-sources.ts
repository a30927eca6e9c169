/**
 * Upstream credentials that need no browser: client credentials (Barbican's own token for the
 * upstream, shared by all users, cached until shortly before it expires) and RFC 8693 token
 * exchange (a token for the upstream obtained from the identity provider both trust, in exchange
 * for the caller's verified inbound token, cached per user). The inbound token is sent only to
 * that identity provider's token endpoint, never to the upstream.
 */
import type { CredentialOutcome, CredentialSource } from '../auth/context.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey, subjectToken } from '../auth/request-identity.ts'
import type { GuardedFetch } from '../net/guarded-fetch.ts'
import { OAuthError, tokenRequest } from './oauth-client.ts'
import type { TokenSet } from './token-store.ts'

const MARGIN_MS = 30_000
const MAX_CACHED = 10_000

export interface TokenEndpointConfig {
  readonly tokenEndpoint: string
  readonly clientId: string
  readonly clientSecret: string
  readonly scopes: readonly string[]
  readonly resource: string
}

function fresh(tokens: TokenSet | undefined): tokens is TokenSet {
  return tokens !== undefined && (tokens.expiresAt ?? Infinity) - MARGIN_MS > Date.now()
}

function bearer(tokens: TokenSet): CredentialOutcome {
  return { headers: { authorization: `Bearer ${tokens.accessToken}` } }
}

/** Barbican's own token for the upstream (OAuth client credentials grant). */
export function clientCredentialsSource(
  config: TokenEndpointConfig,
  fetch: GuardedFetch,
): CredentialSource {
  let cached: Promise<TokenSet> | undefined
  const endpoint = { token_endpoint: config.tokenEndpoint, issuer: config.tokenEndpoint }
  return {
    async forUser() {
      const current = cached ? await cached.catch(() => undefined) : undefined
      if (fresh(current)) return bearer(current)
      cached = tokenRequest(
        endpoint,
        config,
        {
          grant_type: 'client_credentials',
          resource: config.resource,
          ...(config.scopes.length > 0 ? { scope: config.scopes.join(' ') } : {}),
        },
        fetch,
      )
      return bearer(await cached)
    },
    async rejected() {
      cached = undefined
    },
  }
}

/** A per-user token for the upstream, exchanged for the caller's own (RFC 8693). */
export function tokenExchangeSource(
  config: TokenEndpointConfig,
  fetch: GuardedFetch,
): CredentialSource {
  const cache = new Map<string, TokenSet>()
  const endpoint = { token_endpoint: config.tokenEndpoint, issuer: config.tokenEndpoint }
  return {
    async forUser(identity: Identity) {
      const key = identityKey(identity)
      const hit = cache.get(key)
      if (fresh(hit)) return bearer(hit)
      const subject = subjectToken(identity)
      if (subject === undefined) {
        throw new OAuthError('Token exchange needs a caller authenticated with an access token')
      }
      const tokens = await tokenRequest(
        endpoint,
        config,
        {
          grant_type: 'urn:ietf:params:oauth:grant-type:token-exchange',
          subject_token: subject,
          subject_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          requested_token_type: 'urn:ietf:params:oauth:token-type:access_token',
          resource: config.resource,
          ...(config.scopes.length > 0 ? { scope: config.scopes.join(' ') } : {}),
        },
        fetch,
      )
      if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value as string)
      cache.set(key, tokens)
      return bearer(tokens)
    },
    async rejected(identity: Identity) {
      cache.delete(identityKey(identity))
    },
  }
}
