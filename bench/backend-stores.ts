/**
 * `node bench/backend-stores.ts`: the fleet backends' per-call work alone, in-process: audit
 * records through `AuditLog` to SQLite and to PostgreSQL, and quota takes to Redis, each call
 * taken there (ADR 080) or from leases (ADR 085: one hot key, after 300 ms of takes that measure
 * its rate), at c=1 and c=16, as CPU and wall µs per operation (bench/NOTEBOOK.md, PostgreSQL and Redis). Uses the
 * local servers (BARBICAN_TEST_POSTGRES_URL, BARBICAN_TEST_REDIS_URL), a fresh schema and prefix.
 */
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { ephemeralAuditKey } from '../src/audit/audit-key.ts'
import { AuditLog } from '../src/audit/audit-log.ts'
import { postgresAuditStore } from '../src/audit/postgres.ts'
import { openSqliteAuditStore } from '../src/audit/sqlite.ts'
import { LeasingRateCounterStore } from '../src/policies/rate-leases.ts'
import { RedisRateCounterStore } from '../src/policies/redis-rate-counter-store.ts'
import { openPostgresPool } from '../src/store/postgres.ts'
import { openRedis } from '../src/store/redis.ts'
import { call } from '../test/contracts/audit.ts'
import {
  dropPostgresSchemas,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../test/support/backends.ts'

const cpu = () => {
  const u = process.cpuUsage()
  return u.user + u.system
}

async function measure(
  label: string,
  n: number,
  conc: number,
  op: (i: number) => Promise<unknown>,
) {
  // Warm-up (JIT, pool connections), not counted.
  for (let i = 0; i < 200 / conc; i++) {
    await Promise.all(Array.from({ length: conc }, (_, j) => op(n + i * conc + j)))
  }
  const c0 = cpu()
  const t0 = performance.now()
  for (let i = 0; i < n / conc; i++) {
    await Promise.all(Array.from({ length: conc }, (_, j) => op(i * conc + j)))
  }
  const cpuUs = (cpu() - c0) / n
  const wallUs = ((performance.now() - t0) * 1000) / n
  console.log(`${label} c=${conc}: ${cpuUs.toFixed(0)} µs CPU, ${wallUs.toFixed(0)} µs wall per op`)
}

const dir = mkdtempSync(join(tmpdir(), 'barbican-backend-stores-'))
const pool = await openPostgresPool(await freshPostgresUrl())
const redis = await openRedis(REDIS_URL)
try {
  const stores = {
    'audit sqlite': await openSqliteAuditStore(join(dir, 'audit.db')),
    'audit postgres': postgresAuditStore(pool, false),
  }
  for (const [label, store] of Object.entries(stores)) {
    const log = new AuditLog({ store, key: ephemeralAuditKey() })
    for (const conc of [1, 16])
      await measure(label, 1600, conc, (i) => log.record(call('s', `t${i}`)))
    await log.close()
  }
  const quota = new RedisRateCounterStore(redis, freshRedisPrefix())
  const rule = { algorithm: 'token-bucket', limit: 1e9, windowMs: 60_000 } as const
  for (const conc of [1, 16]) {
    await measure('quota redis', 3200, conc, () => quota.takeAll([{ key: 'k', rule }], Date.now()))
  }
  const leasing = new LeasingRateCounterStore(new RedisRateCounterStore(redis, freshRedisPrefix()))
  for (const conc of [1, 16]) {
    for (const end = Date.now() + 300; Date.now() < end; )
      await leasing.takeAll([{ key: 'k', rule }], Date.now())
    await measure('quota redis+leases', 3200, conc, () =>
      leasing.takeAll([{ key: 'k', rule }], Date.now()),
    )
  }
  leasing.close()
} finally {
  redis.destroy()
  await pool.end()
  await dropPostgresSchemas()
  rmSync(dir, { recursive: true, force: true })
}
