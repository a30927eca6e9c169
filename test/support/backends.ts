/**
 * The real PostgreSQL and Redis of this machine (or BARBICAN_TEST_POSTGRES_URL /
 * BARBICAN_TEST_REDIS_URL), with a private namespace per test run so that parallel runs and
 * engineers never see each other's data: a fresh schema per PostgreSQL store, a random key
 * prefix per Redis store. `dropAll` removes what this process created.
 */
import { randomBytes } from 'node:crypto'
import { pg } from '../../src/common/lazy-deps.ts'

export const POSTGRES_URL =
  process.env.BARBICAN_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
export const REDIS_URL = process.env.BARBICAN_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
/**
 * The audit key every replica of a test fleet shares (BARBICAN_AUDIT_KEY, ADR 117): a fleet on
 * PostgreSQL refuses to start without one.
 */
export const FLEET_AUDIT_KEY = 'f1ee7'.padEnd(64, '0')

const schemas: string[] = []

/** A URL whose connections use a new, empty schema (search_path), created now. */
export async function freshPostgresUrl(): Promise<string> {
  const schema = `barbican_t_${randomBytes(6).toString('hex')}`
  const client = new (pg().Client)({ connectionString: POSTGRES_URL })
  await client.connect()
  try {
    await client.query(`CREATE SCHEMA ${schema}`)
  } finally {
    await client.end()
  }
  schemas.push(schema)
  const url = new URL(POSTGRES_URL)
  url.searchParams.set('options', `-c search_path=${schema}`)
  return url.toString()
}

/** Drops every schema `freshPostgresUrl` made in this process. */
export async function dropPostgresSchemas(): Promise<void> {
  if (schemas.length === 0) return
  const client = new (pg().Client)({ connectionString: POSTGRES_URL })
  await client.connect()
  try {
    for (const schema of schemas.splice(0)) await client.query(`DROP SCHEMA ${schema} CASCADE`)
  } finally {
    await client.end()
  }
}

/** A Redis key prefix no other run uses. */
export function freshRedisPrefix(): string {
  return `barbican-test:${randomBytes(6).toString('hex')}:`
}
