import assert from 'node:assert/strict'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import type { AuthorizationServerMetadata } from '../auth/as-metadata.ts'
import { createGuardedFetch } from '../net/guarded-fetch.ts'
import { silentLogger } from '../telemetry/log.ts'
import { ClientRegistrar } from './client-registration.ts'
import { OAuthError } from './oauth-client.ts'
import { LocalKeyProvider } from './secret-box.ts'
import { memoryBackend } from './token-store.ts'

describe('which client Barbican is at an authorization server', () => {
  let server: Server
  let origin: string
  /** What the registration endpoint answers next, and the requests it got. */
  let answer: { status: number; body: Record<string, unknown> }
  const requests: Record<string, unknown>[] = []
  const fetch = createGuardedFetch({ allow: ['127.0.0.1'] })
  let base = 'https://gw.example.com'

  before(async () => {
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = []
      for await (const chunk of req) chunks.push(chunk as Buffer)
      requests.push(JSON.parse(Buffer.concat(chunks).toString()) as Record<string, unknown>)
      res.writeHead(answer.status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(answer.body))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  after(async () => {
    await fetch.close()
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  const registrar = (backend = memoryBackend()) =>
    new ClientRegistrar({
      fetch,
      keys: new LocalKeyProvider(Buffer.alloc(32, 7)),
      backend,
      baseUrl: () => base,
      redirectUri: () => `${base}/oauth/callback`,
      log: silentLogger,
    })
  const metadata = (extra: Record<string, unknown>): AuthorizationServerMetadata => ({
    issuer: 'https://as.example.com',
    ...extra,
  })

  test('a configured client id wins over CIMD and DCR', async () => {
    const client = await registrar().clientFor(
      metadata({ client_id_metadata_document_supported: true, registration_endpoint: origin }),
      { upstream: 'drive', clientId: 'mine', clientSecret: 's' },
    )
    assert.deepEqual(client, { method: 'configured', clientId: 'mine', clientSecret: 's' })
  })

  test('CIMD where supported and the public URL is https; DCR under a plain-http one', async () => {
    const both = metadata({
      client_id_metadata_document_supported: true,
      registration_endpoint: `${origin}/reg`,
    })
    const cimd = await registrar().clientFor(both, { upstream: 'drive' })
    assert.deepEqual(cimd, {
      method: 'metadata-document',
      clientId: 'https://gw.example.com/oauth/client/drive',
    })
    base = 'http://127.0.0.1:8080'
    try {
      answer = { status: 201, body: { client_id: 'dyn-1', client_secret: 'sec' } }
      const dcr = await registrar().clientFor(both, { upstream: 'drive' })
      assert.equal(dcr.method, 'dynamic')
      assert.deepEqual(requests.at(-1)?.redirect_uris, ['http://127.0.0.1:8080/oauth/callback'])
    } finally {
      base = 'https://gw.example.com'
    }
  })

  test('one registration per server, sealed; dropped when rejected or expiring', async () => {
    const backend = memoryBackend()
    const r = registrar(backend)
    const m = metadata({ registration_endpoint: `${origin}/reg` })
    answer = { status: 201, body: { client_id: 'dyn-2', client_secret: 'sec-2' } }
    const before = requests.length
    const [a, b] = await Promise.all([
      r.clientFor(m, { upstream: 'one' }),
      r.clientFor(m, { upstream: 'two' }),
    ])
    assert.equal(requests.length, before + 1, 'concurrent links share one registration')
    assert.deepEqual(a, { method: 'dynamic', clientId: 'dyn-2', clientSecret: 'sec-2' })
    assert.deepEqual(b, a)
    const slot = `client:${JSON.stringify(['https://as.example.com', `${base}/oauth/callback`])}`
    const sealed = await backend.get(slot)
    assert.ok(sealed?.startsWith('enc:v1:') && !sealed.includes('sec-2'), 'stored sealed')

    // A rejection of another client leaves the registration alone; of this one, drops it.
    await r.rejected('https://as.example.com', { method: 'dynamic', clientId: 'other' })
    assert.ok(await backend.get(slot))
    await r.rejected('https://as.example.com', a)
    assert.equal(await backend.get(slot), undefined)

    // A secret about to expire is replaced by a new registration.
    answer = {
      status: 201,
      body: { client_id: 'dyn-3', client_secret: 's3', client_secret_expires_at: 1 },
    }
    assert.equal((await r.clientFor(m, { upstream: 'one' })).clientId, 'dyn-3')
    answer = { status: 201, body: { client_id: 'dyn-4', client_secret: 's4' } }
    assert.equal((await r.clientFor(m, { upstream: 'one' })).clientId, 'dyn-4')
    assert.equal((await r.clientFor(m, { upstream: 'one' })).clientId, 'dyn-4')
  })

  test('a refused registration and a server offering nothing are precise errors', async () => {
    answer = {
      status: 400,
      body: { error: 'invalid_redirect_uri', error_description: 'not allowed' },
    }
    await assert.rejects(
      registrar().clientFor(metadata({ registration_endpoint: `${origin}/reg` }), {
        upstream: 'x',
      }),
      (err: Error) =>
        err instanceof OAuthError &&
        /registration at https:\/\/as\.example\.com failed: invalid_redirect_uri: not allowed/.test(
          err.message,
        ),
    )
    await assert.rejects(
      registrar().clientFor(metadata({}), { upstream: 'x' }),
      /offers no dynamic client registration; configure credentials\.clientId/,
    )
    base = 'http://127.0.0.1:8080'
    try {
      await assert.rejects(
        registrar().clientFor(metadata({ client_id_metadata_document_supported: true }), {
          upstream: 'x',
        }),
        /supports client metadata documents, but auth\.publicUrl is not https/,
      )
    } finally {
      base = 'https://gw.example.com'
    }
  })
})
