/**
 * The PostgreSQL and Redis a `--backends` run uses (BENCH_POSTGRES_URL, BENCH_REDIS_URL; default
 * the local servers): a fresh schema and key prefix, dropped when the run ends. With
 * `--audit-journal` (every script that uses this takes it) each replica on PostgreSQL journals
 * its audit records in a directory of its own (`audit.journalDir`, ADR 090) instead of
 * committing before every reply: both modes can be measured.
 */

import { spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

/** The flag, for each script's parseArgs. */
export const AUDIT_JOURNAL_OPTION = {
  'audit-journal': { type: 'boolean', default: false },
} as const

export const POSTGRES = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'

export async function benchBackends(options: { journal?: boolean } = {}): Promise<{
  config: Record<string, unknown>
  /**
   * `config` (a replica's, on PostgreSQL) with `audit.journalDir` set to a directory of the
   * replica named `replica` when the run journals; unchanged otherwise.
   */
  journalled(config: Record<string, unknown>, replica: string): Record<string, unknown>
  /** What the PostgreSQL configurations are called in reports: `pg`, or `pg (journalled)`. */
  readonly mode: string
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
  const journals = options.journal ? mkdtempSync(join(tmpdir(), 'barbican-bench-journal-')) : ''
  return {
    config: {
      store: { postgres: { url: url.toString() } },
      redis: { url: REDIS, prefix: `${schema}:` },
    },
    journalled(config, replica) {
      if (!options.journal) return config
      const audit = (config.audit ?? {}) as Record<string, unknown>
      return { ...config, audit: { ...audit, journalDir: join(journals, replica) } }
    },
    mode: options.journal ? 'pg (journalled)' : 'pg',
    // Synchronous, for process 'exit': psql drops the schema (and with it the bench's rows).
    cleanup() {
      if (journals !== '') rmSync(journals, { recursive: true, force: true })
      spawnSync('psql', [POSTGRES, '-qc', `DROP SCHEMA IF EXISTS ${schema} CASCADE`], {
        stdio: 'ignore',
      })
    },
  }
}
