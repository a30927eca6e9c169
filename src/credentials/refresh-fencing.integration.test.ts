/**
 * Fencing of token refreshes (docs/decisions/089, "Amended"): a refresh stores its tokens only
 * if the link still holds the entry it read, in every backend of linked tokens; a holder of the
 * fleet's refresh lock that outlived the lock then finds the newer tokens another replica stored
 * and uses those, instead of writing its older result over them.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import {
  dropPostgresSchemas,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../../test/support/backends.ts'
import { servedIssuerMetadata } from '../../test/support/issuer-metadata.ts'
import type { Identity } from '../auth/identity.ts'
import { identityKey } from '../auth/request-identity.ts'
import { createGuardedFetch } from '../net/guarded-fetch.ts'
import { openRedis } from '../store/redis.ts'
import { silentLogger } from '../telemetry/log.ts'
import { ClientRegistrar } from './client-registration.ts'
import { LinkRegistry } from './oauth-link.ts'
import { postgresBackend } from './postgres-backend.ts'
import { RedisRefreshLocks, type RefreshLocks } from './refresh-lock.ts'
import { LocalKeyProvider } from './secret-box.ts'
import { sqliteBackend } from './sqlite-backend.ts'
import { memoryBackend, type SealedBackend, TokenStore } from './token-store.ts'

after(dropPostgresSchemas)

const alice = { user: '["user","","alice"]', upstream: 'drive', issuer: 'https://as.example' }

const dir = mkdtempSync(join(tmpdir(), 'barbican-fencing-'))
after(() => rmSync(dir, { recursive: true, force: true }))

const backends: Record<string, () => Promise<SealedBackend & { close?(): unknown }>> = {
  memory: async () => memoryBackend(),
  sqlite: async () => sqliteBackend(join(dir, `${randomBytes(4).toString('hex')}.db`)),
  postgres: async () => postgresBackend(await freshPostgresUrl()),
}

describe('conditional writes of linked tokens', () => {
  for (const [kind, open] of Object.entries(backends)) {
    test(`${kind}: a write against a version that changed loses and changes nothing`, async () => {
      const backend = await open()
      const store = new TokenStore(new LocalKeyProvider(randomBytes(32)), backend)
      try {
        await store.put(alice, { accessToken: 'at-0', refreshToken: 'rt-0' })
        const first = (await store.read(alice))!
        const second = (await store.read(alice))!
        assert.equal(first.version, second.version, 'one entry, one version')
        assert.equal(await store.replace(alice, second.version, { accessToken: 'at-b' }), true)
        // The first reader's write and deletion come too late.
        assert.equal(await store.replace(alice, first.version, { accessToken: 'at-a' }), false)
        assert.equal(await store.forget(alice, first.version), false)
        assert.equal((await store.get(alice))?.accessToken, 'at-b')
        const now = (await store.read(alice))!
        assert.equal(await store.forget(alice, now.version), true)
        assert.equal(await store.get(alice), undefined)
        assert.equal(await store.replace(alice, now.version, { accessToken: 'at-c' }), false)
        assert.equal(await store.get(alice), undefined, 'a forgotten link is not brought back')
      } finally {
        await backend.close?.()
      }
    })
  }
})

/** An issuer whose first refresh is answered only after `firstDelayMs`; counts token requests. */
async function slowFirstIssuer(firstDelayMs: number) {
  let requests = 0
  let sawFirst!: () => void
  const firstSeen = new Promise<void>((resolve) => {
    sawFirst = resolve
  })
  const server = createServer(async (req: IncomingMessage, res: ServerResponse) => {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
    if (servedIssuerMetadata(req, res, base)) return
    for await (const _ of req) {
      // The form is not read: each request's order names its answer.
    }
    const n = ++requests
    if (n === 1) {
      sawFirst()
      await new Promise((resolve) => setTimeout(resolve, firstDelayMs))
    }
    res.setHeader('content-type', 'application/json')
    res.end(
      JSON.stringify({
        access_token: n === 1 ? 'at-paused' : 'at-newer',
        refresh_token: n === 1 ? 'rt-paused' : 'rt-newer',
        token_type: 'Bearer',
        expires_in: 3600,
      }),
    )
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return { url, firstSeen, requests: () => requests, close: () => server.close() }
}

test('a refresher paused past the lock cannot store over the newer token', async () => {
  const LOCK_MS = 200
  const issuer = await slowFirstIssuer(4 * LOCK_MS)
  const redis = await openRedis(REDIS_URL)
  const backend = postgresBackend(await freshPostgresUrl())
  const fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
  try {
    const keys = new LocalKeyProvider(randomBytes(32))
    const real = new RedisRefreshLocks(redis, freshRedisPrefix())
    // The fleet's lock with a short life, so the first holder outlives it.
    const locks: RefreshLocks = {
      acquire: (name) => real.acquire(name, LOCK_MS),
      release: (name, token) => real.release(name, token),
    }
    const replica = () => {
      const store = new TokenStore(keys, backend)
      const clients = new ClientRegistrar({
        fetch,
        keys,
        backend,
        baseUrl: () => 'http://127.0.0.1:1',
        redirectUri: () => 'http://127.0.0.1:1/oauth/callback',
        log: silentLogger,
      })
      const registry = new LinkRegistry({
        fetch,
        store,
        baseUrl: () => 'http://127.0.0.1:1',
        log: silentLogger,
        clients,
        locks,
      })
      const source = registry.add('drive', {
        clientId: 'barbican',
        scopes: [],
        issuer: issuer.url,
        resource: `${issuer.url}/mcp`,
      })
      return { store, source }
    }
    const a = replica()
    const b = replica()
    const identity: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
    const key = { user: identityKey(identity), upstream: 'drive', issuer: issuer.url }
    await a.store.put(key, { accessToken: 'at-0', refreshToken: 'rt-0', expiresAt: Date.now() })

    // A takes the lock and asks the issuer, which keeps it waiting past the lock's life.
    const onA = a.source.forUser(identity)
    await issuer.firstSeen
    await new Promise((resolve) => setTimeout(resolve, 2 * LOCK_MS))
    // B finds the lock expired, refreshes, and stores the newer token first.
    const onB = await b.source.forUser(identity)
    assert.deepEqual(onB, { headers: { authorization: 'Bearer at-newer' } })
    assert.equal((await b.store.get(key))?.accessToken, 'at-newer')
    // A's answer arrives: its write is fenced off, and it uses what B stored.
    assert.deepEqual(await onA, { headers: { authorization: 'Bearer at-newer' } })
    assert.equal(issuer.requests(), 2, 'both asked the issuer')
    const final = await a.store.get(key)
    assert.equal(final?.accessToken, 'at-newer', 'the newer token stands')
    assert.equal(final?.refreshToken, 'rt-newer')
  } finally {
    issuer.close()
    await fetch.close()
    await backend.close()
    redis.destroy()
  }
})
