/**
 * The audit log of a real `barbican serve`: a SIGKILL right after the last reply loses no record
 * of any call that was answered; a graceful stop seals the log with a shutdown checkpoint; and
 * `barbican audit verify` names the first record that an attacker edited, deleted, reordered or
 * cut from the tail. Admin acts (`pins baseline`) land in the same chain.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import {
  appendFileSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const run = promisify(execFile)

async function barbican(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/** A config with the everything server, in a fresh folder; the audit log goes to .barbican/. */
function gatewayDir(extra = ''): { dir: string; config: string } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-audit-e2e-')))
  const config = join(dir, 'barbican.yaml')
  writeFileSync(
    config,
    `upstreams:\n  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n${extra}`,
  )
  return { dir, config }
}

async function serve(config: string): Promise<{ gateway: ChildProcess; url: string }> {
  const gateway = spawn(
    process.execPath,
    [bin, 'serve', '--config', config, '--listen', '127.0.0.1:0'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  const url = await new Promise<string>((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(() => reject(new Error(`no URL announced: ${seen}`)), 30_000)
    gateway.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      const match = /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(seen)
      if (match?.[1]) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
  })
  return { gateway, url }
}

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null
    ? Promise.resolve()
    : new Promise((resolve) => child.once('exit', () => resolve()))
}

async function callEcho(url: string, n: number): Promise<void> {
  const client = new Client({ name: 'audit-e2e', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
  try {
    const replies = await Promise.all(
      Array.from({ length: n }, (_, i) =>
        client.callTool({ name: 'echo', arguments: { message: `m${i}` } }),
      ),
    )
    for (const r of replies) assert.match(JSON.stringify(r), /Echo: m\d+/)
  } finally {
    // Not closed: the gateway is killed next, with the session still open.
  }
}

function echoRecords(stdout: string): Record<string, unknown>[] {
  return stdout
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((r) => r.method === 'tools/call' && r.target === 'echo')
}

describe('the audit log of barbican serve', () => {
  test('durability fsync: kill -9 right after the replies loses no record of an answered call', async () => {
    const { config } = gatewayDir('audit:\n  durability: fsync\n')
    const { gateway, url } = await serve(config)
    try {
      await callEcho(url, 24)
      gateway.kill('SIGKILL')
      await exited(gateway)
    } finally {
      gateway.kill('SIGKILL')
    }
    const query = await barbican(['audit', 'query', '--config', config, '--tool', 'echo'])
    assert.equal(query.code, 0, query.stderr)
    const records = echoRecords(query.stdout)
    assert.equal(records.length, 24)
    const messages = new Set(records.map((r) => r.argsDigest))
    assert.equal(messages.size, 24, 'one record per call, each with its own argument digest')
    for (const r of records) {
      assert.equal(r.outcome, 'ok')
      assert.equal(r.subject, 'anonymous')
      assert.equal(r.upstream, 'everything')
      assert.equal(typeof r.latencyMs, 'number')
    }
    // No shutdown checkpoint after a SIGKILL, but the chain itself is intact.
    const verify = await barbican(['audit', 'verify', '--config', config])
    assert.equal(verify.code, 0, verify.stdout)
    assert.match(verify.stdout, /after the last checkpoint/)
  })

  test('the default (batched): kill -9 after the replies loses none; the next start replays them, in either mode', async () => {
    // A long window: nothing is committed before the kill, so the replay is what is tested.
    const { dir, config } = gatewayDir('audit:\n  batchWindowMs: 10000\n')
    const first = await serve(config)
    try {
      await callEcho(first.url, 24)
      first.gateway.kill('SIGKILL')
      await exited(first.gateway)
    } finally {
      first.gateway.kill('SIGKILL')
    }
    // The records are in the journal beside the log, not yet in the chain.
    const journals = readdirSync(join(dir, '.barbican')).filter((f) =>
      f.startsWith('audit.db-batch'),
    )
    assert.ok(journals.length > 0, 'a journal is left behind')
    const journalled = journals.flatMap((f) =>
      readFileSync(join(dir, '.barbican', f), 'utf8')
        .split('\n')
        .filter(Boolean),
    ).length
    assert.ok(journalled >= 24, `every echo call is journalled (${journalled} lines)`)
    // Verify before the restart: the chain holds none of them, and verify says they wait.
    const before = await barbican(['audit', 'verify', '--config', config])
    assert.equal(before.code, 0, before.stdout)
    assert.match(
      before.stdout,
      new RegExp(
        `note  ${journalled} journalled record\\(s\\) in ${journals.length} journal file\\(s\\) wait for replay`,
      ),
    )
    assert.match(before.stdout, /the next start of the gateway adds them to the chain/)
    // A line that does not parse is damage: named by file and line, and verify fails.
    const last = join(dir, '.barbican', journals.at(-1)!)
    const damagedLine = readFileSync(last, 'utf8').split('\n').filter(Boolean).length + 1
    appendFileSync(last, '{"type":"call",garbage\n')
    const damaged = await barbican(['audit', 'verify', '--config', config])
    assert.equal(damaged.code, 1, damaged.stdout)
    assert.ok(
      damaged.stdout.includes(`FAIL  journal ${last}:${damagedLine}: the line does not parse`),
      damaged.stdout,
    )
    // The restart runs in fsync mode: the journals a batched gateway left are replayed all the
    // same, so a change of mode cannot strand acknowledged calls.
    writeFileSync(
      config,
      readFileSync(config, 'utf8').replace('batchWindowMs: 10000', 'durability: fsync'),
    )
    const second = await serve(config)
    second.gateway.kill('SIGTERM')
    await exited(second.gateway)
    assert.deepEqual(
      readdirSync(join(dir, '.barbican')).filter((f) => f.startsWith('audit.db-batch')),
      [],
      'the replayed journal is removed',
    )
    const query = await barbican(['audit', 'query', '--config', config, '--tool', 'echo'])
    assert.equal(query.code, 0, query.stderr)
    const records = echoRecords(query.stdout)
    assert.equal(records.length, 24)
    assert.equal(new Set(records.map((r) => r.argsDigest)).size, 24)
    const verify = await barbican(['audit', 'verify', '--config', config])
    assert.equal(verify.code, 0, verify.stdout)
    assert.doesNotMatch(verify.stdout, /journal/, 'after the replay no journal waits')
  })

  test('a graceful stop seals the log; verify then names each kind of tampering', async () => {
    const { dir, config } = gatewayDir()
    const baseline = await barbican(['pins', 'baseline', '--config', config, '--as', 'olga'])
    assert.equal(baseline.code, 0, baseline.stderr)
    const { gateway, url } = await serve(config)
    await callEcho(url, 6)
    gateway.kill('SIGTERM')
    await exited(gateway)

    const sealed = await barbican(['audit', 'verify', '--config', config])
    assert.equal(sealed.code, 0, sealed.stdout)
    assert.match(sealed.stdout, /the last \(shutdown\)/)
    assert.doesNotMatch(sealed.stdout, /after the last checkpoint/)
    const trusted = await barbican(['audit', 'query', '--config', config, '--tool', 'tool:echo'])
    assert.deepEqual(
      trusted.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .map((r) => [r.type, r.action, r.actor, r.upstream]),
      [['admin', 'pin.trusted', 'first-sight', 'everything']],
      'the trust guard records pinning echo at first sight',
    )
    const tail = await barbican(['audit', 'tail', '--config', config, '--limit', '1000'])
    const lines = tail.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    assert.deepEqual(
      [lines[0]?.type, lines[0]?.action, lines[0]?.actor],
      ['admin', 'config.baseline', 'olga'],
    )
    const last = Number(lines.at(-1)?.seq)
    assert.ok(last >= 7)

    const db = join(dir, '.barbican', 'audit.db')
    const backup = readFileSync(db)
    const restore = () => writeFileSync(db, backup)
    const edit = (sql: string) => {
      const conn = new DatabaseSync(db)
      try {
        conn.exec(sql)
      } finally {
        conn.close()
      }
    }
    const cases: [string, string, number, RegExp][] = [
      [
        'edited',
        `UPDATE audit_records SET body = replace(body, '"outcome":"ok"', '"outcome":"error"') WHERE seq = 3`,
        3,
        /edited/,
      ],
      ['deleted', 'DELETE FROM audit_records WHERE seq = 4', 4, /deleted/],
      [
        'reordered',
        'UPDATE audit_records SET seq = -5 WHERE seq = 5; UPDATE audit_records SET seq = 5 WHERE seq = 6; UPDATE audit_records SET seq = 6 WHERE seq = -5',
        5,
        /reordered/,
      ],
      ['truncated', `DELETE FROM audit_records WHERE seq > ${last - 2}`, last - 1, /deleted/],
    ]
    for (const [what, sql, seq, reason] of cases) {
      edit(sql)
      const r = await barbican(['audit', 'verify', '--config', config])
      restore()
      assert.equal(r.code, 1, `${what}: ${r.stdout}`)
      assert.match(r.stdout, new RegExp(`^FAIL  record ${seq}: `), what)
      assert.match(r.stdout, reason, what)
    }
    const again = await barbican(['audit', 'verify', '--config', config])
    assert.equal(again.code, 0, again.stdout)
  })
})
