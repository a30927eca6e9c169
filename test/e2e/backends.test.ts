/**
 * Two real `barbican serve` replicas on one PostgreSQL and one Redis (ADR 055): a quota counts
 * fleet-wide, both replicas append to one audit chain that `barbican audit verify` accepts, and
 * pins first seen by one replica are in the shared store the CLI reads. Fresh schema and key
 * prefix per run (test/support/backends.ts).
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import {
  dropPostgresSchemas,
  FLEET_AUDIT_KEY,
  freshPostgresUrl,
  freshRedisPrefix,
  REDIS_URL,
} from '../support/backends.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const run = promisify(execFile)

after(dropPostgresSchemas)

async function barbican(
  args: string[],
  env: NodeJS.ProcessEnv,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], {
      timeout: 60_000,
      env: { ...process.env, ...env },
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

async function serve(
  config: string,
  env: NodeJS.ProcessEnv,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(
    process.execPath,
    [bin, 'serve', '--config', config, '--listen', '127.0.0.1:0'],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, ...env },
    },
  )
  const url = await new Promise<string>((resolve, reject) => {
    let seen = ''
    const timer = setTimeout(() => reject(new Error(`no URL announced: ${seen}`)), 30_000)
    child.stderr?.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      const match = /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(seen)
      if (match?.[1]) {
        clearTimeout(timer)
        resolve(match[1])
      }
    })
    child.once('exit', (code) => reject(new Error(`exited ${code}: ${seen}`)))
  })
  return { child, url }
}

function stopped(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

describe('two replicas on PostgreSQL and Redis', () => {
  test('share one quota, one audit chain and one pin store', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-backends-e2e-')))
    const config = join(dir, 'barbican.yaml')
    writeFileSync(
      config,
      `upstreams:\n  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n` +
        `redis:\n  url: redis://unused.invalid\n  prefix: "${freshRedisPrefix()}"\n` +
        'rateLimits:\n  fleet:\n    per: [subject]\n    algorithm: fixed-window\n    limit: 6\n    windowMs: 60000\n',
    )
    const env = {
      BARBICAN_POSTGRES_URL: await freshPostgresUrl(),
      BARBICAN_REDIS_URL: REDIS_URL,
      BARBICAN_AUDIT_KEY: FLEET_AUDIT_KEY,
    }
    const replicas = await Promise.all([serve(config, env), serve(config, env)])
    try {
      const outcomes: string[] = []
      for (let i = 0; i < 12; i++) {
        const reply = await postStatelessToolCall(`${replicas[i % 2]!.url}/mcp`, {
          name: 'echo',
          arguments: { message: `m${i}` },
          id: i + 1,
        })
        const error = reply.final?.error as { data?: { barbicanCode?: string } } | undefined
        outcomes.push(
          error ? String(error.data?.barbicanCode) : reply.final?.result ? 'ok' : reply.text,
        )
      }
      assert.deepEqual(
        outcomes.filter((o) => o === 'ok').length,
        6,
        `a limit of 6 across both replicas admits 6: ${outcomes.join(', ')}`,
      )
      assert.ok(
        outcomes.slice(6).every((o) => o === 'ERR_RATE_LIMITED'),
        outcomes.join(', '),
      )
    } finally {
      await Promise.all(replicas.map((r) => stopped(r.child)))
    }

    const query = await barbican(['audit', 'query', '--config', config, '--tool', 'echo'], env)
    assert.equal(query.code, 0, query.stderr)
    const calls = query.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => r.method === 'tools/call')
    assert.equal(calls.length, 12, 'every call of both replicas is recorded, refused ones too')
    const verify = await barbican(['audit', 'verify', '--config', config], env)
    assert.equal(verify.code, 0, verify.stdout + verify.stderr)
    assert.match(verify.stdout, /^ok /m)
    assert.match(verify.stdout, /postgres:\/\//)

    const pins = await barbican(['pins', 'list', '--config', config], env)
    assert.equal(pins.code, 0, pins.stderr)
    assert.match(
      pins.stdout,
      /pinned +everything: \d+ item/,
      'tools first seen by the replicas are pinned in PostgreSQL',
    )
  })

  test('serve refuses to start when PostgreSQL cannot be reached, naming it', async () => {
    const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-backends-e2e-')))
    const config = join(dir, 'barbican.yaml')
    writeFileSync(config, 'upstreams:\n  a:\n    command: node\n')
    const started = await barbican(['serve', '--config', config, '--listen', '127.0.0.1:0'], {
      BARBICAN_POSTGRES_URL: 'postgres://u:pw-not-shown@127.0.0.1:1/db',
    })
    assert.equal(started.code, 1)
    assert.match(
      started.stderr,
      /cannot open the store: PostgreSQL at postgres:\/\/\S*@127\.0\.0\.1:1\/db cannot be used/,
    )
    assert.doesNotMatch(started.stderr, /pw-not-shown/)
  })
})
