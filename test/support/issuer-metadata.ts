/**
 * The least an issuer must serve for Barbican to use it: its RFC 8414 metadata with PKCE S256,
 * for tests whose local HTTP server plays the authorization server.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

/** Answers the metadata request of the issuer at `base`; false for any other request. */
export function servedIssuerMetadata(
  req: IncomingMessage,
  res: ServerResponse,
  base: string,
): boolean {
  if (req.url !== '/.well-known/oauth-authorization-server') return false
  res.setHeader('content-type', 'application/json')
  res.end(
    JSON.stringify({
      issuer: base,
      authorization_endpoint: `${base}/authorize`,
      token_endpoint: `${base}/token`,
      code_challenge_methods_supported: ['S256'],
    }),
  )
  return true
}
