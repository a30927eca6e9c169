import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { LocalKeyProvider } from './secret-box.ts'
import { sqliteBackend } from './sqlite-backend.ts'
import { TokenStore } from './token-store.ts'

const alice = { user: '["user","","alice"]', upstream: 'drive', issuer: 'https://as.example' }

describe('linked token store', () => {
  test('keeps tokens per user, upstream and issuer, sealed, and across restarts', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-tokens-'))
    const file = join(dir, 'tokens.db')
    const key = randomBytes(32)
    try {
      const first = sqliteBackend(file)
      const store = new TokenStore(new LocalKeyProvider(key), first)
      await store.put(alice, { accessToken: 'at-secret', refreshToken: 'rt-secret' })
      assert.equal((await store.get(alice))?.accessToken, 'at-secret')
      assert.equal(await store.get({ ...alice, issuer: 'https://other.example' }), undefined)
      assert.equal(await store.get({ ...alice, user: '["user","","bob"]' }), undefined)
      first.close()
      assert.ok(!readFileSync(file).includes('at-secret'), 'only sealed values reach the file')

      const again = new TokenStore(new LocalKeyProvider(key), sqliteBackend(file))
      assert.equal((await again.get(alice))?.refreshToken, 'rt-secret')

      const rekeyed = new TokenStore(new LocalKeyProvider(randomBytes(32)), sqliteBackend(file))
      assert.equal(await rekeyed.get(alice), undefined, 'another key reads as not linked')
      assert.equal(await again.get(alice), undefined, 'and the unreadable entry is gone')
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})

describe('linked accounts listing', () => {
  const bob = { ...alice, user: '["user","","bob"]', upstream: 'mail' }
  for (const kind of ['memory', 'sqlite'] as const) {
    test(`${kind}: lists who linked what without unsealing, and forgets a deleted link`, async () => {
      const dir = mkdtempSync(join(tmpdir(), 'barbican-links-'))
      const backend = kind === 'sqlite' ? sqliteBackend(join(dir, 't.db')) : undefined
      const store = new TokenStore(new LocalKeyProvider(randomBytes(32)), backend)
      try {
        assert.deepEqual(await store.links(), [])
        await store.put(alice, { accessToken: 'a' })
        await store.put(bob, { accessToken: 'b' })
        const sorted = (links: unknown) =>
          (links as { user: string }[]).map((l) => JSON.stringify(l)).sort()
        assert.deepEqual(sorted(await store.links()), sorted([alice, bob]))
        await store.delete(alice)
        assert.deepEqual(await store.links(), [bob])
        assert.equal(await store.get(alice), undefined)
      } finally {
        backend?.close()
        rmSync(dir, { recursive: true, force: true })
      }
    })
  }

  test('a backend that cannot list says so (undefined), not "no links"', async () => {
    const store = new TokenStore(new LocalKeyProvider(randomBytes(32)), {
      get: async () => undefined,
      put: async () => {},
      putIf: async () => false,
      delete: async () => {},
      deleteIf: async () => false,
    })
    assert.equal(await store.links(), undefined)
  })
})
