/**
 * `/readyz` answers probes with a status and counts; the names and last errors of upstreams
 * (which quote what a server printed) go only to admins once inbound auth is configured.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { silentLogger } from '../../src/telemetry/log.ts'

const SECRET_PATH = '/nonexistent/upstream-with-a-revealing-name'
const admin = generateApiKey()
const user = generateApiKey()

function config(auth?: Record<string, unknown>) {
  return normalizeConfig({
    listen: '127.0.0.1:0',
    ...(auth ? { auth } : {}),
    upstreams: { hidden: { command: SECRET_PATH, args: [], sandbox: 'none' } },
  })
}

async function readyz(server: RunningServer, key?: string) {
  const res = await fetch(`${server.url}/readyz`, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
  })
  return { status: res.status, body: (await res.json()) as Record<string, unknown> }
}

describe('/readyz with inbound auth', () => {
  let server: RunningServer
  before(async () => {
    server = await startServer(
      config({
        apiKeys: {
          keys: [
            { id: 'admin', hash: admin.hash, subject: 'ops', scopes: ['barbican:admin'] },
            { id: 'user', hash: user.hash, subject: 'alice' },
          ],
        },
      }),
      silentLogger,
    )
    await server.started.catch(() => undefined)
  })
  after(async () => await server.stop())

  test('tells an anonymous probe the status and counts, and no upstream names or errors', async () => {
    const { status, body } = await readyz(server)
    assert.equal(status, 503)
    assert.deepEqual(body, { status: 'degraded', ready: 0, total: 1 })
    assert.doesNotMatch(JSON.stringify(body), /hidden|revealing/)
  })

  test('gives a caller without the admin scope no more than the probe', async () => {
    const { body } = await readyz(server, user.key)
    assert.equal(body.upstreams, undefined)
  })

  test('gives an admin every upstream with its state and last error', async () => {
    const { status, body } = await readyz(server, admin.key)
    assert.equal(status, 503)
    const upstreams = body.upstreams as { name: string; state: string; lastError?: string }[]
    assert.deepEqual(
      upstreams.map((u) => u.name),
      ['hidden'],
    )
    assert.match(JSON.stringify(upstreams), /revealing/)
  })
})

describe('/readyz without inbound auth', () => {
  let server: RunningServer
  before(async () => {
    server = await startServer(config(), silentLogger)
    await server.started.catch(() => undefined)
  })
  after(async () => await server.stop())

  test('lists every upstream, as the other operator pages do', async () => {
    const { body } = await readyz(server)
    assert.equal(body.total, 1)
    assert.equal((body.upstreams as { name: string }[])[0]?.name, 'hidden')
  })
})
