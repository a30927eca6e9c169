import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import { ANONYMOUS, type Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import { RequestStateSealer, requestDigest, stateKeyFromEnv, subjectOf } from './request-state.ts'

const alice: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
const digest = requestDigest('tools/call', { name: 'x', arguments: { a: 1 } })

function sealed(sealer: RequestStateSealer, exp = Date.now() + 60_000): string {
  return sealer.seal({ sub: subjectOf(alice), dig: digest, exp, c: 'held-1' })
}

function rejects(fn: () => unknown, pattern: RegExp): void {
  assert.throws(
    fn,
    (e: unknown) =>
      e instanceof BarbicanError && e.code === 'ERR_INVALID_PARAMS' && pattern.test(e.message),
  )
}

describe('sealed requestState', () => {
  test('opens for the same identity and request and returns what was sealed', () => {
    const sealer = new RequestStateSealer(randomBytes(32))
    const state = sealer.open(sealed(sealer), alice, digest)
    assert.equal(state.c, 'held-1')
    assert.equal(state.sub, 'alice')
  })

  test('names the replica holding its call, and nothing for any other state', () => {
    const sealer = new RequestStateSealer(randomBytes(32))
    const exp = Date.now() + 60_000
    const held = sealer.seal({ sub: 'alice', dig: digest, exp, c: 'held-1', o: 'replica-a' })
    assert.equal(sealer.heldBy(held), 'replica-a')
    assert.equal(sealer.heldBy(sealed(sealer)), undefined, 'one process: no replica')
    const wrapped = sealer.seal({ sub: 'alice', dig: digest, exp, u: 'up', o: 'replica-a' })
    assert.equal(sealer.heldBy(wrapped), undefined, 'no held call to route to')
    assert.equal(new RequestStateSealer(randomBytes(32)).heldBy(held), undefined, 'another key')
    assert.equal(sealer.heldBy('b1.AAAA'), undefined)
    assert.equal(sealer.heldBy(42), undefined)
  })

  test('keeps its content confidential', () => {
    const sealer = new RequestStateSealer(randomBytes(32))
    const token = sealed(sealer)
    assert.doesNotMatch(Buffer.from(token.slice(3), 'base64url').toString('latin1'), /held-1|alice/)
  })

  test('refuses a tampered token, another key, another identity and another request', () => {
    const sealer = new RequestStateSealer(randomBytes(32))
    const token = sealed(sealer)
    rejects(() => sealer.open(`${token}-TAMPERED`, alice, digest), /integrity/)
    // Replace the second-to-last character (always ciphertext bits) with a different one.
    const flipped = `${token.slice(0, -2)}${token.at(-2) === 'A' ? 'B' : 'A'}${token.slice(-1)}`
    rejects(() => sealer.open(flipped, alice, digest), /integrity/)
    rejects(() => new RequestStateSealer(randomBytes(32)).open(token, alice, digest), /integrity/)
    rejects(() => sealer.open(token, ANONYMOUS, digest), /integrity/)
    const other = requestDigest('tools/call', { name: 'x', arguments: { a: 2 } })
    rejects(() => sealer.open(token, alice, other), /integrity/)
    rejects(() => sealer.open(42, alice, digest), /integrity/)
  })

  test('expires', () => {
    const sealer = new RequestStateSealer(randomBytes(32))
    rejects(() => sealer.open(sealed(sealer, Date.now() - 1), alice, digest), /expired/)
  })

  test('the digest ignores the MRTR fields, _meta and key order but not the arguments', () => {
    const base = { name: 't', arguments: { a: 1, b: 2 } }
    const retry = {
      arguments: { b: 2, a: 1 },
      name: 't',
      inputResponses: { k: {} },
      requestState: 's',
      _meta: { progressToken: 1 },
    }
    assert.equal(requestDigest('tools/call', base), requestDigest('tools/call', retry))
    assert.notEqual(requestDigest('tools/call', base), requestDigest('prompts/get', base))
  })

  test('the key comes from BARBICAN_STATE_KEY in hex or base64, else is random', () => {
    const key = randomBytes(32)
    assert.deepEqual(stateKeyFromEnv({ BARBICAN_STATE_KEY: key.toString('hex') }), key)
    assert.deepEqual(stateKeyFromEnv({ BARBICAN_STATE_KEY: key.toString('base64') }), key)
    assert.equal(stateKeyFromEnv({}).length, 32)
    assert.throws(() => stateKeyFromEnv({ BARBICAN_STATE_KEY: 'c2hvcnQ=' }), /32 bytes/)
  })

  test('a passphrase of 32 characters or more is stretched to the same key everywhere', () => {
    const secret = 'correct horse battery staple, twice over'
    const one = stateKeyFromEnv({ BARBICAN_STATE_KEY: secret })
    assert.equal(one.length, 32)
    assert.deepEqual(stateKeyFromEnv({ BARBICAN_STATE_KEY: secret }), one)
    assert.notDeepEqual(stateKeyFromEnv({ BARBICAN_STATE_KEY: `${secret}!` }), one)
    assert.throws(() => stateKeyFromEnv({ BARBICAN_STATE_KEY: 'too short a secret' }), /32 bytes/)
  })

  test('a state sealed by one replica opens on another given the same secret', () => {
    const env = { BARBICAN_STATE_KEY: 'a secret every replica of the fleet is given' }
    const here = new RequestStateSealer(stateKeyFromEnv(env))
    const there = new RequestStateSealer(stateKeyFromEnv({ ...env }))
    assert.equal(there.open(sealed(here), alice, digest).c, 'held-1')
    const stranger = new RequestStateSealer(stateKeyFromEnv({}))
    rejects(() => stranger.open(sealed(here), alice, digest), /invalid/)
  })
})
