/**
 * Barbican's own upstream credentials: static secrets (one given sealed with BARBICAN_SECRET_KEY,
 * one given in clear and sealed in memory) reach the upstream as headers, and an upstream behind
 * an authorization server gets a client-credentials token minted for its own resource. A gateway
 * whose `auth:` has no inbound method keeps serving anonymous loopback callers.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { LocalKeyProvider } from '../../src/credentials/secret-box.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

describe('upstream credentials: static secrets and client credentials', () => {
  const key = randomBytes(32)
  let issuer: TestIssuer
  let plain: RecordingUpstream
  let protectedUpstream: RecordingUpstream
  let server: RunningServer
  let client: Client
  const previousKey = process.env.BARBICAN_SECRET_KEY

  before(async () => {
    process.env.BARBICAN_SECRET_KEY = key.toString('base64')
    issuer = await startIssuer({
      clients: [
        {
          client_id: 'barbican',
          client_secret: 'gateway-secret',
          grant_types: ['client_credentials'],
          response_types: [],
          redirect_uris: [],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
    })
    plain = await startRecordingUpstream()
    const jwks = createRemoteJWKSet(new URL(`${issuer.issuer}/jwks`))
    protectedUpstream = await startRecordingUpstream({
      authorize: async (token) =>
        token !== undefined &&
        (await jwtVerify(token, jwks, { issuer: issuer.issuer, audience: protectedUpstream.url })
          .then(() => true)
          .catch(() => false)),
    })
    const sealed = await new LocalKeyProvider(key).seal(
      'Bearer sealed-secret',
      'upstream:plain:header:authorization',
    )
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        plain: {
          url: plain.url,
          transport: 'streamable-http',
          credentials: {
            mode: 'static',
            headers: { Authorization: sealed, 'X-Api-Token': 'clear-secret' },
          },
        },
        guarded: {
          url: protectedUpstream.url,
          transport: 'streamable-http',
          credentials: {
            mode: 'client-credentials',
            tokenEndpoint: `${issuer.issuer}/token`,
            clientId: 'barbican',
            clientSecret: 'gateway-secret',
            scopes: ['mcp:tools'],
          },
        },
      },
      auth: { network: { allow: ['127.0.0.1'] } },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
    client = new Client({ name: 'anon', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })
  after(async () => {
    await client?.close()
    await server?.stop()
    await plain?.close()
    await protectedUpstream?.close()
    await issuer?.close()
    if (previousKey === undefined) delete process.env.BARBICAN_SECRET_KEY
    else process.env.BARBICAN_SECRET_KEY = previousKey
  })

  test('static secrets, sealed or clear in the config, reach the upstream as headers', async () => {
    const result = (await client.callTool({ name: 'plain__whoami', arguments: {} })) as {
      content: { text: string }[]
    }
    const seen = JSON.parse(result.content[0]!.text) as { authorization: string }
    assert.equal(seen.authorization, 'Bearer sealed-secret')
    assert.ok(plain.requests.every((r) => r.headers['x-api-token'] === 'clear-secret'))
    assert.ok(plain.requests.every((r) => r.headers.authorization === 'Bearer sealed-secret'))
  })

  test('a client-credentials token for the upstream resource is obtained and reused', async () => {
    for (let i = 0; i < 2; i++) {
      const result = (await client.callTool({ name: 'guarded__whoami', arguments: {} })) as {
        content: { text: string }[]
      }
      const seen = JSON.parse(result.content[0]!.text) as {
        authorization: string
        meta: Record<string, { user: string }>
      }
      assert.match(seen.authorization, /^Bearer ey/)
      assert.equal(seen.meta['dev.barbican/context']?.user, 'anonymous')
    }
    const calls = protectedUpstream.requests.filter(
      (r) => (r.body as { method?: string })?.method === 'tools/call',
    )
    assert.equal(calls.length, 2)
    assert.equal(calls[0]?.headers.authorization, calls[1]?.headers.authorization)
  })
})
