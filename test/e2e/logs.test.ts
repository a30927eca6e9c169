/**
 * `barbican serve` as its stderr reads: pure JSON lines when piped (a supervisor), readable lines
 * on a terminal (a pseudo-terminal made by `script`), one summary line once start-up settles, one
 * line per call with its request id and trace id, no routine start-up chatter at the default
 * level, a shutdown that says what it waits for, and an upstream in a crash loop logged once
 * per state change, its retries at debug (ADR 120).
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'

/** A config with a real server and one whose command fails at once. */
function configFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-logs-'))
  const file = join(dir, 'barbican.yaml')
  writeFileSync(
    file,
    `upstreams:\n` +
      `  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n` +
      `  broken:\n    command: ${process.execPath}\n    args: ["${join(dir, 'missing.js')}"]\n`,
  )
  return file
}

/** Resolves with everything read so far once `pattern` shows up in `stream`'s text. */
function waitFor(
  stream: NodeJS.ReadableStream,
  seen: { text: string },
  pattern: RegExp,
): Promise<RegExpExecArray> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`never saw ${pattern}: ${seen.text}`)), 60_000)
    const check = () => {
      const match = pattern.exec(seen.text)
      if (match) {
        clearTimeout(timer)
        stream.off('data', check)
        resolve(match)
      }
    }
    stream.on('data', check)
    check()
  })
}

/** The environment without NO_COLOR and FORCE_COLOR (a test runner may set them). */
function withoutColourSettings(): NodeJS.ProcessEnv {
  const { NO_COLOR: _no, FORCE_COLOR: _force, ...env } = process.env
  return env
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve()
    else child.once('exit', () => resolve())
  })
}

describe('serve logs', () => {
  test('piped: every stderr line is JSON, with a summary, call lines and a shutdown', async () => {
    const gateway = spawn(
      process.execPath,
      [bin, 'serve', '--config', configFile(), '--listen', '127.0.0.1:0'],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    )
    const seen = { text: '' }
    gateway.stderr?.on('data', (chunk: Buffer) => {
      seen.text += chunk.toString()
    })
    try {
      const [, url] = await waitFor(gateway.stderr!, seen, /"msg":"ready: [^"]* at (http[^ "]+)/)
      const client = new Client({ name: 'logs', version: '1.0.0' })
      await client.connect(
        new StreamableHTTPClientTransport(new URL(url!), {
          requestInit: { headers: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` } },
        }),
      )
      await client.callTool({ name: 'everything__echo', arguments: { message: 'hi' } })
      await client.close()
      await waitFor(gateway.stderr!, seen, /"msg":"tools\/call everything__echo ok/)
      gateway.kill('SIGTERM')
      await exited(gateway)
    } finally {
      gateway.kill('SIGKILL')
    }
    const lines = seen.text.split('\n').filter((l) => l !== '')
    const records = lines.map((line) => {
      try {
        return JSON.parse(line) as Record<string, unknown>
      } catch {
        return assert.fail(`not a JSON line: ${line}`)
      }
    })
    const summary = records.find((r) => String(r.msg).startsWith('ready: '))!
    assert.match(
      String(summary.msg),
      /^ready: 1\/2 upstreams, \d+ tools at http:\/\/127\.0\.0\.1:\d+\/mcp \(broken: failed — see above\)$/,
    )
    assert.equal(summary.level, 'warn')
    const call = records.find((r) => String(r.msg).startsWith('tools/call everything__echo ok'))!
    assert.equal(call.level, 'info')
    assert.equal(call.traceId, TRACE)
    assert.equal(call.upstream, 'everything')
    assert.notEqual(call.requestId, undefined)
    const visible = records.filter((r) => r.level !== 'debug')
    for (const r of visible) {
      assert.ok(
        !(r.msg === 'upstream era' && String(r.reason).includes('-32601')),
        'the -32601 answer to the probe is routine',
      )
      assert.ok(
        !(r.msg === 'upstream request refused' && r.method === 'roots/list'),
        'roots refused before any call is routine',
      )
    }
    const exit = records.find((r) => r.msg === 'upstream process exited' && r.upstream === 'broken')
    assert.match(JSON.stringify(exit?.stderr), /MODULE_NOT_FOUND/)
    const shutdown = records.find((r) => String(r.msg).startsWith('shutting down: waiting for'))
    assert.match(
      String(shutdown?.msg),
      /HTTP requests? in flight .* upstreams? to stop \(everything\)/,
    )
    assert.equal(records.at(-1)?.msg, 'stopped')
  })

  test('on a terminal: readable, coloured lines and the summary, no JSON', async () => {
    const command = [
      process.execPath,
      bin,
      'serve',
      '--config',
      configFile(),
      '--listen',
      '127.0.0.1:0',
    ]
      .map((a) => `'${a}'`)
      .join(' ')
    // `script` runs the command on a pseudo-terminal: stderr is then a TTY, as in a shell.
    const terminal = spawn('script', ['-qfec', command, '/dev/null'], {
      stdio: ['pipe', 'pipe', 'pipe'],
      detached: true,
      env: withoutColourSettings(),
    })
    const seen = { text: '' }
    terminal.stdout?.on('data', (chunk: Buffer) => {
      seen.text += chunk.toString()
    })
    try {
      await waitFor(terminal.stdout!, seen, /ready: 1\/2 upstreams[^\n]*\n/)
    } finally {
      process.kill(-terminal.pid!, 'SIGTERM')
      await exited(terminal)
    }
    const lines = seen.text.split(/\r?\n/).filter((l) => l.trim() !== '')
    assert.ok(seen.text.includes('\x1b[36mINFO'), 'levels are coloured')
    // biome-ignore lint/suspicious/noControlCharactersInRegex: ANSI colour sequences
    const plain = lines.map((l) => l.replace(/\x1b\[\d+m/g, ''))
    for (const line of plain) {
      assert.match(line, /^\d\d:\d\d:\d\d\.\d{3} (DEBUG|INFO |WARN |ERROR) \S/, `readable: ${line}`)
      assert.ok(!line.includes('{"time"'), `no JSON line on a terminal: ${line}`)
    }
    assert.ok(plain.some((l) => /WARN {2}ready: 1\/2 upstreams, \d+ tools at http/.test(l)))
  })
})

describe('an upstream in a crash loop', () => {
  test('logs one line per state change; its retries only at debug', async () => {
    // The drifting server reads its tool's description from a file: until the file exists it
    // dies at start with an ENOENT stack, so it crash-loops, then serves once the file is there.
    const dir = mkdtempSync(join(tmpdir(), 'barbican-crash-loop-'))
    const description = join(dir, 'description.txt')
    const drifting = join(root, 'test/fixtures/drifting-server.ts')
    const file = join(dir, 'barbican.yaml')
    writeFileSync(
      file,
      'log: { level: debug }\n' +
        'upstreams:\n' +
        `  flaky: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(drifting)}, ${JSON.stringify(description)}], sandbox: none }\n`,
    )
    const gateway = spawn(
      process.execPath,
      [bin, 'serve', '--config', file, '--listen', '127.0.0.1:0'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    )
    const seen = { text: '' }
    gateway.stderr?.on('data', (chunk: Buffer) => {
      seen.text += chunk.toString()
    })
    try {
      // Five failed attempts at least: retries after 0, 250, 500 and 1,000 ms.
      await waitFor(gateway.stderr!, seen, /("msg":"upstream failed again"[\s\S]*){4}/)
      writeFileSync(description, 'Echo the text back.')
      await waitFor(gateway.stderr!, seen, /"msg":"upstream ready"/)
      gateway.kill('SIGTERM')
      await exited(gateway)
    } finally {
      gateway.kill('SIGKILL')
      rmSync(dir, { recursive: true, force: true })
    }
    const records = seen.text
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .filter((r) => r.upstream === 'flaky')
    const ready = records.findIndex((r) => r.msg === 'upstream ready')
    const failing = records.slice(0, ready)
    // The first attempt as it happened, ending in one line for the state change; then nothing
    // visible per retry until the upstream is ready again.
    const first = failing.findIndex((r) => r.msg === 'upstream failed')
    assert.equal(failing[first]?.level, 'warn')
    const retries = failing.slice(first + 1)
    assert.deepEqual(
      retries.filter((r) => r.level !== 'debug').map((r) => r.msg),
      [],
      'lines logged while retrying',
    )
    const exits = failing.filter((r) => r.msg === 'upstream process exited')
    assert.ok(exits.length >= 5, `${exits.length} exits`)
    // The first attempt's exit stays visible, with the stderr that explains it.
    assert.match(JSON.stringify(exits[0]?.stderr), /ENOENT/)
    assert.equal(exits[0]?.level, 'warn')
    const failed = failing.find((r) => r.msg === 'upstream failed')
    assert.match(String(failed?.error), /ENOENT/)
    assert.match(String(failed?.next), /retrying with backoff/)
    const again = failing.filter((r) => r.msg === 'upstream failed again')
    assert.ok(again.every((r) => r.level === 'debug'))
    assert.equal(records[ready]?.level, 'info')
    assert.equal(records[ready]?.afterFailedAttempts, again.length + 1)
  })
})
