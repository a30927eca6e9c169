/**
 * Failures explain themselves, where a user meets them: `barbican check` names an upstream's
 * exit code or signal and its last stderr lines, a command missing from PATH, a host DNS cannot
 * resolve; `serve` says the same in /readyz, the log and a client's error, answers a port in use
 * with one line, and wins back a remote upstream that was down at startup on its own.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { EVERYTHING, freePort } from '../fixtures/upstream-helpers.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const dying = join(root, 'test/fixtures/upstream-dying-server.ts')
const faulty = join(root, 'test/fixtures/upstream-faulty-server.ts')
const run = promisify(execFile)

interface Outcome {
  code: number
  stdout: string
  stderr: string
}

async function barbican(args: string[]): Promise<Outcome> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { timeout: 60_000 })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/** Writes `config` as a native JSON config file in a fresh directory; returns its path. */
function configFile(config: unknown): string {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-fail-')))
  const file = join(dir, 'barbican.json')
  writeFileSync(file, JSON.stringify(config))
  return file
}

/** `barbican check` on a config with the one upstream `spec`; its FAIL line. */
async function checkOne(spec: unknown): Promise<{ outcome: Outcome; line: string }> {
  const outcome = await barbican(['check', '--config', configFile({ upstreams: { up: spec } })])
  const line = outcome.stdout.split('\n').find((l) => l.startsWith('FAIL  up: ')) ?? ''
  return { outcome, line }
}

/** A running `barbican serve` child, its URL once it says it serves, and everything it logged. */
class Serve {
  readonly child: ChildProcess
  stderr = ''
  readonly url: Promise<string>
  readonly exited: Promise<number | null>

  constructor(file: string) {
    this.child = spawn(process.execPath, [bin, 'serve', '--config', file], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => resolve(code)))
    this.url = new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`serve did not start: ${this.stderr}`)),
        30_000,
      )
      const seen = (chunk: Buffer) => {
        this.stderr += chunk.toString()
        const match = /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(this.stderr)
        if (match) {
          clearTimeout(timer)
          resolve(match[1]!)
        }
      }
      this.child.stderr?.on('data', seen)
      this.child.stdout?.on('data', seen)
      void this.exited.then(() => {
        clearTimeout(timer)
        reject(new Error(`serve exited: ${this.stderr}`))
      })
    })
  }

  async stop(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM')
    await this.exited
  }
}

interface Readiness {
  status: string
  upstreams: { name: string; state: string; error?: string }[]
}

async function readyz(url: string): Promise<{ status: number; body: Readiness }> {
  const res = await fetch(`${url}/readyz`)
  return { status: res.status, body: (await res.json()) as Readiness }
}

async function eventually<T>(what: string, probe: () => Promise<T | undefined>, ms = 20_000) {
  const deadline = Date.now() + ms
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

describe('barbican check explains why an upstream failed', () => {
  test('a stdio upstream that exits: its exit code and last stderr lines, secrets redacted', async () => {
    const { outcome, line } = await checkOne({
      command: process.execPath,
      args: [
        dying,
        '--stderr',
        'loading config',
        '--stderr',
        'fatal: bad key token=abcd1234efgh',
        '--exit',
        '3',
      ],
    })
    assert.equal(outcome.code, 1)
    assert.match(line, /exited with code 3/)
    assert.match(line, /stderr: loading config \| fatal: bad key token=\[redacted\]/)
    assert.doesNotMatch(outcome.stdout, /abcd1234efgh/)
  })

  test('a stdio upstream killed by a signal: the signal', async () => {
    const { outcome, line } = await checkOne({
      command: process.execPath,
      args: [dying, '--stderr', 'about to be killed', '--signal', 'SIGKILL'],
    })
    assert.equal(outcome.code, 1)
    assert.match(line, /was killed by SIGKILL; stderr: about to be killed/)
  })

  test('a command not on PATH: says so and names the PATH searched', async () => {
    const { outcome, line } = await checkOne({
      command: 'barbican-no-such-mcp-server',
      env: { PATH: '/opt/nowhere/bin:/usr/bin' },
    })
    assert.equal(outcome.code, 1)
    assert.match(
      line,
      /command "barbican-no-such-mcp-server" is not on PATH \(PATH=\/opt\/nowhere\/bin:\/usr\/bin\)/,
    )
  })

  test('a host DNS cannot resolve: names the host, and is not called a refusal', async () => {
    for (const url of ['http://nonexistent.invalid/mcp', 'ws://nonexistent.invalid/mcp']) {
      const { outcome, line } = await checkOne({ url })
      assert.equal(outcome.code, 1)
      assert.match(line, /cannot resolve "nonexistent\.invalid"/, url)
      assert.doesNotMatch(line, /refus/i, url)
    }
  })
})

describe('barbican serve explains an upstream that exits', () => {
  let serve: Serve
  let url: string
  before(async () => {
    serve = new Serve(
      configFile({
        listen: '127.0.0.1:0',
        upstreams: {
          dying: {
            command: process.execPath,
            args: [dying, '--stderr', 'cannot open /data: permission denied', '--exit', '7'],
          },
          crashy: { command: process.execPath, args: [faulty], cwd: root },
        },
      }),
    )
    url = await serve.url
  })
  after(async () => {
    await serve?.stop()
  })

  test('/readyz gives the exit code and the last stderr lines', async () => {
    const dead = await eventually('the dying upstream to be reported', async () => {
      const { status, body } = await readyz(url)
      const up = body.upstreams.find((u) => u.name === 'dying')
      return status === 503 && up?.error !== undefined ? up : undefined
    })
    assert.match(
      dead.error ?? '',
      /exited with code 7; stderr: cannot open \/data: permission denied/,
    )
  })

  test('the log records the exit with its code and stderr lines', async () => {
    const record = await eventually('a log record of the exit', async () =>
      serve.stderr
        .split('\n')
        .filter((l) => l.startsWith('{'))
        .map((l) => JSON.parse(l) as Record<string, unknown>)
        .find((r) => r.msg === 'upstream process exited' && r.upstream === 'dying'),
    )
    assert.equal(record.code, 7)
    assert.deepEqual(record.stderr, ['cannot open /data: permission denied'])
  })

  test('a client whose call the upstream dies in gets the exit code and stderr', async () => {
    const client = new Client({ name: 'failures', version: '1.0.0' })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
    try {
      const error = await client.callTool({ name: 'crashy__crash', arguments: {} }).then(
        (result) => assert.fail(`the call succeeded: ${JSON.stringify(result)}`),
        (err: Error) => err,
      )
      assert.match(error.message, /exited with code 3; stderr: faulty: giving up on the database/)
      assert.match(error.message, /password=\[redacted\]/)
      assert.doesNotMatch(error.message, /hunter2/)
    } finally {
      await client.close()
    }
  })
})

describe('barbican serve on a port already in use', () => {
  test('exits with one line that names the address and what to do, no stack trace', async () => {
    const blocker = createServer()
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
    const { port } = blocker.address() as { port: number }
    try {
      const file = configFile({
        listen: `127.0.0.1:${port}`,
        upstreams: { up: { command: process.execPath, args: [dying, '--exit', '0'] } },
      })
      const outcome = await barbican(['serve', '--config', file])
      assert.equal(outcome.code, 1)
      const lines = outcome.stderr.trim().split('\n')
      assert.equal(lines.length, 1, outcome.stderr)
      // Piped, the CLI speaks JSON lines only (ADR 029): one error line, no stack.
      const line = JSON.parse(lines[0]!) as { level: string; msg: string; stack?: unknown }
      assert.equal(line.level, 'error')
      assert.equal(line.stack, undefined, 'no stack trace')
      assert.match(
        line.msg,
        new RegExp(`^cannot listen on 127\\.0\\.0\\.1:${port}: the port is already in use`),
      )
      assert.match(line.msg, /--listen HOST:PORT/)
    } finally {
      await new Promise((resolve) => blocker.close(resolve))
    }
  })
})

describe('a remote upstream down at startup', () => {
  test('is retried in the background, so /readyz recovers without a client asking', async () => {
    const port = await freePort()
    const serve = new Serve(
      configFile({
        listen: '127.0.0.1:0',
        upstreams: { remote: { url: `http://127.0.0.1:${port}/mcp` } },
      }),
    )
    let everything: ChildProcess | undefined
    try {
      const url = await serve.url
      const down = await eventually('the remote upstream to fail', async () => {
        const { status, body } = await readyz(url)
        return status === 503 && body.upstreams[0]?.error !== undefined ? body : undefined
      })
      assert.match(down.upstreams[0]?.error ?? '', /connection refused at 127\.0\.0\.1/)
      // The server comes up later, on the port the config names.
      everything = spawn(process.execPath, [EVERYTHING, 'streamableHttp'], {
        env: { PATH: process.env.PATH ?? '', PORT: String(port) },
        stdio: 'ignore',
      })
      const up = await eventually('/readyz to recover', async () => {
        const { status, body } = await readyz(url)
        return status === 200 ? body : undefined
      })
      assert.equal(up.upstreams[0]?.state, 'ready')
    } finally {
      everything?.kill('SIGKILL')
      await serve.stop()
    }
  })
})
