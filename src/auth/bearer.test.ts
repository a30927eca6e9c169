import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { type CryptoKey, exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose'
import { createGuardedFetch, type GuardedFetch } from '../net/guarded-fetch.ts'
import { AuthFailure } from './auth-failure.ts'
import { createJwtVerifier } from './bearer.ts'
import type { Identity } from './identity.ts'

interface Key {
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly jwk: JWK
}

async function key(kid: string): Promise<Key> {
  const { privateKey, publicKey } = await generateKeyPair('ES256')
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: 'ES256' } }
}

describe('JWT verification against a JWKS', () => {
  let server: Server
  let issuer: string
  let fetch: GuardedFetch
  let published: JWK[] = []
  let jwksFetches = 0
  const audience = 'https://gw.example/mcp'

  before(async () => {
    server = createServer((req, res) => {
      if (req.url === '/jwks') jwksFetches++
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify(req.url === '/jwks' ? { keys: published } : {}))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
  })
  after(async () => {
    await fetch.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  const token = (k: Key, claims: Record<string, unknown> = {}) =>
    new SignJWT({ scope: 'a b', client_id: 'cli', tenant: 't1', ...claims })
      .setProtectedHeader({ alg: 'ES256', kid: k.kid })
      .setIssuer(issuer)
      .setAudience(audience)
      .setSubject('alice')
      .setExpirationTime('5m')
      .sign(k.privateKey)

  test('caches the key set, and refetches it once when a token names a new key (rotation)', async () => {
    const first = await key('k1')
    const second = await key('k2')
    published = [first.jwk]
    jwksFetches = 0
    const verifier = createJwtVerifier({
      issuer,
      jwksUri: `${issuer}/jwks`,
      algorithms: ['ES256'],
      clockToleranceSeconds: 0,
      fetch,
      cooldownMs: 0,
    })
    const identity = await verifier.verify(await token(first), [audience])
    assert.equal(identity.subject, 'alice')
    assert.equal(identity.tenant, 't1')
    assert.equal(identity.client, 'cli')
    assert.deepEqual(identity.scopes, ['a', 'b'])
    await verifier.verify(await token(first), [audience])
    assert.equal(jwksFetches, 1, 'the key set is cached')

    published = [first.jwk, second.jwk]
    assert.equal((await verifier.verify(await token(second), [audience])).subject, 'alice')
    assert.equal(jwksFetches, 2, 'one refetch for the new key id')

    published = [second.jwk]
    const retired = await token(first)
    await verifier.verify(retired, [audience]) // still cached: rotation grace
    const unknown = await key('k3')
    await assert.rejects(verifier.verify(await token(unknown), [audience]), (err: unknown) => {
      assert.ok(err instanceof AuthFailure)
      assert.equal(err.error, 'invalid_token')
      assert.match(err.message, /unknown key/)
      return true
    })
  })

  test('answers 503 rather than 401 when the key set cannot be fetched', async () => {
    const k = await key('k5')
    const verifier = createJwtVerifier({
      issuer,
      jwksUri: 'http://127.0.0.1:9/jwks',
      algorithms: ['ES256'],
      clockToleranceSeconds: 0,
      fetch,
    })
    await assert.rejects(verifier.verify(await token(k), [audience]), (err: unknown) => {
      assert.ok(err instanceof AuthFailure)
      assert.equal(err.status, 503)
      return true
    })
  })

  test('refuses algorithms outside the allowlist even with a valid signature', async () => {
    const k = await key('k9')
    published = [k.jwk]
    const verifier = createJwtVerifier({
      issuer,
      jwksUri: `${issuer}/jwks`,
      algorithms: ['RS256'],
      clockToleranceSeconds: 0,
      fetch,
    })
    await assert.rejects(verifier.verify(await token(k), [audience]), /refused algorithm/)
  })
})

describe('expiry of a verified token', () => {
  const verifierWith = (clockToleranceSeconds: number) =>
    createJwtVerifier({
      issuer: 'https://issuer.test',
      jwksUri: 'https://issuer.test/jwks',
      algorithms: ['ES256'],
      clockToleranceSeconds,
      fetch: (() => Promise.reject(new Error('no fetch'))) as never,
    })
  const identity = (exp: unknown) =>
    ({ subject: 'alice', scopes: [], method: 'jwt', claims: { exp } }) as Identity

  test('is judged like jose does: expired from exp, minus the clock tolerance', () => {
    const now = 1_700_000_000_000
    assert.equal(verifierWith(0).expired(identity(1_700_000_001), now), false)
    assert.equal(verifierWith(0).expired(identity(1_700_000_000), now), true)
    assert.equal(verifierWith(30).expired(identity(1_699_999_980), now), false)
    assert.equal(verifierWith(30).expired(identity(1_699_999_970), now), true)
  })

  test('an identity without a numeric exp counts as expired (fail closed)', () => {
    assert.equal(verifierWith(0).expired(identity(undefined)), true)
    assert.equal(verifierWith(0).expired(identity('9999999999')), true)
  })
})
