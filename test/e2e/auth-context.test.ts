/**
 * Who a call is for, end to end: an upstream (the official SDK server behind a recording HTTP
 * listener) receives the caller's user, tenant and client in `_meta["dev.barbican/context"]` and
 * a short-lived assertion it can verify against Barbican's published JWKS, with the W3C trace
 * context carried over, and it never receives the client's own token. API keys identify their
 * holder the same way, and a revoked key stops working on the very next request of a session.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736'

interface Whoami {
  meta: Record<string, { user: string; tenant?: string; client?: string; assertion: string }>
  authorization: string | null
}

async function connect(url: string, token: string, headers: Record<string, string> = {}) {
  const client = new Client({ name: 'ctx', version: '1.0.0' })
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), {
      requestInit: { headers: { authorization: `Bearer ${token}`, ...headers } },
    }),
  )
  return client
}

async function whoami(client: Client): Promise<Whoami> {
  const result = (await client.callTool({ name: 'whoami', arguments: {} })) as {
    content: { text: string }[]
  }
  return JSON.parse(result.content[0]!.text) as Whoami
}

describe('tool-call context and API keys', () => {
  let issuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  const alice = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    issuer = await startIssuer({
      clients: [
        {
          client_id: 'agent',
          client_secret: 'agent-secret',
          grant_types: ['client_credentials'],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: 'client_secret_post',
        },
      ],
    })
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      auth: {
        jwt: { issuer: issuer.issuer, algorithms: ['ES256'] },
        apiKeys: {
          keys: [
            { id: 'alice-laptop', hash: alice.hash, subject: 'alice', tenant: 'acme' },
            { id: 'bob-ci', hash: bob.hash, subject: 'bob' },
          ],
        },
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

  test('the upstream gets the caller in _meta and a verifiable assertion, never the client token', async () => {
    const token = await issuer.clientToken(`${server.url}/mcp`, 'mcp:tools')
    const client = await connect(`${server.url}/mcp`, token, {
      traceparent: `00-${TRACE_ID}-00f067aa0ba902b7-01`,
    })
    let seen: Whoami
    try {
      seen = await whoami(client)
    } finally {
      await client.close()
    }
    const context = seen.meta['dev.barbican/context']!
    assert.equal(context.user, 'agent', 'the token subject (client credentials: the client id)')
    assert.equal(context.client, 'agent')
    assert.equal(seen.authorization, null)

    const jwks = createRemoteJWKSet(new URL(`${server.url}/.well-known/jwks.json`))
    const { payload } = await jwtVerify(context.assertion, jwks, {
      issuer: server.url,
      audience: upstream.url,
      typ: 'obo+jwt',
      algorithms: ['ES256'],
    })
    assert.equal(payload.sub, 'agent')
    assert.equal(payload.client_id, 'agent')

    const call = upstream.requests.find(
      (r) => (r.body as { method?: string } | undefined)?.method === 'tools/call',
    )
    assert.ok(call)
    assert.equal(call.headers['barbican-assertion'], context.assertion)
    assert.match(String(call.headers.traceparent), new RegExp(`^00-${TRACE_ID}-[0-9a-f]{16}-01$`))
    // Not in any header or body of any request the upstream ever received.
    const everything = JSON.stringify(upstream.requests)
    assert.ok(!everything.includes(token), 'the client token reached the upstream')
    assert.ok(!everything.includes(token.split('.')[2]!), 'its signature reached the upstream')
  })

  test('an API key identifies its holder to upstreams, as user and tenant', async () => {
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      const context = (await whoami(client)).meta['dev.barbican/context']!
      assert.equal(context.user, 'alice')
      assert.equal(context.tenant, 'acme')
      assert.equal(context.client, 'api-key:alice-laptop')
    } finally {
      await client.close()
    }
    assert.ok(!JSON.stringify(upstream.requests).includes(alice.key))
  })

  test('revoking a key ends access on the next request of an open session', async () => {
    const client = await connect(`${server.url}/mcp`, bob.key)
    try {
      assert.equal((await whoami(client)).meta['dev.barbican/context']?.user, 'bob')
      assert.equal(server.auth?.apiKeys?.revoke('bob-ci'), true)
      await assert.rejects(whoami(client), /unknown or revoked/)
    } finally {
      await client.close().catch(() => {})
    }
  })

  test('a session id presented by another caller is not found', async () => {
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      const sessionId = (client.transport as StreamableHTTPClientTransport).sessionId
      assert.ok(sessionId)
      const token = await issuer.clientToken(`${server.url}/mcp`, 'mcp:tools')
      const res = await fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${token}`,
          'mcp-session-id': sessionId,
          'mcp-protocol-version': '2025-06-18',
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list' }),
      })
      await res.body?.cancel()
      assert.equal(res.status, 404)
    } finally {
      await client.close()
    }
  })
})
