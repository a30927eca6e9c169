/**
 * Linked upstream tokens in PostgreSQL belong to the whole fleet: a replica started without
 * BARBICAN_SECRET_KEY would seal with a key of its own and drop every other replica's tokens as
 * unreadable, so it refuses to start (security.md, "Secrets in the configuration").
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

test('a replica with linked tokens in PostgreSQL and no BARBICAN_SECRET_KEY refuses to start', async () => {
  delete process.env.BARBICAN_SECRET_KEY
  const config = parseConfigText(
    JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        files: {
          url: 'http://127.0.0.1:9/mcp',
          transport: 'streamable-http',
          credentials: {
            mode: 'oauth',
            issuer: 'http://127.0.0.1:9',
            clientId: 'barbican',
            clientSecret: 'barbican-secret',
          },
        },
      },
      auth: {
        apiKeys: { keys: [] },
        tokens: { postgres: 'postgres://postgres@127.0.0.1:5432/test' },
      },
    }),
  ).config
  await assert.rejects(startServer(config, silentLogger), (err: Error & { code?: string }) => {
    assert.equal(err.code, 'ERR_CONFIG_INVALID')
    assert.match(err.message, /auth\.tokens\.postgres: BARBICAN_SECRET_KEY is not set/)
    return true
  })
})
