/**
 * Barbican's Client ID Metadata Document (draft-ietf-oauth-client-id-metadata-document) for each
 * upstream linked per user: an HTTPS URL under the public URL whose JSON describes Barbican as an
 * OAuth client. An authorization server that advertises `client_id_metadata_document_supported`
 * accepts that URL as `client_id` and fetches the document instead of requiring a registration.
 *
 * The document names no secret (there is no way to share one this way): Barbican is a public
 * client there, protected by PKCE and by the redirect URI the server holds it to. The URL must be
 * https, so a gateway whose public URL is plain http never offers one.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'

/** Prefix of the per-upstream documents (`/oauth/client/NAME`). */
export const CLIENT_DOCUMENT_PATH = '/oauth/client/'

/** How long authorization servers may cache the document. */
const CACHE_SECONDS = 3600

/**
 * The document's URL, which is also the `client_id`; undefined when the public URL is not https
 * (the draft requires https) or the name would make a dot segment.
 */
export function clientDocumentUrl(baseUrl: string, upstream: string): string | undefined {
  if (!baseUrl.startsWith('https://')) return undefined
  if (upstream === '.' || upstream === '..') return undefined
  return `${baseUrl}${CLIENT_DOCUMENT_PATH}${encodeURIComponent(upstream)}`
}

/** The document itself: the client metadata of RFC 7591, minus anything secret. */
export function clientDocument(
  clientId: string,
  baseUrl: string,
  redirectUri: string,
  scopes: readonly string[],
): Record<string, unknown> {
  return {
    client_id: clientId,
    client_name: `Barbican at ${new URL(baseUrl).host}`,
    client_uri: baseUrl,
    redirect_uris: [redirectUri],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...(scopes.length > 0 ? { scope: scopes.join(' ') } : {}),
  }
}

/** Serves one upstream's document; 404 while the public URL does not allow one. */
export function serveClientDocument(
  res: ServerResponse,
  document: Record<string, unknown> | undefined,
): void {
  if (document === undefined) {
    res.writeHead(404, { 'content-type': 'text/plain' }).end('No client metadata document here')
    return
  }
  res
    .writeHead(200, {
      'content-type': 'application/json',
      'cache-control': `public, max-age=${CACHE_SECONDS}`,
      'x-content-type-options': 'nosniff',
    })
    .end(JSON.stringify(document))
}

export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => Promise<void>
