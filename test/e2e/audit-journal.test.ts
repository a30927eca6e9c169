/**
 * A PostgreSQL replica that journals its audit records (ADR 090): a `barbican serve` on
 * PostgreSQL and Redis with its own `audit.journalDir`, killed with SIGKILL under load and
 * restarted on the same directory. Every successful reply then has exactly one record in the
 * chain in PostgreSQL and `barbican audit verify` passes; a second gateway given the directory
 * of a running one refuses to start.
 */
import assert from 'node:assert/strict'
import { execFile, spawn } from 'node:child_process'
import {
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { promisify } from 'node:util'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { freePort, startServeReplica } from '../support/fleet.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

const root = join(import.meta.dirname, '../..')
const bin = join(root, 'bin/barbican.js')
const fixture = join(root, 'test/fixtures/fleet-upstream.ts')
const run = promisify(execFile)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

after(dropPostgresSchemas)

describe('a journalled PostgreSQL replica killed under load', { timeout: 300_000 }, () => {
  test('loses no record of a successful reply, and its directory is its own', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-audit-journal-')))
    const home = join(dir, 'replica')
    const journalDir = join(home, 'journal')
    const execLog = join(dir, 'executions.log')
    const description = join(dir, 'guarded.txt')
    writeFileSync(execLog, '')
    writeFileSync(description, 'Guarded.')
    const env = {
      BARBICAN_POSTGRES_URL: await freshPostgresUrl(),
      BARBICAN_REDIS_URL: REDIS_URL,
      BARBICAN_AUDIT_KEY: FLEET_AUDIT_KEY,
    }
    const yaml = [
      'upstreams:',
      '  fleet:',
      `    command: ${process.execPath}`,
      `    args: ["${fixture}", "${execLog}", "${description}"]`,
      '    sandbox: none',
      'redis:',
      '  url: redis://set-by-the-environment.invalid',
      `  prefix: "${freshRedisPrefix()}"`,
      'audit:',
      '  rawArguments: true',
      '  journalDir: journal',
      // Long: what the kill leaves is mostly in the journal, so the replay is what is tested.
      '  batchWindowMs: 10000',
      '',
    ]
    const port = await freePort()
    const first = await startServeReplica({ home, yaml, port, env, startMs: 90_000 })
    const url = first.url

    let stop = false
    const succeeded: string[] = []
    let failed = 0
    let next = 0
    const load = Array.from({ length: 8 }, async (_, n) => {
      while (!stop) {
        const id = `c${n}-${next++}`
        try {
          const reply = await postStatelessToolCall(`${url}/mcp`, {
            name: 'work',
            arguments: { id, ms: 2 },
          })
          const result = reply.final?.result as { content?: { text: string }[] } | undefined
          if (reply.status === 200 && result?.content?.[0]?.text === id) succeeded.push(id)
          else failed++
        } catch {
          failed++
          await sleep(20)
        }
      }
    })
    await sleep(2500)
    first.child.kill('SIGKILL')
    await new Promise((resolve) => first.child.once('exit', resolve))
    stop = true
    await Promise.all(load)
    assert.ok(succeeded.length > 50, `enough load: ${succeeded.length} replies`)

    // The kill left journalled records and the dead gateway's lock in the directory.
    const journals = readdirSync(journalDir).filter((f) => /^audit-batch\.\d+$/.test(f))
    assert.ok(journals.length > 0, 'a journal is left behind')
    assert.ok(existsSync(join(journalDir, 'audit-batch.lock')))
    const before = await run(process.execPath, [bin, 'audit', 'verify', '--config', first.config], {
      env: { ...process.env, ...env },
    })
    assert.match(before.stdout, /journalled record\(s\) in \d+ journal file\(s\) wait for replay/)

    // The restart on the same directory takes the dead gateway's lock over and replays.
    const second = await startServeReplica({ home, yaml, port, env, startMs: 90_000 })
    try {
      // A second gateway given the same directory refuses to start, and says why.
      const intruder = spawn(
        process.execPath,
        [bin, 'serve', '--config', second.config, '--listen', `127.0.0.1:${await freePort()}`],
        { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, ...env } },
      )
      let stderr = ''
      intruder.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString()
      })
      const code = await new Promise((resolve) => intruder.once('exit', resolve))
      assert.notEqual(code, 0, stderr)
      assert.match(stderr, /the audit journal directory is in use by another gateway/)
    } finally {
      second.child.kill('SIGTERM')
      await new Promise((resolve) => second.child.once('exit', resolve))
    }
    assert.deepEqual(readdirSync(journalDir), [], 'replayed, committed and unlocked')

    const records = new Map<string, number>()
    const { stdout } = await run(
      process.execPath,
      [bin, 'audit', 'query', '--config', second.config, '--tool', 'work'],
      { timeout: 60_000, maxBuffer: 64 * 1024 * 1024, env: { ...process.env, ...env } },
    )
    for (const line of stdout.split('\n').filter(Boolean)) {
      const record = JSON.parse(line) as { outcome?: string; args?: { id?: string } }
      const id = record.args?.id
      if (record.outcome === 'ok' && id !== undefined) records.set(id, (records.get(id) ?? 0) + 1)
    }
    const executions = readFileSync(execLog, 'utf8').split('\n').filter(Boolean)
    const counts = {
      succeeded: succeeded.length,
      failed,
      records: [...records.values()].reduce((a, b) => a + b, 0),
      executions: executions.length,
    }
    console.log(`journalled replica kill test: ${JSON.stringify(counts)}`)
    const notOnce = succeeded.filter((id) => records.get(id) !== 1)
    assert.deepEqual(notOnce, [], 'every successful reply has exactly one audit record')
    assert.ok(
      [...records.values()].every((n) => n === 1),
      'no call is in the chain twice',
    )
    const verify = await run(
      process.execPath,
      [bin, 'audit', 'verify', '--config', second.config],
      {
        env: { ...process.env, ...env },
      },
    )
    assert.match(verify.stdout, /^ok /)
    assert.doesNotMatch(verify.stdout, /journal/, 'after the replay no journal waits')
  })
})
