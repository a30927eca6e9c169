/**
 * The identity caches' Redis level (ADR 082), on the real Redis: two "replicas" (each its own
 * verifier, introspector or signer, with its own memory and its own connection) share one key
 * prefix. What A asked the authorization server, B serves without asking it again; inactive
 * answers are never shared, nothing outlives the token, and no key holds a raw token. The
 * issuer's metadata is shared the same way, counted at a real authorization server
 * (oidc-provider).
 */
import assert from 'node:assert/strict'
import { generateKeyPairSync } from 'node:crypto'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { startIssuer, type TestIssuer } from '../../test/fixtures/auth-issuer.ts'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { createGuardedFetch } from '../net/guarded-fetch.ts'
import { openRedis, type RedisClient } from '../store/redis.ts'
import { IssuerMetadataCache, METADATA_MAX_AGE_MS } from './as-metadata.ts'
import { AssertionSigner } from './assertion.ts'
import { createJwtVerifier } from './bearer.ts'
import { createIntrospector } from './introspection.ts'
import { RedisSharedCache } from './shared-cache.ts'

const AUDIENCE = 'https://gw.example/mcp'
const fetch = createGuardedFetch({ allow: ['127.0.0.1'] })

describe('identity caches shared in Redis', () => {
  const clients: RedisClient[] = []
  const prefix = freshRedisPrefix()
  let as: Server
  let base = ''
  const calls = { introspection: 0, jwks: 0 }
  /** Token → introspection answer; JWKS served at /jwks. */
  const answers = new Map<string, Record<string, unknown>>()
  let jwks: unknown = { keys: [] }

  before(async () => {
    as = createServer((req, res) => {
      let body = ''
      req.on('data', (c) => {
        body += c
      })
      req.on('end', () => {
        res.setHeader('content-type', 'application/json')
        if (req.url === '/jwks') {
          calls.jwks++
          res.end(JSON.stringify(jwks))
          return
        }
        calls.introspection++
        const token = new URLSearchParams(body).get('token') ?? ''
        res.end(JSON.stringify(answers.get(token) ?? { active: false }))
      })
    })
    await new Promise<void>((resolve) => as.listen(0, '127.0.0.1', resolve))
    base = `http://127.0.0.1:${(as.address() as AddressInfo).port}`
    for (let i = 0; i < 2; i++) clients.push(await openRedis(REDIS_URL))
  })

  after(async () => {
    const keys = await clients[0]!.keys(`${prefix}*`)
    if (keys.length > 0) await clients[0]!.del(keys)
    for (const c of clients) c.destroy()
    as.close()
    await fetch.close()
  })

  /** Replica i's view of the shared level. */
  const cache = (i: number) => new RedisSharedCache(clients[i]!, prefix)

  const introspector = (i: number) =>
    createIntrospector({
      endpoint: `${base}/introspect`,
      clientId: 'barbican',
      clientSecret: 's',
      cacheSeconds: 60,
      fetch,
      shared: cache(i),
    })

  test('B serves a token A introspected, without asking the authorization server', async () => {
    const exp = Math.floor(Date.now() / 1000) + 30
    answers.set('opaque-ada', { active: true, sub: 'ada', aud: AUDIENCE, exp, client_id: 'cli' })
    const [a, b] = [introspector(0), introspector(1)]
    const before = calls.introspection
    assert.equal((await a.introspect('opaque-ada', [AUDIENCE])).subject, 'ada')
    assert.equal(calls.introspection, before + 1)
    const onB = await b.introspect('opaque-ada', [AUDIENCE])
    assert.equal(onB.subject, 'ada')
    assert.equal(onB.client, 'cli')
    assert.equal(calls.introspection, before + 1, 'B did not call the authorization server')
    // Stored under a digest, never the token, and for no longer than the token lives (30 s,
    // under the 60 s cacheSeconds).
    const keys = await clients[0]!.keys(`${prefix}cache:introspection:*`)
    assert.equal(keys.length, 1)
    assert.ok(!keys[0]!.includes('opaque-ada'))
    const ttl = await clients[0]!.pTTL(keys[0]!)
    assert.ok(ttl > 0 && ttl <= 30_000, `TTL ${ttl} ms outlives the token`)
  })

  test('an inactive answer is not shared: B asks again', async () => {
    const [a, b] = [introspector(0), introspector(1)]
    const before = calls.introspection
    await assert.rejects(a.introspect('opaque-revoked', [AUDIENCE]), /not active/)
    await assert.rejects(b.introspect('opaque-revoked', [AUDIENCE]), /not active/)
    assert.equal(calls.introspection, before + 2)
  })

  test('B verifies a JWT with the key set A fetched', async () => {
    const { privateKey, publicKey } = await generateKeyPair('ES256')
    jwks = { keys: [{ ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256' }] }
    const token = await new SignJWT({ scope: 'read' })
      .setProtectedHeader({ alg: 'ES256', kid: 'k1' })
      .setIssuer(base)
      .setSubject('ada')
      .setAudience(AUDIENCE)
      .setExpirationTime('1m')
      .sign(privateKey)
    const verifier = (i: number) =>
      createJwtVerifier({
        issuer: base,
        jwksUri: `${base}/jwks`,
        algorithms: ['ES256'],
        clockToleranceSeconds: 0,
        fetch,
        shared: cache(i),
      })
    const before = calls.jwks
    assert.equal((await verifier(0).verify(token, [AUDIENCE])).subject, 'ada')
    assert.equal(calls.jwks, before + 1)
    assert.equal((await verifier(1).verify(token, [AUDIENCE])).subject, 'ada')
    assert.equal(calls.jwks, before + 1, 'B did not fetch the key set')
  })

  test('assertions are shared when the replicas share the signing key, never otherwise', async () => {
    const pem = generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString()
    const input = {
      identity: { subject: 'ada', scopes: ['read'], method: 'jwt' as const },
      audience: 'urn:barbican:upstream:drive',
    }
    const signer = (i: number, privateKeyPem?: string) =>
      new AssertionSigner({
        issuer: () => 'https://gw.example',
        ttlSeconds: 60,
        privateKeyPem,
        shared: cache(i),
      })
    const onA = await signer(0, pem).assertion(input)
    assert.equal(await signer(1, pem).assertion(input), onA, 'B reuses what A signed')
    const ownKeys = [await signer(0).assertion(input), await signer(1).assertion(input)]
    assert.notEqual(ownKeys[0], ownKeys[1], 'a key of its own: nothing shared')
    assert.notEqual(ownKeys[0], onA)
  })

  describe("the issuer's metadata (RFC 8414 / OpenID discovery)", () => {
    let issuer: TestIssuer
    before(async () => {
      issuer = await startIssuer({
        clients: [
          {
            client_id: 'agent',
            client_secret: 'agent-secret',
            grant_types: ['client_credentials'],
            response_types: [],
            redirect_uris: [],
          },
        ],
      })
    })
    after(async () => {
      await issuer.close()
    })

    /** Requests that reached the issuer's discovery documents. */
    const discoveries = () =>
      issuer.requestsTo('/.well-known/oauth-authorization-server') +
      issuer.requestsTo('/.well-known/openid-configuration')

    /** Replica i's verifier: no jwksUri configured, so the key set's address is discovered. */
    const verifier = (i: number) =>
      createJwtVerifier({
        issuer: issuer.issuer,
        algorithms: ['ES256'],
        clockToleranceSeconds: 0,
        fetch,
        shared: cache(i),
        metadata: new IssuerMetadataCache({ fetch, shared: cache(i) }),
      })

    test('B verifies a token with the metadata and key set A fetched, asking the issuer nothing', async () => {
      const token = await issuer.clientToken(AUDIENCE, 'mcp:tools')
      assert.equal(discoveries(), 0)
      assert.equal((await verifier(0).verify(token, [AUDIENCE])).subject, 'agent')
      const byA = discoveries()
      assert.ok(byA >= 1, 'A discovered the issuer')
      const keySets = issuer.requestsTo('/jwks')
      assert.equal(keySets, 1)
      assert.equal((await verifier(1).verify(token, [AUDIENCE])).subject, 'agent')
      assert.equal(discoveries(), byA, 'B fetched no metadata of its own')
      assert.equal(issuer.requestsTo('/jwks'), keySets, 'nor the key set')
      // Kept for a bounded time, under a digest of the issuer.
      const keys = await clients[0]!.keys(`${prefix}cache:metadata:*`)
      assert.equal(keys.length, 1)
      const ttl = await clients[0]!.pTTL(keys[0]!)
      assert.ok(ttl > 0 && ttl <= METADATA_MAX_AGE_MS, `TTL ${ttl} ms`)
    })

    test('memory first: a second look-up on one replica reads neither Redis nor the issuer', async () => {
      let reads = 0
      const counting = {
        get: (kind: 'metadata', name: string) => {
          reads++
          return cache(1).get(kind, name)
        },
        set: cache(1).set.bind(cache(1)),
      }
      const metadata = new IssuerMetadataCache({ fetch, shared: counting })
      const before = discoveries()
      const [one, two] = await Promise.all([
        metadata.get(issuer.issuer),
        metadata.get(issuer.issuer),
      ])
      assert.equal(one.issuer, issuer.issuer)
      assert.equal(two, one)
      assert.equal(reads, 1, 'concurrent misses share one look-up')
      assert.equal(await metadata.get(issuer.issuer), one)
      assert.equal(reads, 1)
      assert.equal(discoveries(), before, 'served from Redis, not the issuer')
    })

    test('a copy naming another issuer, an expired one, or Redis failing is a miss', async () => {
      const other = freshRedisPrefix()
      const poisoned = new RedisSharedCache(clients[0]!, other)
      await poisoned.set(
        'metadata',
        issuer.issuer,
        JSON.stringify({ at: Date.now(), doc: { issuer: 'https://evil.example', jwks_uri: 'x' } }),
        60_000,
      )
      let before = discoveries()
      const doc = await new IssuerMetadataCache({ fetch, shared: poisoned }).get(issuer.issuer)
      assert.equal(doc.issuer, issuer.issuer)
      assert.ok(discoveries() > before, 'the poisoned copy was not used')
      // The issuer's answer replaced it; an hour later it is stale everywhere.
      const later = new IssuerMetadataCache({
        fetch,
        shared: poisoned,
        now: () => Date.now() + METADATA_MAX_AGE_MS,
      })
      before = discoveries()
      await later.get(issuer.issuer)
      assert.ok(discoveries() > before, 'a copy past its age is not used')
      const dead = await openRedis(REDIS_URL)
      dead.destroy()
      before = discoveries()
      const offline = new IssuerMetadataCache({ fetch, shared: new RedisSharedCache(dead, other) })
      assert.equal((await offline.get(issuer.issuer)).issuer, issuer.issuer)
      assert.ok(discoveries() > before)
      const keys = await clients[0]!.keys(`${other}*`)
      if (keys.length > 0) await clients[0]!.del(keys)
    })
  })
})
