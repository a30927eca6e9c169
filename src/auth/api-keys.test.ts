import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { ApiKeyStore, generateApiKey, hashApiKey } from './api-keys.ts'

describe('API keys', () => {
  test('a generated key verifies to its subject, and only its hash is stored', () => {
    const { key, hash } = generateApiKey()
    assert.match(key, /^bk_[A-Za-z0-9_-]{43}$/)
    assert.equal(hash, hashApiKey(key))
    assert.ok(!hash.includes(key.slice(3)))
    const store = new ApiKeyStore([{ id: 'ci', hash, subject: 'ci-bot', scopes: ['mcp:tools'] }])
    const identity = store.verify(key)
    assert.equal(identity?.subject, 'ci-bot')
    assert.equal(identity?.method, 'api-key')
    assert.equal(identity?.client, 'api-key:ci')
    assert.deepEqual(identity?.scopes, ['mcp:tools'])
    assert.equal(store.verify(`${key}x`), undefined)
  })

  test('a revoked key stops verifying at once', () => {
    const { key, hash } = generateApiKey()
    const store = new ApiKeyStore([{ id: 'k', hash, subject: 'alice' }])
    assert.ok(store.verify(key))
    assert.equal(store.revoke('k'), true)
    assert.equal(store.verify(key), undefined)
    assert.equal(store.revoke('missing'), false)
  })

  test('keys in the keys file are re-read when the file changes, and a broken file grants nothing', () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-keys-'))
    try {
      const file = join(dir, 'keys.json')
      const a = generateApiKey()
      const b = generateApiKey()
      writeFileSync(file, JSON.stringify({ keys: [{ id: 'a', hash: a.hash, subject: 'alice' }] }))
      const store = new ApiKeyStore([], { file })
      assert.equal(store.verify(a.key)?.subject, 'alice')
      writeFileSync(
        file,
        JSON.stringify({ keys: [{ id: 'b', hash: b.hash, subject: 'bob', tenant: 't1' }] }),
      )
      assert.equal(store.verify(a.key), undefined, 'removed from the file: revoked')
      assert.equal(store.verify(b.key)?.tenant, 't1')
      writeFileSync(file, '{ not json')
      assert.equal(store.verify(b.key), undefined)
      rmSync(file)
      assert.equal(store.verify(b.key), undefined)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test('the same key yields the same frozen identity; adding or revoking a key takes effect at once', () => {
    const a = generateApiKey()
    const b = generateApiKey()
    const store = new ApiKeyStore([
      { id: 'a', hash: a.hash.toUpperCase().replace('SHA256:', 'sha256:'), subject: 'alice' },
    ])
    const first = store.verify(a.key)
    assert.equal(first?.subject, 'alice', 'stored hashes are matched case-insensitively')
    assert.equal(store.verify(a.key), first)
    assert.ok(Object.isFrozen(first) && Object.isFrozen(first?.scopes))
    assert.equal(store.verify(b.key), undefined)
    store.add({ id: 'b', hash: b.hash, subject: 'bob', scopes: ['x'] })
    assert.equal(store.verify(b.key)?.subject, 'bob')
    assert.equal(store.revoke('a'), true)
    assert.equal(store.verify(a.key), undefined)
    assert.equal(store.verify(b.key)?.subject, 'bob')
    store.add({ id: 'a', hash: a.hash, subject: 'alice-again' })
    assert.equal(store.verify(a.key)?.subject, 'alice-again')
    const malformed = new ApiKeyStore([{ id: 'm', hash: a.hash.slice(0, -1), subject: 'm' }])
    assert.equal(malformed.verify(a.key), undefined)
  })
})
