/**
 * Account links across a fleet (docs/decisions/089): three in-process replicas on the real
 * PostgreSQL and Redis, a real authorization server (oidc-provider) in front of a recording
 * upstream, and a scripted load balancer at the public URL whose next replica the test chooses.
 * The link URL made on replica A is opened on B and the issuer's callback lands on C, and the
 * link completes; the state used on C is refused on A; two replicas refreshing the same expired
 * token at once make one refresh request at the issuer, and both calls succeed.
 */
import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, test } from 'node:test'
import type { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { joinFleet } from '../../src/app/fleet.ts'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { openBackends } from '../../src/gateway/backends.ts'
import { openPostgresPool } from '../../src/store/postgres.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import { type RecordingUpstream, startIssuerGuardedUpstream } from '../fixtures/auth-upstream.ts'
import {
  dropPostgresSchemas,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { browse, connect, linkUrlFrom, openLinkPage, upstreamClaims } from '../support/link-flow.ts'

/** A load balancer whose next replica the test names (`target`), for the browser's requests. */
interface SteeringBalancer {
  readonly url: string
  target: string
  close(): Promise<void>
}

async function startBalancer(): Promise<SteeringBalancer> {
  const state = { target: '' }
  const server: Server = createServer(async (req, res) => {
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(req.headers)) {
      if (name !== 'host' && name !== 'connection' && typeof value === 'string') {
        headers[name] = value
      }
    }
    const reply = await fetch(`${state.target}${req.url}`, { headers, redirect: 'manual' })
    const out: Record<string, string | string[]> = {}
    reply.headers.forEach((value, name) => {
      if (name !== 'set-cookie' && name !== 'content-length' && name !== 'connection') {
        out[name] = value
      }
    })
    const cookies = reply.headers.getSetCookie()
    if (cookies.length > 0) out['set-cookie'] = cookies
    res.writeHead(reply.status, out)
    res.end(Buffer.from(await reply.arrayBuffer()))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    get target() {
      return state.target
    },
    set target(url: string) {
      state.target = url
    },
    async close() {
      server.closeAllConnections()
      await new Promise((resolve) => server.close(resolve))
    },
  }
}

const alice = generateApiKey()
const closers: (() => Promise<unknown>)[] = []
let issuer: TestIssuer
let upstream: RecordingUpstream
let balancer: SteeringBalancer
let replicas: RunningServer[]
/** Each replica's Redis connection (what `barbican serve` opens for it). */
const connections: { close(): Promise<void> }[] = []

before(async () => {
  // Tokens live 20 s, inside Barbican's 30 s refresh margin: every use refreshes (no sleeps).
  issuer = await startIssuer({ clients: [], accessTokenTtlSeconds: 20 })
  closers.push(() => issuer.close())
  upstream = await startIssuerGuardedUpstream(issuer.issuer)
  closers.push(() => upstream.close())
  balancer = await startBalancer()
  closers.push(() => balancer.close())
  const url = await freshPostgresUrl()
  // The schema exists before the replicas use it.
  await (await openPostgresPool(url)).end()
  const config = normalizeConfig({
    listen: '127.0.0.1:0',
    store: { postgres: { url } },
    redis: { url: REDIS_URL, prefix: freshRedisPrefix() },
    upstreams: {
      files: {
        url: upstream.url,
        transport: 'streamable-http',
        credentials: {
          mode: 'oauth',
          issuer: issuer.issuer,
          clientId: 'barbican',
          clientSecret: 'barbican-secret',
          scopes: ['mcp:tools'],
        },
      },
    },
    auth: {
      // Every replica is reached at the balancer's URL: links and the redirect URI name it.
      publicUrl: balancer.url,
      apiKeys: { keys: [{ id: 'alice', hash: alice.hash, subject: 'alice' }] },
      network: { allow: ['127.0.0.1'] },
    },
  })
  // Linked tokens are sealed with BARBICAN_SECRET_KEY, which every replica of a fleet shares.
  process.env.BARBICAN_SECRET_KEY ??= Buffer.alloc(32, 7).toString('base64')
  replicas = []
  for (let i = 0; i < 3; i++) {
    // As `barbican serve` does: the fleet's request-state key is read before the server starts.
    const cluster = (await joinFleet(config.redis, process.env, silentLogger))!
    closers.push(() => cluster.leave())
    const backends = await openBackends(config)
    closers.push(() => backends.close())
    connections.push(backends)
    const server = await startServer(config, silentLogger, undefined, undefined, backends)
    closers.push(() => server.stop())
    replicas.push(server)
  }
  issuer.registerClient({
    client_id: 'barbican',
    client_secret: 'barbican-secret',
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    redirect_uris: [`${balancer.url}/oauth/callback`],
    token_endpoint_auth_method: 'client_secret_basic',
  })
})

after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  await dropPostgresSchemas()
})

test('a link made on A, opened on B, called back on C completes; its state is single-use', async () => {
  const [a, b, c] = replicas as [RunningServer, RunningServer, RunningServer]
  const onA = await connect(`${a.url}/mcp`, alice.key)
  const onC = await connect(`${c.url}/mcp`, alice.key)
  try {
    const linkUrl = await linkUrlFrom(onA, 'files')
    assert.ok(linkUrl.startsWith(`${balancer.url}/link/files?ticket=`), linkUrl)

    balancer.target = b.url
    const { cookie, authorize } = await openLinkPage(linkUrl)
    assert.equal(authorize.origin, issuer.issuer)
    // The ticket was taken on B: opened again on C, it is gone.
    balancer.target = c.url
    const again = await fetch(linkUrl)
    assert.equal(again.status, 400)
    assert.match(await again.text(), /Link expired/)

    const callback = await browse(authorize.toString(), (u) => u.pathname === '/oauth/callback')
    assert.equal(callback.origin, balancer.url)
    balancer.target = c.url
    const done = await fetch(callback, { headers: { cookie } })
    assert.equal(done.status, 200, await done.clone().text())
    assert.match(await done.text(), /is linked/)

    // The state was taken on C: the same callback on A is refused with the same error.
    balancer.target = a.url
    const replay = await fetch(callback, { headers: { cookie } })
    assert.equal(replay.status, 400)
    assert.match(await replay.text(), /Link expired/)

    // The tokens C stored in PostgreSQL serve the user on A and on C.
    assert.equal((await upstreamClaims(onA)).sub, 'alice')
    assert.equal((await upstreamClaims(onC)).sub, 'alice')
    // One replica asked the issuer for its metadata; the others read it from Redis (ADR 082).
    const discoveries =
      issuer.requestsTo('/.well-known/oauth-authorization-server') +
      issuer.requestsTo('/.well-known/openid-configuration')
    assert.equal(discoveries, 1)
  } finally {
    await onA.close()
    await onC.close()
  }
})

test('two replicas refreshing one expired token at once make one refresh request', async () => {
  const [a, b] = replicas as [RunningServer, RunningServer]
  const clients: Client[] = [
    await connect(`${a.url}/mcp`, alice.key),
    await connect(`${b.url}/mcp`, alice.key),
  ]
  try {
    // The stored token expires within the refresh margin: both calls need a refresh. A slow
    // issuer keeps the first refresh open while the second replica reads the same stale token.
    issuer.tokenDelayMs = 400
    const before = issuer.requestsTo('/token')
    const claims = await Promise.all(clients.map((client) => upstreamClaims(client)))
    issuer.tokenDelayMs = 0
    assert.equal(issuer.requestsTo('/token') - before, 1, 'one refresh request at the issuer')
    assert.equal(claims[0]!.sub, 'alice')
    assert.equal(claims[1]!.sub, 'alice')
    assert.equal(claims[0]!.jti, claims[1]!.jti, 'both calls carried the one refreshed token')

    // The rotated refresh token was stored: the link survives the next refresh.
    const next = await upstreamClaims(clients[1]!)
    assert.notEqual(next.jti, claims[0]!.jti)
  } finally {
    issuer.tokenDelayMs = 0
    for (const client of clients) await client.close()
  }
})

test('a replica that lost Redis refreshes without the lock and starts no link', async () => {
  const c = replicas[2]!
  const onC = await connect(`${c.url}/mcp`, alice.key)
  try {
    // C's connection to Redis is gone (the server went away, as far as C can tell).
    await connections[2]!.close()
    balancer.target = c.url
    const page = await fetch(`${balancer.url}/link/files?ticket=anything`)
    assert.equal(page.status, 503)
    assert.match(await page.text(), /cannot continue this link right now/)

    const before = issuer.requestsTo('/token')
    const claims = await upstreamClaims(onC)
    assert.equal(claims.sub, 'alice', 'the call is served with a refreshed token')
    assert.equal(issuer.requestsTo('/token') - before, 1, 'refreshed without the lock')
  } finally {
    await onC.close()
  }
})
