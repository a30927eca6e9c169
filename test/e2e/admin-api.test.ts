/**
 * Who may use the admin API (docs/admin.md): with inbound auth, only a credential with the
 * scope barbican:admin reads `/admin/api/status` or asks for a reload; others get 401 or 403
 * with the reason, and a reload needs a JSON content type (no cross-site form can send one).
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

describe('the admin API with inbound auth', () => {
  let server: RunningServer
  const admin = generateApiKey()
  const user = generateApiKey()

  before(async () => {
    const config = normalizeConfig({
      listen: '127.0.0.1:0',
      auth: {
        apiKeys: {
          keys: [
            { id: 'admin', hash: admin.hash, subject: 'root', scopes: ['barbican:admin'] },
            { id: 'user', hash: user.hash, subject: 'ada' },
          ],
        },
      },
      upstreams: { broken: { command: '/nonexistent/server', args: [] } },
    })
    server = await startServer(config, silentLogger)
    await server.started
  })
  after(() => server.stop())

  const status = (headers: Record<string, string> = {}) =>
    fetch(`${server.url}/admin/api/status`, { headers })

  test('refuses a caller without credentials (401) and one without the admin scope (403)', async () => {
    const anonymous = await status()
    assert.equal(anonymous.status, 401)
    const plain = await status({ authorization: `Bearer ${user.key}` })
    assert.equal(plain.status, 403)
    assert.match(await plain.text(), /needs the scope barbican:admin/)
    assert.match(plain.headers.get('www-authenticate') ?? '', /insufficient_scope/)
  })

  test('gives an admin the overview, the broken upstream with its error', async () => {
    const res = await status({ authorization: `Bearer ${admin.key}` })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('cache-control'), 'no-store')
    const body = (await res.json()) as {
      upstreams: { name: string; state: string; transport: string; lastError?: string }[]
      servers: { name: string; path: string; upstreams: string[] }[]
    }
    const [broken] = body.upstreams
    assert.equal(broken?.name, 'broken')
    assert.equal(broken?.state, 'failed')
    assert.equal(broken?.transport, 'stdio')
    assert.match(broken?.lastError ?? '', /nonexistent/)
    assert.deepEqual(
      body.servers.map((s) => [s.name, s.path, s.upstreams]),
      [['default', '/mcp', ['broken']]],
    )
  })

  test('a reload needs POST, JSON and the admin scope; without a file it says so', async () => {
    const reload = (method: string, headers: Record<string, string>) =>
      fetch(`${server.url}/admin/api/reload`, {
        method,
        headers,
        ...(method === 'GET' ? {} : { body: '{}' }),
      })
    assert.equal((await reload('GET', { authorization: `Bearer ${admin.key}` })).status, 405)
    const form = await reload('POST', {
      authorization: `Bearer ${admin.key}`,
      'content-type': 'application/x-www-form-urlencoded',
    })
    assert.equal(form.status, 415)
    const json = { 'content-type': 'application/json' }
    assert.equal(
      (await reload('POST', { ...json, authorization: `Bearer ${user.key}` })).status,
      403,
    )
    const res = await reload('POST', { ...json, authorization: `Bearer ${admin.key}` })
    assert.equal(res.status, 422)
    assert.match(await res.text(), /no config file to reload/)
  })
})
