/**
 * API keys in PostgreSQL (ADR 055): with `store: { postgres: … }` the keys `barbican keys` and
 * the console create live in one table every replica reads, instead of a keys file per machine.
 * Only hashes are stored. Every write bumps the `api_keys` counter in the same transaction, so a
 * replica notices any change by reading one number (src/gateway/shared-api-keys.ts).
 */
import type { Pool } from 'pg'
import { inTransaction } from './postgres-schema.ts'

/** One key as the table holds it (the shape of auth's ApiKeyEntry, plus its creation time). */
export interface StoredApiKey {
  readonly id: string
  readonly hash: string
  readonly subject: string
  readonly tenant?: string | undefined
  readonly scopes: readonly string[]
  readonly createdAt: string
}

export class PostgresApiKeys {
  readonly #pool: Pool

  constructor(pool: Pool) {
    this.#pool = pool
  }

  async list(): Promise<StoredApiKey[]> {
    const result = await this.#pool.query('SELECT * FROM barbican_api_keys ORDER BY id')
    return (result.rows as Record<string, unknown>[]).map((row) => ({
      id: String(row.id),
      hash: String(row.hash),
      subject: String(row.subject),
      tenant: row.tenant === null ? undefined : String(row.tenant),
      scopes: JSON.parse(String(row.scopes)) as string[],
      createdAt: String(row.created_at),
    }))
  }

  /** Adds a key; false when one with that id exists already (nothing written). */
  async create(key: StoredApiKey): Promise<boolean> {
    return await this.#write(
      `INSERT INTO barbican_api_keys (id, hash, subject, tenant, scopes, created_at)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
      [
        key.id,
        key.hash,
        key.subject,
        key.tenant ?? null,
        JSON.stringify(key.scopes),
        key.createdAt,
      ],
    )
  }

  /** Removes a key; false when there was none. */
  async revoke(id: string): Promise<boolean> {
    return await this.#write('DELETE FROM barbican_api_keys WHERE id = $1', [id])
  }

  /** Moves whenever any process changes a key. */
  async revision(): Promise<number> {
    const result = await this.#pool.query(
      "SELECT value FROM barbican_counters WHERE name = 'api_keys'",
    )
    return Number(result.rows[0]?.value ?? 0)
  }

  async #write(sql: string, values: unknown[]): Promise<boolean> {
    return await inTransaction(this.#pool, async (client) => {
      const result = await client.query(sql, values)
      if ((result.rowCount ?? 0) === 0) return false
      await client.query("UPDATE barbican_counters SET value = value + 1 WHERE name = 'api_keys'")
      return true
    })
  }
}
