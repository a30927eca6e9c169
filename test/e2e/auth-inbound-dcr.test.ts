/**
 * Inbound, the way an MCP client with no pre-registration reaches Barbican (docs/security.md,
 * "MCP clients without pre-registration"): Barbican is only the resource server. The official SDK
 * client gets a 401 pointing at Barbican's protected resource metadata, discovers the identity
 * provider there (oidc-provider, open dynamic client registration), registers itself (RFC 7591),
 * runs authorization code + PKCE for Barbican's resource URI, and calls a tool with the token,
 * which Barbican verifies (issuer, signature, audience, scope).
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  type OAuthClientProvider,
  UnauthorizedError,
} from '@modelcontextprotocol/sdk/client/auth.js'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type {
  OAuthClientInformationMixed,
  OAuthClientMetadata,
  OAuthTokens,
} from '@modelcontextprotocol/sdk/shared/auth.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'
import { browse } from '../support/link-flow.ts'

/** Where the provider sends the browser back: never opened, the test reads the code off it. */
const REDIRECT = 'http://127.0.0.1:1/callback'

/** An SDK OAuth client provider that keeps everything in memory and records the browser URL. */
class MemoryProvider implements OAuthClientProvider {
  client: OAuthClientInformationMixed | undefined
  stored: OAuthTokens | undefined
  verifier = ''
  authorizationUrl: URL | undefined
  get redirectUrl() {
    return REDIRECT
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'An MCP client',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    }
  }
  clientInformation() {
    return this.client
  }
  saveClientInformation(info: OAuthClientInformationMixed) {
    this.client = info
  }
  tokens() {
    return this.stored
  }
  saveTokens(tokens: OAuthTokens) {
    this.stored = tokens
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier
  }
  codeVerifier() {
    return this.verifier
  }
}

describe('an MCP client registers at the identity provider and calls Barbican', () => {
  let idp: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  let resource: string

  before(async () => {
    idp = await startIssuer({ clients: [], registration: true })
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      auth: {
        scopes: ['mcp:tools'],
        jwt: { issuer: idp.issuer, algorithms: ['ES256'] },
        network: { allow: ['127.0.0.1'] },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    resource = `${server.url}/mcp`
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await idp?.close()
  })

  test('discovery, dynamic registration, PKCE for the resource, then a tool call', async () => {
    const provider = new MemoryProvider()
    const first = new Client({ name: 'dcr-client', version: '1.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(resource), {
      authProvider: provider,
    })
    await assert.rejects(first.connect(transport), UnauthorizedError)

    // The client registered itself at the provider Barbican's metadata named.
    assert.equal(idp.registered.length, 1)
    assert.equal(provider.client?.client_id, idp.registered[0])
    const authorize = provider.authorizationUrl
    assert.ok(authorize, 'the SDK sent the user to the provider')
    assert.equal(authorize.origin, idp.issuer)
    assert.equal(authorize.searchParams.get('resource'), resource)
    assert.equal(authorize.searchParams.get('code_challenge_method'), 'S256')

    const callback = await browse(authorize.toString(), (u) => u.href.startsWith(REDIRECT))
    const code = callback.searchParams.get('code')
    assert.ok(code, callback.href)
    await transport.finishAuth(code)
    assert.ok(provider.stored?.access_token)

    const client = new Client({ name: 'dcr-client', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), { authProvider: provider }),
    )
    try {
      const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
        content: { text: string }[]
      }
      const seen = JSON.parse(result.content[0]!.text) as {
        meta: Record<string, { user?: string }>
      }
      // Barbican identified the user behind the token it verified, and kept the token to itself.
      assert.equal(seen.meta['dev.barbican/context']?.user, idp.defaultUser)
      assert.ok(!JSON.stringify(upstream.requests).includes(provider.stored.access_token))
    } finally {
      await client.close()
    }
  })

  test('a token the registered client got for another resource is refused', async () => {
    const provider = new MemoryProvider()
    const transport = new StreamableHTTPClientTransport(new URL(resource), {
      authProvider: provider,
    })
    await assert.rejects(new Client({ name: 'x', version: '1' }).connect(transport))
    // Same client, same provider, but the authorization request names another resource.
    const other = new URL(provider.authorizationUrl!)
    other.searchParams.set('resource', 'https://elsewhere.example/mcp')
    const callback = await browse(other.toString(), (u) => u.href.startsWith(REDIRECT))
    const redeemed = await fetch(`${idp.issuer}/token`, {
      method: 'POST',
      body: new URLSearchParams({
        grant_type: 'authorization_code',
        code: callback.searchParams.get('code') ?? '',
        redirect_uri: REDIRECT,
        code_verifier: provider.verifier,
        client_id: provider.client?.client_id ?? '',
        resource: 'https://elsewhere.example/mcp',
      }),
    })
    const token = ((await redeemed.json()) as { access_token?: string }).access_token
    assert.ok(token, 'the provider issued a token for the other resource')
    const res = await fetch(resource, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        authorization: `Bearer ${token}`,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'x', version: '1' },
        },
      }),
    })
    await res.body?.cancel()
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /invalid_token/)
  })
})
