import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { createLocalJWKSet, decodeJwt, jwtVerify } from 'jose'
import { AssertionSigner } from './assertion.ts'
import type { Identity } from './identity.ts'

const alice: Identity = {
  subject: 'alice',
  tenant: 'acme',
  client: 'agent',
  scopes: ['mcp:tools'],
  method: 'jwt',
}
const UP = 'https://up.example/mcp'

describe('on-behalf-of assertion reuse', () => {
  test('one caller and audience reuse one verifiable assertion; a fresh signature has its own jti', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const first = await signer.assertion({ identity: alice, audience: UP })
    // A different object with the same claims is the same caller.
    const again = await signer.assertion({ identity: { ...alice }, audience: UP })
    assert.equal(again, first)
    const { payload } = await jwtVerify(first, createLocalJWKSet(await signer.jwks()), {
      issuer: 'https://gw.example',
      audience: UP,
      typ: 'obo+jwt',
    })
    assert.equal(payload.sub, 'alice')
    assert.equal(payload.scope, 'mcp:tools')
    assert.equal(typeof payload.jti, 'string')
    const fresh = await signer.sign({ identity: alice, audience: UP })
    assert.notEqual(decodeJwt(fresh).jti, payload.jti)
  })

  test('concurrent requests share one signature', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const tokens = await Promise.all(
      Array.from({ length: 8 }, () => signer.assertion({ identity: alice, audience: UP })),
    )
    assert.equal(new Set(tokens).size, 1)
  })

  test('a different caller, tenant, client, scope set, method or audience never gets another one', async () => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const jwks = createLocalJWKSet(await signer.jwks())
    const base = await signer.assertion({ identity: alice, audience: UP })
    const variants: [Identity, string][] = [
      [{ ...alice, subject: 'bob' }, UP],
      [{ ...alice, tenant: 'other' }, UP],
      [{ ...alice, tenant: undefined }, UP],
      [{ ...alice, client: 'other-agent' }, UP],
      [{ ...alice, scopes: ['mcp:tools', 'admin'] }, UP],
      [{ ...alice, scopes: [] }, UP],
      [{ ...alice, method: 'api-key' }, UP],
      [alice, 'urn:barbican:upstream:other'],
    ]
    const seen = new Set([base])
    for (const [identity, audience] of variants) {
      const token = await signer.assertion({ identity, audience })
      assert.ok(!seen.has(token), `${JSON.stringify([identity, audience])} got a shared assertion`)
      seen.add(token)
      const { payload } = await jwtVerify(token, jwks, { audience, typ: 'obo+jwt' })
      assert.equal(payload.sub, identity.subject)
      assert.equal(payload.tenant, identity.tenant)
      assert.equal(payload.client_id, identity.client)
      assert.equal(payload.auth_method, identity.method)
      assert.equal(
        payload.scope,
        identity.scopes.length > 0 ? identity.scopes.join(' ') : undefined,
      )
    }
    // And each one is still served to its own caller afterwards.
    assert.equal(await signer.assertion({ identity: alice, audience: UP }), base)
  })

  test('a new assertion is signed once half the lifetime has passed, or when the issuer changes', async () => {
    let issuer = 'https://gw.example'
    const signer = new AssertionSigner({ issuer: () => issuer, ttlSeconds: 1 })
    const first = await signer.assertion({ identity: alice, audience: UP })
    assert.equal(await signer.assertion({ identity: alice, audience: UP }), first)
    await sleep(550)
    const renewed = await signer.assertion({ identity: alice, audience: UP })
    assert.notEqual(renewed, first)
    const claims = decodeJwt(renewed)
    assert.ok((claims.exp ?? 0) * 1000 > Date.now(), 'the renewed assertion is still valid')
    issuer = 'https://gw2.example'
    const moved = await signer.assertion({ identity: alice, audience: UP })
    assert.notEqual(moved, renewed)
    assert.equal(decodeJwt(moved).iss, 'https://gw2.example')
  })

  test('a clock set back makes the next request get a newly signed assertion', async (t) => {
    const signer = new AssertionSigner({ issuer: () => 'https://gw.example', ttlSeconds: 60 })
    const first = await signer.assertion({ identity: alice, audience: UP })
    const now = Date.now()
    t.mock.method(Date, 'now', () => now - 3_600_000)
    const after = await signer.assertion({ identity: alice, audience: UP })
    assert.notEqual(after, first)
    assert.notEqual(decodeJwt(after).jti, decodeJwt(first).jti)
  })
})
