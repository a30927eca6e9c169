/**
 * A policy change made through one replica holds on the others within a second (issue 19): two
 * `barbican serve` replicas share Redis and read the same Cedar file; the file changes and
 * `POST /admin/api/reload` goes to replica A only. The bus tells B to reload its own copy, and
 * B's open legacy session is refused the forbidden tool at its next call.
 */
import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { freshRedisPrefix, REDIS_URL } from '../support/backends.ts'
import { freePort, type ServeReplica, startServeReplica } from '../support/fleet.ts'

const root = join(import.meta.dirname, '../..')
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const run = promisify(execFile)

const PERMIT = 'permit (principal, action, resource);\n'
const FORBID_SUM =
  'forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"get-sum");\n'

describe('a policy reload asked of one replica holds on every replica', {
  timeout: 300_000,
}, () => {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-fleet-reload-')))
  // Outside both replicas' folders: only the 2 s poll would notice it, not a folder watch.
  const policies = join(dir, 'policies', 'team.cedar')
  const prefix = freshRedisPrefix()
  const replicas: ServeReplica[] = []
  let onB: Client

  const yaml = (name: string) => [
    'upstreams:',
    '  everything:',
    `    command: ${process.execPath}`,
    `    args: ["${everything}"]`,
    '    sandbox: none',
    'redis:',
    '  url: redis://set-by-the-environment.invalid',
    `  prefix: "${prefix}"`,
    'store:',
    `  sqlite: { path: ${join(dir, `${name}.db`)} }`,
    'cedar:',
    `  policies: [${policies}]`,
    '',
  ]

  before(async () => {
    mkdirSync(join(dir, 'policies'))
    writeFileSync(policies, PERMIT)
    for (const name of ['a', 'b']) {
      replicas.push(
        await startServeReplica({
          home: join(dir, name),
          port: await freePort(),
          env: { BARBICAN_REDIS_URL: REDIS_URL },
          startMs: 90_000,
          yaml: yaml(name),
        }),
      )
    }
    onB = new Client({ name: 'fleet-reload', version: '1.0.0' })
    await onB.connect(new StreamableHTTPClientTransport(new URL(`${replicas[1]!.url}/mcp`)))
  })
  after(async () => {
    await onB?.close().catch(() => {})
    for (const r of replicas) r.child.kill('SIGTERM')
    rmSync(dir, { recursive: true, force: true })
  })

  const sum = () => onB.callTool({ name: 'get-sum', arguments: { a: 1, b: 2 } })

  test('B refuses the forbidden tool within a second of A applying it', async () => {
    assert.ok(!(await sum()).isError)
    writeFileSync(policies, `${PERMIT}${FORBID_SUM}`)
    const res = await fetch(`${replicas[0]!.url}/admin/api/reload`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{}',
    })
    assert.equal(res.status, 200)
    const applied = Date.now()
    const outcome = (await res.json()) as { diff: { policies: string[] } }
    assert.deepEqual(outcome.diff.policies, ['cedar (policy files)'])
    let refused: { code?: number } | undefined
    while (refused === undefined) {
      try {
        await sum()
      } catch (err) {
        refused = err as { code?: number }
      }
      assert.ok(Date.now() - applied <= 1000, 'B still served get-sum a second later')
    }
    assert.equal(refused.code, -32001)
  })

  test("B's reload came over the bus: its audit log records one with the trigger fleet", async () => {
    const b = replicas[1]!
    const deadline = Date.now() + 10_000
    for (;;) {
      const { stdout } = await run(process.execPath, [bin, 'audit', 'query', '--config', b.config])
      const reloads = stdout
        .trim()
        .split('\n')
        .filter((l) => l !== '')
        .map((l) => JSON.parse(l) as { action?: string; actor?: string; outcome?: string })
        .filter((r) => r.action === 'config.reload')
      if (reloads.some((r) => r.actor === 'fleet' && r.outcome === 'ok')) return
      assert.ok(Date.now() < deadline, JSON.stringify(reloads))
      await new Promise((r) => setTimeout(r, 200))
    }
  })
})
