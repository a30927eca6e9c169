/**
 * Linking an upstream account with no client registered by hand: the upstream's authorization
 * server (oidc-provider with open dynamic client registration, RFC 7591) advertises a
 * `registration_endpoint` and no client metadata document support, so Barbican registers itself
 * there on the first link, links the user, and calls the tool with the user's upstream token. The
 * registration is kept sealed in the token store (SQLite here) and survives a restart; when the
 * server forgets the client, Barbican registers again on the next link.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { generateSecretKey } from '../../src/credentials/secret-box.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startIssuer, type TestIssuer } from '../fixtures/auth-issuer.ts'
import {
  type RecordingUpstream,
  startIssuerGuardedUpstream,
  startRecordingUpstream,
} from '../fixtures/auth-upstream.ts'
import { browse, connect, linkUrlFrom, openLinkPage, upstreamClaims } from '../support/link-flow.ts'

// A stable key, so that what was sealed before the restart opens after it.
process.env.BARBICAN_SECRET_KEY = generateSecretKey()

async function freePort(): Promise<number> {
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  const { port } = probe.address() as { port: number }
  await new Promise((resolve) => probe.close(resolve))
  return port
}

describe('linking by dynamic client registration (RFC 7591)', () => {
  let issuer: TestIssuer
  let upstream: RecordingUpstream
  let server: RunningServer
  let configText: string
  const dir = mkdtempSync(join(tmpdir(), 'barbican-dcr-'))
  const alice = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    // Tokens live 20 s, inside Barbican's 30 s refresh margin: every use refreshes as the client.
    issuer = await startIssuer({ clients: [], registration: true, accessTokenTtlSeconds: 20 })
    upstream = await startIssuerGuardedUpstream(issuer.issuer)
    configText = JSON.stringify({
      // A fixed port: the registration is for this redirect URI, across the restart.
      listen: `127.0.0.1:${await freePort()}`,
      upstreams: {
        files: {
          url: upstream.url,
          transport: 'streamable-http',
          // No clientId: Barbican must find its own way to be a client of this issuer.
          credentials: { mode: 'oauth', issuer: issuer.issuer, scopes: ['mcp:tools'] },
        },
      },
      auth: {
        apiKeys: {
          keys: [
            { id: 'alice', hash: alice.hash, subject: 'alice' },
            { id: 'bob', hash: bob.hash, subject: 'bob' },
          ],
        },
        network: { allow: ['127.0.0.1'] },
        tokens: { sqlite: join(dir, 'tokens.db') },
      },
    })
    server = await startServer(parseConfigText(configText).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
    await issuer?.close()
    rmSync(dir, { recursive: true, force: true })
  })

  /** Runs a user's whole link flow; returns the client id the authorization request named. */
  async function link(key: string, login: string): Promise<string> {
    const client = await connect(`${server.url}/mcp`, key)
    try {
      const page = await openLinkPage(await linkUrlFrom(client, 'files'))
      issuer.defaultUser = login
      const callback = await browse(
        page.authorize.toString(),
        (u) => u.pathname === '/oauth/callback',
      )
      const done = await fetch(callback, { headers: { cookie: page.cookie } })
      assert.equal(done.status, 200, await done.clone().text())
      assert.match(await done.text(), /linked/)
      return page.authorize.searchParams.get('client_id') ?? ''
    } finally {
      await client.close()
    }
  }

  test('the first link registers Barbican, and the tool call carries the user token', async () => {
    assert.deepEqual(issuer.registered, [], 'nothing is registered before a user links')
    const clientId = await link(alice.key, 'alice-at-files')
    assert.equal(issuer.registered.length, 1)
    assert.equal(clientId, issuer.registered[0], 'the authorization request names the new client')
    // The upstream saw Alice's own token, issued to the registered client for its resource.
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      const claims = await upstreamClaims(client)
      assert.equal(claims.sub, 'alice-at-files')
      assert.equal(claims.client_id, clientId)
      assert.equal(claims.aud, upstream.url)
    } finally {
      await client.close()
    }
    assert.ok(!JSON.stringify(upstream.requests).includes(alice.key))
  })

  test('the registration and the link survive a restart; a second user reuses the client', async () => {
    await server.stop()
    server = await startServer(parseConfigText(configText).config, silentLogger)
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      // The stored token expired and was refreshed with the stored registration's secret.
      const claims = await upstreamClaims(client)
      assert.equal(claims.sub, 'alice-at-files')
      assert.equal(claims.client_id, issuer.registered[0])
    } finally {
      await client.close()
    }
    const bobs = await link(bob.key, 'bob-at-files')
    assert.equal(bobs, issuer.registered[0])
    assert.equal(issuer.registered.length, 1, 'one registration per authorization server')
  })

  test('a client the server forgot is registered again on the next link', async () => {
    const old = issuer.registered[0]!
    issuer.forgetClient(old)
    const client = await connect(`${server.url}/mcp`, alice.key)
    try {
      // The refresh is refused (invalid_client): the link is forgotten and asked for again.
      const url = await linkUrlFrom(client, 'files')
      assert.match(url, /\/link\/files\?ticket=/)
    } finally {
      await client.close()
    }
    const clientId = await link(alice.key, 'alice-at-files')
    assert.equal(issuer.registered.length, 2)
    assert.notEqual(clientId, old)
    assert.equal(clientId, issuer.registered[1])
    const again = await connect(`${server.url}/mcp`, alice.key)
    try {
      assert.equal((await upstreamClaims(again)).client_id, clientId)
    } finally {
      await again.close()
    }
  })
})

describe('an authorization server offering neither CIMD nor registration', () => {
  test('the link page says a clientId is needed, and nothing is sent upstream', async () => {
    const issuer = await startIssuer({ clients: [] })
    const upstream = await startRecordingUpstream()
    const carol = generateApiKey()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        files: {
          url: upstream.url,
          transport: 'streamable-http',
          credentials: { mode: 'oauth', issuer: issuer.issuer },
        },
      },
      auth: {
        apiKeys: { keys: [{ id: 'carol', hash: carol.hash, subject: 'carol' }] },
        network: { allow: ['127.0.0.1'] },
      },
    })
    const server = await startServer(parseConfigText(text).config, silentLogger)
    try {
      const client = await connect(`${server.url}/mcp`, carol.key)
      try {
        const res = await fetch(await linkUrlFrom(client, 'files'))
        assert.equal(res.status, 502)
        assert.match(
          await res.text(),
          /offers no dynamic client registration; configure credentials\.clientId/,
        )
      } finally {
        await client.close()
      }
      // No document is served for a gateway whose public URL is not https.
      const doc = await fetch(`${server.url}/oauth/client/files`)
      await doc.body?.cancel()
      assert.equal(doc.status, 404)
      assert.ok(
        !upstream.requests.some((r) => (r.body as { method?: string })?.method === 'tools/call'),
      )
    } finally {
      await server.stop()
      await upstream.close()
      await issuer.close()
    }
  })
})
