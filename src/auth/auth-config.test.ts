import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '../config/load.ts'
import { normalizeConfig } from '../config/normalize.ts'

const secured = fileURLToPath(new URL('../../examples/secured/', import.meta.url))

describe('auth configuration', () => {
  test('the secured example loads with its auth section and upstream credentials', async () => {
    const loaded = await loadConfig({
      cwd: secured,
      env: {
        PUBLIC_URL: 'https://mcp.example.com',
        IDP_ISSUER: 'https://idp.example.com',
        GITHUB_TOKEN: 't',
        DRIVE_CLIENT_SECRET: 's',
      },
    })
    assert.ok(loaded)
    const { auth, upstreams } = loaded.config
    assert.equal(auth?.jwt?.issuer, 'https://idp.example.com')
    assert.deepEqual(auth?.jwt?.algorithms, ['RS256', 'ES256'])
    assert.deepEqual(auth?.serverScopes, { admin: ['mcp:admin'] })
    assert.equal(auth?.assertion.ttlSeconds, 60)
    assert.deepEqual(
      upstreams.map((u) => [u.name, u.credentials?.mode]),
      [
        ['github', 'static'],
        ['drive', 'oauth'],
      ],
    )
  })

  test('refuses HMAC and none as JWT algorithms, and unknown credential modes', () => {
    const base = { upstreams: { a: { url: 'https://a.example/mcp' } } }
    assert.throws(
      () =>
        normalizeConfig({ ...base, auth: { jwt: { issuer: 'https://i', algorithms: ['HS256'] } } }),
      { code: 'ERR_CONFIG_INVALID' },
    )
    assert.throws(
      () =>
        normalizeConfig({ ...base, auth: { jwt: { issuer: 'https://i', algorithms: ['none'] } } }),
      { code: 'ERR_CONFIG_INVALID' },
    )
    assert.throws(
      () =>
        normalizeConfig({
          upstreams: { a: { url: 'https://a.example/mcp', credentials: { mode: 'passthrough' } } },
        }),
      { code: 'ERR_CONFIG_INVALID' },
    )
  })
})
