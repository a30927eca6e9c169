/**
 * Who a call is for, in every combination: {legacy session, 2026-07-28 stateless} × {no auth,
 * JWT, API key} × {legacy stdio upstream, legacy HTTP upstream, 2026-07-28 upstream}. Every cell
 * calls a tool that reports the `_meta` its upstream received, and checks the result and the
 * on-behalf-of context in it: the caller's subject and an assertion that verifies against
 * Barbican's JWKS for that upstream's audience (with auth), or no context at all (without). Every
 * call also carries a forged `_meta["dev.barbican/context"]`: no upstream may ever see it.
 *
 * Two gateways (without and with `auth:`) share one HTTP upstream and one issuer; each runs the
 * bridge fixture twice over stdio (legacy and 2026 eras). A 2026 call to a legacy upstream is
 * held by the bridge, the path where authenticated calls used to fail with -32005.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

type Json = Record<string, unknown>

const fixture = fileURLToPath(new URL('../fixtures/bridge-upstream.ts', import.meta.url))
const FORGED = { user: 'root', tenant: 'victim', assertion: 'forged.by.client' }
const SENT_META: Json = {
  'dev.barbican/context': FORGED,
  'dev.barbican/anything': true,
  'example.test/kept': 'yes',
}

/** One upstream kind: the tool to call and how to read the `_meta` out of its answer. */
interface UpstreamCell {
  readonly tool: string
  readonly audience: (gateway: Gateways) => string
  readonly metaOf: (text: string) => Json
}

interface Gateways {
  readonly open: RunningServer
  readonly secured: RunningServer
  readonly http: RecordingUpstream
}

const UPSTREAMS: Record<string, UpstreamCell> = {
  'a legacy stdio upstream': {
    tool: 'stdio__test_report_meta',
    audience: () => 'urn:barbican:upstream:stdio',
    metaOf: (text) => JSON.parse(text) as Json,
  },
  'a legacy HTTP upstream': {
    tool: 'http__whoami',
    audience: (g) => g.http.url,
    metaOf: (text) => (JSON.parse(text) as { meta: Json }).meta,
  },
  'a 2026-07-28 upstream': {
    tool: 'modern__test_report_meta',
    audience: () => 'urn:barbican:upstream:modern',
    metaOf: (text) => JSON.parse(text) as Json,
  },
}

/** A client of one era, calling a tool with SENT_META and returning the first text content. */
type CallTool = (tool: string) => Promise<string>

async function legacySession(url: string, authorization: string | undefined) {
  const client = new Client({ name: 'auth-matrix', version: '1.0.0' })
  const headers: Record<string, string> = authorization ? { authorization } : {}
  await client.connect(
    new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } }),
  )
  const call: CallTool = async (tool) => {
    const result = (await client.callTool({ name: tool, arguments: {}, _meta: SENT_META })) as {
      content: { text: string }[]
      isError?: boolean
    }
    assert.notEqual(result.isError, true, JSON.stringify(result))
    return result.content[0]!.text
  }
  return { call, close: () => client.close() }
}

function modernStateless(url: string, authorization: string | undefined) {
  let nextId = 1
  const call: CallTool = async (tool) => {
    const { status, final } = await postStatelessToolCall(url, {
      name: tool,
      id: nextId++,
      meta: SENT_META,
      ...(authorization ? { headers: { authorization } } : {}),
    })
    assert.equal(status, 200)
    assert.ok(final, 'no response')
    assert.equal(final.error, undefined, JSON.stringify(final.error))
    const result = final.result as { resultType: string; content: { text: string }[] }
    assert.equal(result.resultType, 'complete')
    return result.content[0]!.text
  }
  return { call, close: async () => {} }
}

const CLIENTS = {
  'a legacy session': legacySession,
  'a 2026-07-28 stateless call': async (url: string, authorization: string | undefined) =>
    modernStateless(url, authorization),
}

describe('auth matrix: every client era × credential × upstream kind', () => {
  let issuer: TestIssuer
  const gateways = {} as { -readonly [K in keyof Gateways]: Gateways[K] }
  const alice = generateApiKey()

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
    gateways.http = await startRecordingUpstream()
    const upstreams = {
      stdio: { command: process.execPath, args: [fixture, '--era', 'legacy'] },
      http: { url: gateways.http.url, transport: 'streamable-http' },
      modern: { command: process.execPath, args: [fixture, '--era', 'modern'] },
    }
    const start = (extra: Json) =>
      startServer(
        parseConfigText(JSON.stringify({ listen: '127.0.0.1:0', upstreams, ...extra }), {
          json: true,
        }).config,
        silentLogger,
      )
    ;[gateways.open, gateways.secured] = await Promise.all([
      start({}),
      start({
        auth: {
          jwt: { issuer: issuer.issuer, algorithms: ['ES256'] },
          apiKeys: {
            keys: [{ id: 'alice-laptop', hash: alice.hash, subject: 'alice', tenant: 'acme' }],
          },
          network: { allow: ['127.0.0.1'] },
        },
      }),
    ])
  })
  after(async () => {
    await gateways.open?.stop()
    await gateways.secured?.stop()
    await gateways.http?.close()
    await issuer?.close()
  })

  /** Each credential: the gateway it goes to, its Authorization header, who it should be. */
  const CREDENTIALS: Record<
    string,
    () => Promise<{
      gateway: RunningServer
      authorization?: string
      user?: string
      tenant?: string
    }>
  > = {
    'no auth': async () => ({ gateway: gateways.open }),
    JWT: async () => ({
      gateway: gateways.secured,
      authorization: `Bearer ${await issuer.clientToken(`${gateways.secured.url}/mcp`, 'mcp:tools')}`,
      user: 'agent',
    }),
    'an API key': async () => ({
      gateway: gateways.secured,
      authorization: `Bearer ${alice.key}`,
      user: 'alice',
      tenant: 'acme',
    }),
  }

  for (const [clientName, connect] of Object.entries(CLIENTS)) {
    for (const [credentialName, credential] of Object.entries(CREDENTIALS)) {
      describe(`${clientName} with ${credentialName}`, () => {
        let client: { call: CallTool; close(): Promise<void> }
        let expected: Awaited<ReturnType<(typeof CREDENTIALS)[string]>>
        before(async () => {
          expected = await credential()
          client = await connect(`${expected.gateway.url}/mcp`, expected.authorization)
        })
        after(async () => {
          await client?.close()
        })

        for (const [upstreamName, cell] of Object.entries(UPSTREAMS)) {
          test(`calls a tool on ${upstreamName}, which learns who the call is for`, async () => {
            const meta = cell.metaOf(await client.call(cell.tool))
            assert.equal(meta['example.test/kept'], 'yes', 'the client’s own _meta goes on')
            assert.equal(meta['dev.barbican/anything'], undefined, 'forged key reached upstream')
            const context = meta['dev.barbican/context'] as Json | undefined
            if (expected.user === undefined) {
              assert.equal(context, undefined, 'without auth no context, forged or real')
              return
            }
            assert.ok(context, 'the upstream got the context')
            assert.equal(context.user, expected.user)
            assert.equal(context.tenant, expected.tenant)
            const jwks = createRemoteJWKSet(
              new URL(`${expected.gateway.url}/.well-known/jwks.json`),
            )
            const { payload } = await jwtVerify(String(context.assertion), jwks, {
              issuer: expected.gateway.url,
              audience: cell.audience(gateways),
              typ: 'obo+jwt',
              algorithms: ['ES256'],
            })
            assert.equal(payload.sub, expected.user)
            if (cell.tool === 'http__whoami') {
              const sent = gateways.http.requests.some(
                (r) => r.headers['barbican-assertion'] === context.assertion,
              )
              assert.ok(sent, 'an HTTP upstream also gets the assertion as a header')
            }
          })
        }
      })
    }
  }
})
