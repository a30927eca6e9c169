import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import { describe, test } from 'node:test'
import type { Identity } from './identity.ts'
import { identityKey, requestIdentity, setRequestIdentity } from './request-identity.ts'

describe('request identity', () => {
  test('the identity set on a request is read back from that request only', () => {
    const a = {} as IncomingMessage
    const b = {} as IncomingMessage
    const alice: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
    setRequestIdentity(a, alice)
    assert.equal(requestIdentity(a), alice)
    assert.equal(requestIdentity(b), undefined)
    assert.deepEqual(Object.keys(a), [], 'nothing a serialiser or header loop would see')
  })

  test('binding keys tell key holders, users and tenants apart, remembered or not', () => {
    const user: Identity = { subject: 'x', tenant: 't', scopes: [], method: 'jwt' }
    const key: Identity = Object.freeze({
      subject: 'x',
      tenant: 't',
      scopes: [],
      method: 'api-key',
    })
    const other: Identity = Object.freeze({ ...key, tenant: 'u' })
    assert.notEqual(identityKey(user), identityKey(key))
    assert.equal(identityKey(key), identityKey(key))
    assert.equal(identityKey({ ...key }), identityKey(key))
    assert.notEqual(identityKey(other), identityKey(key))
  })
})
