import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../../test/support/backends.ts'
import { runCli as run } from '../../test/support/cli.ts'
import { API_KEYS_CHANGED } from '../app/fleet.ts'
import { ApiKeyStore } from '../auth/api-keys.ts'
import { Cluster } from '../cluster/cluster.ts'
import { SharedApiKeys } from '../gateway/shared-api-keys.ts'
import { openPostgresPool } from '../store/postgres.ts'
import { PostgresApiKeys } from '../store/postgres-api-keys.ts'
import { silentLogger } from '../telemetry/log.ts'

const root = mkdtempSync(join(tmpdir(), 'barbican-pgkeys-'))
// The CLI writes an admin record in the fleet's audit log: with the fleet's key (ADR 117).
process.env.BARBICAN_AUDIT_KEY = FLEET_AUDIT_KEY
const closers: (() => Promise<unknown> | unknown)[] = []
after(async () => {
  for (const close of closers.reverse()) await close()
  await dropPostgresSchemas()
  rmSync(root, { recursive: true, force: true })
})

describe('barbican keys with PostgreSQL and Redis', () => {
  test('a key revoked with the CLI is refused by a replica within 1 s (bus, not the poll)', async () => {
    const url = await freshPostgresUrl()
    const prefix = freshRedisPrefix()
    const file = join(root, 'barbican.json')
    writeFileSync(
      file,
      JSON.stringify({
        listen: '127.0.0.1:0',
        store: { postgres: { url } },
        redis: { url: REDIS_URL, prefix },
        auth: { apiKeys: { keys: [] } },
        upstreams: { memory: { command: 'true', lazy: true } },
      }),
    )
    const created = await run(['keys', 'create', 'ci', '--config', file])
    assert.equal(created.code, 0, created.stderr)
    const key = created.stdout.trim()
    assert.match(key, /^bk_/)
    const listed = await run(['keys', 'list', '--config', file])
    assert.match(listed.stdout, /^ci {2}subject ci /m)

    // A replica: its keys follow the table, polled only once a minute here, so that only the
    // fleet's bus can make the revocation hold within a second.
    const pool = await openPostgresPool(url, { migrate: false, maxConnections: 2 })
    closers.push(() => pool.end())
    const keys = new ApiKeyStore([])
    const follower = new SharedApiKeys(keys, new PostgresApiKeys(pool), silentLogger)
    closers.push(() => follower.stop())
    await follower.start(60_000)
    const cluster = await Cluster.join({ redisUrl: REDIS_URL, prefix, log: silentLogger })
    closers.push(() => cluster.leave())
    cluster.on(API_KEYS_CHANGED, () => void follower.refresh())
    assert.equal(keys.verify(key)?.subject, 'ci')

    const revoked = await run(['keys', 'revoke', 'ci', '--config', file])
    assert.equal(revoked.code, 0, revoked.stderr)
    const started = Date.now()
    while (keys.verify(key) !== undefined && Date.now() - started < 1000)
      await new Promise((r) => setTimeout(r, 10))
    assert.equal(keys.verify(key), undefined, 'still accepted 1 s after the revocation')
    const again = await run(['keys', 'revoke', 'ci', '--config', file])
    assert.equal(again.code, 1)
    assert.match(again.stderr, /no key "ci" in PostgreSQL/)
  })
})
