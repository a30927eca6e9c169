/**
 * A server with a native module (issue 29 point 1, ADR 107): mcp-sqlite, as its README configures
 * it (the database file as its argument), depends on `sqlite3`, whose install script builds
 * `node_sqlite3.node`. Barbican installs packages without running their scripts: at the first
 * start it must say which packages' scripts it skipped and the one line that allows them; once
 * the entry says `trust: { allowScripts: [sqlite3] }`, the next start builds it (outside the
 * sandbox) and the server works. The evidence is the row in the database file, read outside
 * Barbican with node:sqlite.
 *
 * Under the fallback a native addon is never loaded (the Node.js permission model refuses
 * `process.dlopen`), so that case stops at the first step.
 */
import assert from 'node:assert/strict'
import { appendFileSync, existsSync, mkdirSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { after, before, describe, test } from 'node:test'
import {
  connect,
  importConfig,
  logLines,
  MECHANISMS,
  serve,
  workspace,
  writeClaudeConfig,
} from '../support/real-servers.ts'

// Not a devDependency: Barbican installs it into its package cache from the registry.
const SPEC = 'mcp-sqlite@1.0.9'
/** The native module it loads, as `npm rebuild` leaves it. */
const BINDING = 'node_modules/sqlite3/build/Release/node_sqlite3.node'

for (const mechanism of MECHANISMS) {
  describe(`mcp-sqlite and its native sqlite3, under ${mechanism}`, () => {
    let project: ReturnType<typeof workspace>
    let db: string
    let file: string
    let slot: string

    before(async () => {
      project = workspace(`sqlite-${mechanism}`)
      mkdirSync(join(project.dir, 'data'))
      db = join(project.dir, 'data/notes.db')
      writeClaudeConfig(project.dir, { sqlite: { command: 'npx', args: ['-y', SPEC, db] } })
      file = (await importConfig(project.dir)).file
      slot = join(project.dir, '.barbican/npm', SPEC)
    })

    after(() => project.remove())

    test('its install scripts are skipped, and the failure names them and the line', async () => {
      const gateway = await serve(file, mechanism)
      try {
        const [warn] = logLines(gateway, /"msg":"install scripts not run"/)
        assert.ok(warn, gateway.log())
        const said = JSON.parse(warn) as { packages: string[]; fix: string }
        assert.ok(said.packages.includes('sqlite3'), warn)
        assert.match(said.fix, /^trust: \{ allowScripts: \[.*"sqlite3".*\] \}$/)
        const failed = logLines(gateway, /"msg":"upstream failed"/).join('\n')
        assert.match(failed, /node_sqlite3\.node/, gateway.log())
        assert.match(failed, /sqlite3@5\.\d+\.\d+ \(install: [^)]*node-gyp rebuild\) were not run/)
      } finally {
        await gateway.stop()
      }
      assert.equal(existsSync(join(slot, BINDING)), false, 'nothing was built')
    })

    if (mechanism !== 'bubblewrap') return

    test('once allowed, sqlite3 is built outside the sandbox and the server writes the database', {
      timeout: 20 * 60_000,
    }, async () => {
      appendFileSync(file, '    trust:\n      allowScripts: [sqlite3]\n')
      // The start waits for the build. Built without optimisation (gcc reads CFLAGS from the
      // environment npm inherits from Barbican): a third of the CPU time (about 26 s instead of
      // 80 s), so the file fits the integration tier's timeout; what is tested is that it runs.
      const fast = { CFLAGS: '-O0', CXXFLAGS: '-O0' }
      const gateway = await serve(file, mechanism, fast, 18 * 60_000)
      try {
        const client = await connect(gateway)
        await client.call('query', { sql: 'CREATE TABLE notes (text TEXT)' })
        await client.call('query', {
          sql: 'INSERT INTO notes VALUES (?)',
          values: ['from bubblewrap'],
        })
        await client.close()
      } finally {
        await gateway.stop()
      }
      assert.equal(existsSync(join(slot, BINDING)), true)
      const read = new DatabaseSync(db, { readOnly: true })
      try {
        assert.deepEqual(
          read
            .prepare('SELECT text FROM notes')
            .all()
            .map((r) => r.text),
          ['from bubblewrap'],
        )
      } finally {
        read.close()
      }
    })
  })
}
