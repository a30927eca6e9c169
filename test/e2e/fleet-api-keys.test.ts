/**
 * API keys in PostgreSQL across a fleet (ADR 055): two in-process replicas follow the keys
 * table and share the bus on the real Redis; a key created with `barbican keys create`, or in
 * replica A's admin console, is accepted on replica B, and after its revocation (CLI or
 * console) B answers 401 within a second.
 */
import assert from 'node:assert/strict'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, test } from 'node:test'
import { joinFleet, serveInFleet } from '../../src/app/fleet.ts'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import type { Cluster } from '../../src/cluster/cluster.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { followPostgresKeys } from '../../src/gateway/shared-api-keys.ts'
import { openPostgresPool } from '../../src/store/postgres.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { runCli as run } from '../support/cli.ts'

const root = mkdtempSync(join(tmpdir(), 'barbican-fleet-keys-'))
// The CLI writes an admin record in the fleet's audit log: with the fleet's key (ADR 117).
process.env.BARBICAN_AUDIT_KEY = FLEET_AUDIT_KEY
const closers: (() => Promise<unknown>)[] = []
after(async () => {
  for (const close of closers.reverse()) await close().catch(() => {})
  await dropPostgresSchemas()
  rmSync(root, { recursive: true, force: true })
})

const initialize = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 't', version: '1' },
  },
}

/**
 * Two in-process replicas of `config` in one fleet, each following the keys table at `url`.
 * `consoleKeys`: the admin console creates and revokes keys in PostgreSQL, not the keys file.
 */
async function startTwoReplicas(
  config: ReturnType<typeof normalizeConfig>,
  url: string,
  { consoleKeys }: { consoleKeys: boolean },
): Promise<[RunningServer, RunningServer]> {
  const servers: RunningServer[] = []
  for (let i = 0; i < 2; i++) {
    const cluster: Cluster = (await joinFleet(config.redis, {}, silentLogger))!
    closers.push(() => cluster.leave())
    const server = await startServer(config, silentLogger)
    closers.push(() => server.stop())
    const keys = await followPostgresKeys(url, server.auth!.apiKeys!, silentLogger)
    closers.push(() => keys.close())
    if (consoleKeys) server.useSharedKeys(keys.follower)
    await serveInFleet(cluster, server, {}, keys.follower)
    servers.push(server)
  }
  return servers as [RunningServer, RunningServer]
}

/**
 * Asks `replica` to initialize with `key` until `want` holds of the HTTP status or a second has
 * passed: the last status and how long it took.
 */
function statusWithinOneSecond(replica: RunningServer) {
  const status = async (key: string) =>
    (
      await fetch(`${replica.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${key}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify(initialize),
      })
    ).status
  return async (want: (s: number) => boolean, key: string) => {
    const started = Date.now()
    let s = await status(key)
    while (!want(s) && Date.now() - started < 1000) s = await status(key)
    return { s, ms: Date.now() - started }
  }
}

test('a key revoked with the CLI is refused on replica B within 1 s', async () => {
  const url = await freshPostgresUrl()
  // The schema exists before the replicas follow it (serve migrates when it opens the store).
  await (await openPostgresPool(url)).end()
  const redis = { url: REDIS_URL, prefix: freshRedisPrefix() }
  const raw = {
    listen: '127.0.0.1:0',
    store: { postgres: { url } },
    redis,
    auth: { apiKeys: { keys: [] } },
    upstreams: { idle: { command: 'true', lazy: true } },
  }
  const file = join(root, 'barbican.json')
  writeFileSync(file, JSON.stringify(raw))
  const config = normalizeConfig(raw)
  const [, b] = await startTwoReplicas(config, url, { consoleKeys: false })
  const within = statusWithinOneSecond(b)

  const created = await run(['keys', 'create', 'ci', '--config', file])
  assert.equal(created.code, 0, created.stderr)
  const key = created.stdout.trim()
  const accepted = await within((s) => s === 200, key)
  assert.equal(accepted.s, 200, 'the new key is accepted on B')

  const revoked = await run(['keys', 'revoke', 'ci', '--config', file])
  assert.equal(revoked.code, 0, revoked.stderr)
  const refused = await within((s) => s === 401, key)
  assert.equal(refused.s, 401, `B still accepted the key ${refused.ms} ms after the revocation`)
  assert.ok(refused.ms < 1000)
})

test('keys created and revoked in the console live in PostgreSQL and hold on replica B', async () => {
  const url = await freshPostgresUrl()
  await (await openPostgresPool(url)).end()
  const admin = generateApiKey()
  const keysFile = join(root, 'console-keys.json')
  const config = normalizeConfig({
    listen: '127.0.0.1:0',
    store: { postgres: { url } },
    redis: { url: REDIS_URL, prefix: freshRedisPrefix() },
    auth: {
      apiKeys: {
        file: keysFile,
        keys: [{ id: 'root', hash: admin.hash, subject: 'root', scopes: ['barbican:admin'] }],
      },
    },
    upstreams: { idle: { command: 'true', lazy: true } },
  })
  const [a, b] = await startTwoReplicas(config, url, { consoleKeys: true })
  const asAdmin = { authorization: `Bearer ${admin.key}` }
  const page = await (await fetch(`${a.url}/admin/keys`, { headers: asAdmin })).text()
  const csrf = /name="csrf" value="([^"]+)"/.exec(page)?.[1] ?? ''
  assert.ok(csrf)
  const change = (path: string, form: Record<string, string>) =>
    fetch(`${a.url}${path}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { ...asAdmin, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, ...form }).toString(),
    })
  const within = statusWithinOneSecond(b)
  const table = async () => {
    const pool = await openPostgresPool(url, { migrate: false })
    try {
      return (await pool.query('SELECT id, subject FROM barbican_api_keys ORDER BY id')).rows
    } finally {
      await pool.end()
    }
  }

  const created = await change('/admin/keys/create', { id: 'ci', subject: 'robot' })
  assert.equal(created.status, 200)
  const html = await created.text()
  const key = /class="secret" readonly value="([^"]+)"/.exec(html)?.[1] ?? ''
  assert.match(key, /^bk_/)
  assert.match(html, /PostgreSQL \(every replica\)/)
  assert.deepEqual(await table(), [{ id: 'ci', subject: 'robot' }])
  assert.ok(!existsSync(keysFile), 'not written to the per-replica keys file')
  const accepted = await within((s) => s === 200, key)
  assert.equal(accepted.s, 200, 'the key made in A’s console is accepted on B')
  const duplicate = await change('/admin/keys/create', { id: 'ci' })
  assert.notEqual(duplicate.status, 200)
  await duplicate.body?.cancel()

  const revoked = await change('/admin/keys/revoke', { id: 'ci' })
  assert.equal(revoked.status, 303, await revoked.text())
  assert.deepEqual(await table(), [])
  const refused = await within((s) => s === 401, key)
  assert.equal(refused.s, 401, `B still accepted the key ${refused.ms} ms after the revocation`)
  assert.ok(refused.ms < 1000)
  const configured = await change('/admin/keys/revoke', { id: 'root' })
  assert.notEqual(configured.status, 303, 'a key of the configuration is not revoked here')
  await configured.body?.cancel()
})
