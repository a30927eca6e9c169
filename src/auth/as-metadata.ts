/**
 * Authorization server metadata discovery: RFC 8414 first, then OpenID Connect Discovery, in the
 * order the MCP authorization spec fixes for issuers with and without a path. The document's
 * `issuer` must equal the issuer it was fetched for, character for character (RFC 8414 §3.3),
 * or it is not used: a mismatch is how a poisoned document would redirect token traffic.
 */
import type { GuardedFetch } from '../net/guarded-fetch.ts'

/** The metadata fields Barbican uses; the rest of the document is kept as is. */
export interface AuthorizationServerMetadata {
  readonly issuer: string
  readonly authorization_endpoint?: string
  readonly token_endpoint?: string
  readonly jwks_uri?: string
  readonly introspection_endpoint?: string
  readonly code_challenge_methods_supported?: readonly string[]
  readonly authorization_response_iss_parameter_supported?: boolean
  readonly grant_types_supported?: readonly string[]
  readonly [key: string]: unknown
}

/** The well-known URLs to try for `issuer`, in the spec's order. */
export function metadataCandidates(issuer: string): string[] {
  const url = new URL(issuer)
  const path = url.pathname.replace(/\/+$/, '')
  const origin = url.origin
  if (path === '') {
    return [
      `${origin}/.well-known/oauth-authorization-server`,
      `${origin}/.well-known/openid-configuration`,
    ]
  }
  return [
    `${origin}/.well-known/oauth-authorization-server${path}`,
    `${origin}/.well-known/openid-configuration${path}`,
    `${origin}${path}/.well-known/openid-configuration`,
  ]
}

/** Fetches and validates the issuer's metadata; throws when no candidate yields a valid one. */
export async function discoverAuthorizationServer(
  issuer: string,
  fetch: GuardedFetch,
): Promise<AuthorizationServerMetadata> {
  const faults: string[] = []
  for (const candidate of metadataCandidates(issuer)) {
    let response: Response
    try {
      response = await fetch(candidate, { headers: { accept: 'application/json' } })
    } catch (err) {
      faults.push(`${candidate}: ${(err as Error).message}`)
      continue
    }
    if (!response.ok) {
      await response.body?.cancel()
      faults.push(`${candidate}: HTTP ${response.status}`)
      continue
    }
    const doc = (await response.json()) as Record<string, unknown>
    if (doc.issuer !== issuer) {
      faults.push(`${candidate}: issuer ${JSON.stringify(doc.issuer)} is not ${issuer}`)
      continue
    }
    return doc as AuthorizationServerMetadata
  }
  throw new Error(`No valid authorization server metadata for ${issuer} (${faults.join('; ')})`)
}
