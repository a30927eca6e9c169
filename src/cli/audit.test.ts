import assert from 'node:assert/strict'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { runCli as run } from '../../test/support/cli.ts'
import { demoDataDir } from '../config/demo-paths.ts'
import { auditBesideStore, openAuditStore } from '../gateway/audit-setup.ts'

const dir = mkdtempSync(join(tmpdir(), 'barbican-audit-cli-'))
after(() => rmSync(dir, { recursive: true, force: true }))

function config(extra: Record<string, unknown> = {}): string {
  const file = join(dir, `c${Math.random().toString(36).slice(2)}.json`)
  writeFileSync(
    file,
    JSON.stringify({ upstreams: { x: { command: process.execPath, args: ['-v'] } }, ...extra }),
  )
  return file
}

describe('barbican audit', () => {
  test('needs an action, and refuses a bad limit or time with a usage error', async () => {
    const file = config()
    assert.equal((await run(['audit', '--config', file])).code, 2)
    const limit = await run(['audit', 'tail', '--limit', 'many', '--config', file])
    assert.deepEqual(
      [limit.code, limit.stderr],
      [2, 'barbican: --limit must be a positive integer, not "many"\n'],
    )
    const since = await run(['audit', 'query', '--since', 'yesterday', '--config', file])
    assert.equal(since.code, 2)
    assert.match(since.stderr, /--since must be an ISO 8601 time/)
  })

  test('says where it looked when there is no log yet, and creates nothing', async () => {
    const file = config({ audit: { path: join(dir, 'none', 'audit.db') } })
    const r = await run(['audit', 'verify', '--config', file])
    assert.equal(r.code, 1)
    assert.match(r.stderr, /no audit log at .*none\/audit\.db/)
  })

  test('a memory store keeps the log in memory: nothing to read', async () => {
    const r = await run(['audit', 'verify', '--config', config({ store: { memory: {} } })])
    assert.equal(r.code, 1)
    assert.match(r.stderr, /in memory/)
  })

  test("without a config file, verify and tail read the embedded demo's log and say so", async () => {
    // An empty working directory, and a temp directory of the test's own for the demo's folder.
    const here = mkdtempSync(join(dir, 'cwd-'))
    const before = { cwd: process.cwd(), tmp: process.env.TMPDIR }
    process.env.TMPDIR = mkdtempSync(join(dir, 'tmp-'))
    process.chdir(here)
    try {
      const missing = await run(['audit', 'verify'])
      assert.equal(missing.code, 1)
      assert.match(missing.stderr, /reading the embedded demo's audit log/)
      assert.ok(missing.stderr.includes(join(demoDataDir(), 'audit.db')), missing.stderr)
      const { store } = await openAuditStore(
        auditBesideStore(join(demoDataDir(), 'barbican.db')),
        true,
      )
      await store.close()
      const verify = await run(['audit', 'verify'])
      assert.equal(verify.code, 0, verify.stderr)
      assert.match(verify.stdout, /^ok {4}no records/)
      const tail = await run(['audit', 'tail'])
      assert.deepEqual([tail.code, tail.stdout], [0, ''])
      assert.match(tail.stderr, /embedded demo/)
    } finally {
      process.chdir(before.cwd)
      if (before.tmp === undefined) delete process.env.TMPDIR
      else process.env.TMPDIR = before.tmp
    }
  })
})
