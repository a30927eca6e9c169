/**
 * The PostgreSQL and Redis a `--backends` run uses (BENCH_POSTGRES_URL, BENCH_REDIS_URL; default
 * the local servers): a fresh schema and key prefix, dropped when the run ends.
 */

import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'

export const POSTGRES = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

export async function benchBackends(): Promise<{
  config: Record<string, unknown>
  cleanup(): void
}> {
  const { default: pg } = await import('pg')
  const schema = `barbican_bench_${randomBytes(5).toString('hex')}`
  const client = new pg.Client({ connectionString: POSTGRES })
  await client.connect()
  await client.query(`CREATE SCHEMA ${schema}`)
  await client.end()
  const url = new URL(POSTGRES)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return {
    config: {
      store: { postgres: { url: url.toString() } },
      redis: { url: REDIS, prefix: `${schema}:` },
    },
    // Synchronous, for process 'exit': psql drops the schema (and with it the bench's rows).
    cleanup() {
      spawnSync('psql', [POSTGRES, '-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], {
        stdio: 'ignore',
      })
    },
  }
}
