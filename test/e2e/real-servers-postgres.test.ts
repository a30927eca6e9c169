/**
 * server-postgres as its README configures it (issue 29 point 7): the database URL is its one
 * argument, and it must reach the local PostgreSQL it names, confined, with no sandbox settings.
 * It runs read-only queries, so the evidence is a row this test inserted with `pg`, outside
 * Barbican, coming back through it.
 */
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { after, before, describe, test } from 'node:test'
import pg from 'pg'
import {
  connect,
  importConfig,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = '@modelcontextprotocol/server-postgres@0.6.2'
const URL = 'postgresql://postgres@127.0.0.1/test'

for (const mechanism of MECHANISMS) {
  describe(`server-postgres as its README says, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let file: string
    const table = `real_servers_${randomBytes(4).toString('hex')}`
    const marker = `row-${randomBytes(6).toString('hex')}`
    const db = new pg.Client({ connectionString: URL })

    before(async () => {
      await db.connect()
      await db.query(`CREATE TABLE ${table} (id serial PRIMARY KEY, note text)`)
      await db.query(`INSERT INTO ${table} (note) VALUES ($1)`, [marker])
      // Readable by whichever role the server connects as (it names none: its OS user's).
      await db.query(`GRANT SELECT ON ${table} TO PUBLIC`)
      project = workspace(`postgres-${mechanism}`)
      writeClaudeConfig(project.dir, { postgres: { command: 'npx', args: ['-y', SPEC, URL] } })
      file = (await importConfig(project.dir)).file
    })

    after(async () => {
      await db.query(`DROP TABLE IF EXISTS ${table}`)
      await db.end()
      project.remove()
    })

    test('queries the database its URL names and returns the row the test inserted', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const client = await connect(gateway)
        const rows = await client.call('query', { sql: `SELECT note FROM ${table}` })
        await client.close()
        assert.match(rows, new RegExp(marker), gateway.log())
      } finally {
        await gateway.stop()
      }
    })
  })
}
