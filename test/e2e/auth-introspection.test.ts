/**
 * Opaque access tokens checked by RFC 7662 introspection at a real authorization server: an
 * active token for this server's resource works, a revoked one stops working once the brief
 * cache expires (immediately here: cacheSeconds 0), and a token for another resource is refused.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'r', version: '1' },
  },
}

describe('inbound authentication with opaque tokens (introspection)', () => {
  let issuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer

  before(async () => {
    issuer = await startIssuer({
      accessTokenFormat: 'opaque',
      clients: [
        {
          client_id: 'agent',
          client_secret: 'agent-secret',
          grant_types: ['client_credentials'],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: 'client_secret_post',
        },
        {
          client_id: 'barbican',
          client_secret: 'barbican-secret',
          grant_types: [],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
    })
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      auth: {
        introspection: {
          endpoint: `${issuer.issuer}/token/introspection`,
          clientId: 'barbican',
          clientSecret: 'barbican-secret',
          issuer: issuer.issuer,
          cacheSeconds: 0,
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

  const post = async (token: string) => {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify(INIT),
    })
    await res.body?.cancel()
    return res
  }

  test('an active opaque token for this resource is accepted; a revoked one is not', async () => {
    const token = await issuer.clientToken(`${server.url}/mcp`, 'mcp:tools')
    assert.doesNotMatch(token, /^ey/, 'an opaque token')
    assert.equal((await post(token)).status, 200)
    const revoked = await fetch(`${issuer.issuer}/token/revocation`, {
      method: 'POST',
      body: new URLSearchParams({ token, client_id: 'agent', client_secret: 'agent-secret' }),
    })
    await revoked.body?.cancel()
    assert.equal(revoked.status, 200)
    const res = await post(token)
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /not active/)
  })

  test('an opaque token for another resource is refused', async () => {
    const token = await issuer.clientToken('https://elsewhere.example/mcp', 'mcp:tools')
    const res = await post(token)
    assert.equal(res.status, 401)
    assert.match(res.headers.get('www-authenticate') ?? '', /audience/)
  })
})
