/**
 * Linking an upstream account by Client ID Metadata Document: the upstream's authorization server
 * (oidc-provider with its implementation of draft-ietf-oauth-client-id-metadata-document)
 * advertises `client_id_metadata_document_supported`, so Barbican names its document's URL,
 * `https://gateway.test/oauth/client/files`, as `client_id`; the server fetches that document,
 * checks it (client_id equal to its URL, no shared secret, the redirect URI) and runs the flow.
 * The server also offers dynamic registration, which Barbican must not use. Barbican's public URL
 * is https, as the draft requires; the server reaches it through a mapping to the loopback port,
 * the job a TLS-terminating proxy does in a deployment.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startIssuerGuardedUpstream } from '../fixtures/auth-upstream.ts'
import { browse, connect, linkUrlFrom, openLinkPage, upstreamClaims } from '../support/link-flow.ts'

const PUBLIC = 'https://gateway.test'
const DOCUMENT = `${PUBLIC}/oauth/client/files`

describe('linking by client ID metadata document', () => {
  let issuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  const alice = generateApiKey()
  /** Every document fetch the authorization server made, and what it got. */
  const fetched: { url: string; status: number; type: string | null }[] = []
  /** Where the public URL really is (the proxy's job). */
  const local = (url: string) => url.replace(PUBLIC, server.url)

  before(async () => {
    issuer = await startIssuer({
      clients: [],
      registration: true,
      accessTokenTtlSeconds: 20,
      clientIdMetadataDocuments: async (url, init) => {
        const res = await fetch(local(url), init)
        fetched.push({ url, status: res.status, type: res.headers.get('content-type') })
        return res
      },
    })
    upstream = await startIssuerGuardedUpstream(issuer.issuer)
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        files: {
          url: upstream.url,
          transport: 'streamable-http',
          credentials: { mode: 'oauth', issuer: issuer.issuer, scopes: ['mcp:tools'] },
        },
      },
      auth: {
        publicUrl: PUBLIC,
        apiKeys: { keys: [{ id: 'alice', hash: alice.hash, subject: 'alice' }] },
        network: { allow: ['127.0.0.1'] },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await issuer?.close()
  })

  test('Barbican serves its client metadata document, without any secret', async () => {
    const res = await fetch(local(DOCUMENT))
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('content-type'), 'application/json')
    assert.match(res.headers.get('cache-control') ?? '', /max-age=\d+/)
    const doc = (await res.json()) as Record<string, unknown>
    assert.equal(doc.client_id, DOCUMENT)
    assert.deepEqual(doc.redirect_uris, [`${PUBLIC}/oauth/callback`])
    assert.equal(doc.token_endpoint_auth_method, 'none')
    assert.deepEqual(doc.grant_types, ['authorization_code', 'refresh_token'])
    assert.ok(!('client_secret' in doc))
  })

  test('the link names the document URL as client_id; the server fetches it; the call works', async () => {
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      const linkUrl = await linkUrlFrom(client, 'files')
      assert.ok(linkUrl.startsWith(`${PUBLIC}/link/files?ticket=`), linkUrl)
      const page = await openLinkPage(local(linkUrl))
      assert.equal(page.authorize.searchParams.get('client_id'), DOCUMENT)
      assert.equal(page.authorize.searchParams.get('redirect_uri'), `${PUBLIC}/oauth/callback`)
      issuer.defaultUser = 'alice-at-files'
      const callback = await browse(
        page.authorize.toString(),
        (u) => u.pathname === '/oauth/callback',
      )
      assert.equal(callback.origin, PUBLIC)
      assert.ok(
        fetched.some((f) => f.url === DOCUMENT && f.status === 200),
        'the authorization server fetched the document',
      )
      const done = await fetch(local(callback.toString()), { headers: { cookie: page.cookie } })
      assert.equal(done.status, 200, await done.clone().text())

      // Twice: the second call refreshes the (20 s) token as the same public client.
      for (let i = 0; i < 2; i++) {
        const claims = await upstreamClaims(client)
        assert.equal(claims.sub, 'alice-at-files')
        assert.equal(claims.client_id, DOCUMENT)
        assert.equal(claims.aud, upstream.url)
      }
      assert.deepEqual(issuer.registered, [], 'no dynamic registration where CIMD is supported')
    } finally {
      await client.close()
    }
  })
})
