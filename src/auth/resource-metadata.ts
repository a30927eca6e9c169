/**
 * OAuth 2.0 Protected Resource Metadata (RFC 9728) for each virtual server, and the
 * `WWW-Authenticate` challenges that point clients at it. Every virtual server is its own
 * protected resource: its canonical URI (RFC 8707) is the audience its tokens must carry, so a
 * token minted for one server cannot be replayed at another.
 */

/** Where the PRM document of a resource lives: the well-known prefix inserted before its path. */
export const PRM_PREFIX = '/.well-known/oauth-protected-resource'

/** The MCP path of a virtual server: `/mcp` for 'default', `/mcp/NAME` otherwise. */
export function serverPath(server: string): string {
  return server === 'default' ? '/mcp' : `/mcp/${encodeURIComponent(server)}`
}

/**
 * The canonical resource URI of a virtual server under Barbican's public base URL
 * (`https://gw.example.com` → `https://gw.example.com/mcp/NAME`): lower-case scheme and host,
 * no trailing slash, no fragment, as RFC 8707 and the MCP authorization spec ask.
 */
export function resourceUri(base: string, server: string): string {
  const url = new URL(base)
  const prefix = url.pathname.replace(/\/+$/, '')
  return `${url.protocol}//${url.host}${prefix}${serverPath(server)}`
}

/** The URL of a resource's PRM document (path-inserted form, RFC 9728 §3.1). */
export function metadataUrl(base: string, server: string): string {
  const url = new URL(base)
  const prefix = url.pathname.replace(/\/+$/, '')
  return `${url.protocol}//${url.host}${PRM_PREFIX}${prefix}${serverPath(server)}`
}

export interface ResourceMetadataInput {
  readonly resource: string
  readonly authorizationServers: readonly string[]
  readonly scopes: readonly string[]
  readonly name: string
  /** Barbican's own JWKS, where upstreams verify the on-behalf-of assertions it signs. */
  readonly jwksUri?: string | undefined
}

/** The PRM document (RFC 9728 §2). */
export function resourceMetadata(input: ResourceMetadataInput): Record<string, unknown> {
  return {
    resource: input.resource,
    authorization_servers: [...input.authorizationServers],
    ...(input.scopes.length > 0 ? { scopes_supported: [...input.scopes] } : {}),
    bearer_methods_supported: ['header'],
    resource_name: input.name,
    ...(input.jwksUri ? { jwks_uri: input.jwksUri } : {}),
  }
}

/** The error a challenge reports (RFC 6750 §3.1); absent when no credentials were sent. */
export type ChallengeError = 'invalid_request' | 'invalid_token' | 'insufficient_scope'

export interface Challenge {
  /** Absent when no metadata is published (API keys only: there is no authorization server). */
  readonly resourceMetadata?: string | undefined
  readonly scopes: readonly string[]
  readonly error?: ChallengeError | undefined
  readonly description?: string | undefined
}

/**
 * `WWW-Authenticate: Bearer resource_metadata="…", scope="…"[, error="…", error_description="…"]`.
 * Quotes and backslashes are removed from the free text rather than escaped: some clients parse
 * this header with naive regular expressions.
 */
export function wwwAuthenticate(challenge: Challenge): string {
  const params: string[] = []
  if (challenge.resourceMetadata !== undefined) {
    params.push(`resource_metadata="${clean(challenge.resourceMetadata)}"`)
  }
  if (challenge.scopes.length > 0) params.push(`scope="${clean(challenge.scopes.join(' '))}"`)
  if (challenge.error) params.push(`error="${challenge.error}"`)
  if (challenge.description) params.push(`error_description="${clean(challenge.description)}"`)
  return params.length === 0 ? 'Bearer' : `Bearer ${params.join(', ')}`
}

function clean(text: string): string {
  return text.replace(/["\\\r\n]/g, '').slice(0, 300)
}
