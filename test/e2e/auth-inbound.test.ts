/**
 * Inbound authentication end to end, against a real authorization server (oidc-provider started
 * by the test): a valid JWT access token works over every transport; a missing, expired,
 * wrongly issued, wrongly addressed, `alg: none`, unsigned or HMAC-forged token, and a header
 * with no usable Bearer token (`Basic …`, an empty `Bearer`), gets 401 with a challenge naming the
 * resource's metadata, on every HTTP transport; a token lacking the required scope gets 403
 * `insufficient_scope`; and the metadata documents are public.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { SignJWT, UnsecuredJWT } from 'jose'
import WebSocket from 'ws'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const CLIENT = {
  client_id: 'agent',
  client_secret: 'agent-secret',
  grant_types: ['client_credentials'],
  response_types: [],
  redirect_uris: [],
  token_endpoint_auth_method: 'client_secret_post',
}

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'raw', version: '1' },
  },
}

describe('inbound authentication with JWT access tokens', () => {
  let issuer: TestIssuer
  let stranger: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  let resource: string
  let prmUrl: string

  before(async () => {
    issuer = await startIssuer({ clients: [CLIENT] })
    stranger = await startIssuer({ clients: [CLIENT] })
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      servers: { default: {}, other: { upstreams: ['rec'] } },
      auth: {
        scopes: ['mcp:tools'],
        serverScopes: { other: ['mcp:admin'] },
        jwt: { issuer: issuer.issuer, algorithms: ['ES256'], clockToleranceSeconds: 5 },
        network: { allow: ['127.0.0.1'] },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    resource = `${server.url}/mcp`
    prmUrl = `${server.url}/.well-known/oauth-protected-resource/mcp`
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await issuer?.close()
    await stranger?.close()
  })

  const post = (token: string | undefined, path = '/mcp') =>
    fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(token === undefined ? {} : { authorization: `Bearer ${token}` }),
      },
      body: JSON.stringify(INIT),
    })

  async function assertInvalidToken(token: string, reason: RegExp) {
    const res = await post(token)
    await res.body?.cancel()
    assert.equal(res.status, 401)
    const challenge = res.headers.get('www-authenticate') ?? ''
    assert.match(challenge, /^Bearer /)
    assert.ok(challenge.includes(`resource_metadata="${prmUrl}"`), challenge)
    assert.match(challenge, /error="invalid_token"/)
    assert.match(challenge, reason)
  }

  test('a valid token for the server resource lets an SDK client list and call tools', async () => {
    const token = await issuer.clientToken(resource, 'mcp:tools')
    const client = new Client({ name: 'authed', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransport(new URL(resource), {
        requestInit: { headers: { authorization: `Bearer ${token}` } },
      }),
    )
    try {
      const { tools } = await client.listTools()
      assert.ok(tools.some((t) => t.name === 'whoami'))
    } finally {
      await client.close()
    }
  })

  test('a request without a token gets 401 with resource_metadata and scope', async () => {
    const res = await post(undefined)
    await res.body?.cancel()
    assert.equal(res.status, 401)
    const challenge = res.headers.get('www-authenticate') ?? ''
    assert.equal(challenge, `Bearer resource_metadata="${prmUrl}", scope="mcp:tools"`)
  })

  test('an expired token gets 401 invalid_token', async () => {
    const now = Math.floor(Date.now() / 1000)
    const token = await issuer.sign({
      iss: issuer.issuer,
      aud: resource,
      sub: 'alice',
      scope: 'mcp:tools',
      iat: now - 600,
      exp: now - 300,
    })
    await assertInvalidToken(token, /expired/)
  })

  test('a token from another issuer gets 401 invalid_token', async () => {
    await assertInvalidToken(await stranger.clientToken(resource, 'mcp:tools'), /error_desc/)
    const forged = await issuer.sign({
      iss: stranger.issuer,
      aud: resource,
      sub: 'alice',
      scope: 'mcp:tools',
      exp: Math.floor(Date.now() / 1000) + 60,
    })
    await assertInvalidToken(forged, /trusted issuer/)
  })

  test('a token for another resource (audience) gets 401, even one of the same gateway', async () => {
    await assertInvalidToken(await issuer.clientToken('https://elsewhere.example/mcp'), /audience/)
    const forOther = await issuer.clientToken(`${server.url}/mcp/other`, 'mcp:tools mcp:admin')
    await assertInvalidToken(forOther, /audience/)
    const res = await post(forOther, '/mcp/other')
    await res.body?.cancel()
    assert.equal(res.status, 200, 'the same token works at the server it was issued for')
  })

  test('alg none, unsigned and HMAC-forged tokens get 401', async () => {
    const claims = { iss: issuer.issuer, aud: resource, sub: 'mallory', scope: 'mcp:tools' }
    const none = new UnsecuredJWT(claims).setExpirationTime('5m').encode()
    await assertInvalidToken(none, /refused algorithm|malformed|invalid/)
    const valid = await issuer.clientToken(resource, 'mcp:tools')
    const [header, payload] = valid.split('.')
    await assertInvalidToken(`${header}.${payload}.`, /signature|malformed|invalid/)
    // The classic confusion: the issuer's public key used as an HMAC secret.
    const hmac = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'HS256', kid: 'k1' })
      .setExpirationTime('5m')
      .sign(new TextEncoder().encode(JSON.stringify(issuer.publicJwk)))
    await assertInvalidToken(hmac, /refused algorithm/)
  })

  test('a valid token without the required scope gets 403 insufficient_scope', async () => {
    const token = await issuer.clientToken(resource, 'mcp:admin')
    const res = await post(token)
    await res.body?.cancel()
    assert.equal(res.status, 403)
    const challenge = res.headers.get('www-authenticate') ?? ''
    assert.match(challenge, /error="insufficient_scope"/)
    assert.match(challenge, /scope="mcp:tools"/)
    assert.ok(challenge.includes(`resource_metadata="${prmUrl}"`))
  })

  test('a server that needs more scopes asks for all of them (step-up, 403)', async () => {
    const token = await issuer.clientToken(`${server.url}/mcp/other`, 'mcp:tools')
    const res = await post(token, '/mcp/other')
    await res.body?.cancel()
    assert.equal(res.status, 403)
    const challenge = res.headers.get('www-authenticate') ?? ''
    assert.match(challenge, /error="insufficient_scope"/)
    assert.match(challenge, /scope="mcp:tools mcp:admin"/)
    assert.match(challenge, /oauth-protected-resource\/mcp\/other"/)
  })

  /**
   * Headers that carry no usable Bearer token, and the challenge error each one gets: none for
   * another scheme (RFC 6750 §3.1), invalid_request for an empty Bearer, invalid_token for a
   * malformed one. Every one is a 401 naming the metadata, so MCP clients start OAuth discovery.
   */
  const UNUSABLE: [string, string | undefined][] = [
    ['Bearer', 'invalid_request'],
    ['Bearer    ', 'invalid_request'],
    ['Basic YWxpY2U6c2VjcmV0', undefined],
    ['Bearer not a token', 'invalid_token'],
  ]

  function assertUnusableChallenge(
    what: string,
    status: number,
    challenge: string,
    error?: string,
  ) {
    assert.equal(status, 401, what)
    assert.ok(challenge.startsWith('Bearer '), `${what}: ${challenge}`)
    assert.ok(challenge.includes(`resource_metadata="${prmUrl}"`), `${what}: ${challenge}`)
    if (error === undefined) assert.doesNotMatch(challenge, /error=/, what)
    else assert.ok(challenge.includes(`error="${error}"`), `${what}: ${challenge}`)
  }

  test('an Authorization header without a usable Bearer token gets 401 on Streamable HTTP', async () => {
    for (const [authorization, error] of UNUSABLE) {
      const res = await fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(INIT),
      })
      await res.body?.cancel()
      const challenge = res.headers.get('www-authenticate') ?? ''
      assertUnusableChallenge(authorization, res.status, challenge, error)
    }
  })

  test('an Authorization header without a usable Bearer token gets 401 on legacy SSE', async () => {
    for (const [authorization, error] of UNUSABLE) {
      const stream = await fetch(`${server.url}/sse`, {
        headers: { authorization, accept: 'text/event-stream' },
      })
      await stream.body?.cancel()
      const streamChallenge = stream.headers.get('www-authenticate') ?? ''
      assertUnusableChallenge(`GET /sse ${authorization}`, stream.status, streamChallenge, error)
      const post = await fetch(`${server.url}/messages?sessionId=x`, {
        method: 'POST',
        headers: { authorization, 'content-type': 'application/json' },
        body: JSON.stringify(INIT),
      })
      await post.body?.cancel()
      const postChallenge = post.headers.get('www-authenticate') ?? ''
      assertUnusableChallenge(`POST /messages ${authorization}`, post.status, postChallenge, error)
    }
  })

  test('an Authorization header without a usable Bearer token gets 401 on a WebSocket upgrade', async () => {
    for (const [authorization, error] of UNUSABLE) {
      const refused = await new Promise<{ code: number; challenge: string }>((resolve, reject) => {
        const ws = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, 'mcp', {
          headers: { authorization },
        })
        ws.on('unexpected-response', (_req, res) => {
          resolve({ code: res.statusCode ?? 0, challenge: String(res.headers['www-authenticate']) })
          res.resume()
          ws.terminate()
        })
        ws.on('open', () => reject(new Error('opened without a usable token')))
        ws.on('error', () => {})
      })
      assertUnusableChallenge(`ws ${authorization}`, refused.code, refused.challenge, error)
    }
  })

  test('legacy SSE and WebSocket endpoints refuse unauthenticated clients the same way', async () => {
    const sse = await fetch(`${server.url}/sse`, { headers: { accept: 'text/event-stream' } })
    await sse.body?.cancel()
    assert.equal(sse.status, 401)
    assert.match(sse.headers.get('www-authenticate') ?? '', /resource_metadata=/)
    const status = await new Promise<{ code: number; challenge: string }>((resolve, reject) => {
      const ws = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, 'mcp')
      ws.on('unexpected-response', (_req, res) => {
        resolve({ code: res.statusCode ?? 0, challenge: String(res.headers['www-authenticate']) })
        res.resume()
        ws.terminate()
      })
      ws.on('open', () => reject(new Error('opened without a token')))
      ws.on('error', () => {})
    })
    assert.equal(status.code, 401)
    assert.ok(status.challenge.includes(`resource_metadata="${prmUrl}"`))
  })

  test('each virtual server publishes RFC 9728 metadata naming its resource and issuer', async () => {
    const res = await fetch(prmUrl)
    assert.equal(res.status, 200)
    const doc = (await res.json()) as Record<string, unknown>
    assert.equal(doc.resource, resource)
    assert.deepEqual(doc.authorization_servers, [issuer.issuer])
    assert.deepEqual(doc.scopes_supported, ['mcp:tools'])
    const other = (await (
      await fetch(`${server.url}/.well-known/oauth-protected-resource/mcp/other`)
    ).json()) as Record<string, unknown>
    assert.equal(other.resource, `${server.url}/mcp/other`)
    assert.deepEqual(other.scopes_supported, ['mcp:tools', 'mcp:admin'])
  })
})
