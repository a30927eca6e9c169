/**
 * Log lines are written in batches (ADR 123), and a real gateway still writes the pending batch
 * when it is told to stop (SIGTERM) and when an uncaught error ends it. BARBICAN_LOG_FLUSH_MS is
 * set to ten minutes, so only those flushes can bring the call line out within the test.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const everything = join(root, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')
const crashOnSignal = join(root, 'test/fixtures/crash-on-signal.ts')
const CALL_LINE = /"msg":"tools\/call echo ok/

/** A real server, unconfined (the sandbox is not what these tests are about). */
function configFile(): string {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-log-batches-'))
  const file = join(dir, 'barbican.yaml')
  writeFileSync(
    file,
    'upstreams:\n' +
      `  everything:\n    command: ${process.execPath}\n    args: ["${everything}", "stdio"]\n    sandbox: none\n`,
  )
  return file
}

/**
 * A port that was free a moment ago. The gateway's own address line is an info line, held in
 * its batch for the ten minutes these tests set, so the address is chosen here.
 */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Starts a gateway whose batches wait ten minutes; resolves once it answers /readyz. */
async function start(preload: readonly string[] = []) {
  const port = await freePort()
  const gateway = spawn(
    process.execPath,
    [...preload, bin, 'serve', '--config', configFile(), '--listen', `127.0.0.1:${port}`],
    {
      stdio: ['ignore', 'ignore', 'pipe'],
      env: { ...process.env, BARBICAN_LOG_FLUSH_MS: '600000' },
    },
  )
  const seen = { text: '' }
  gateway.stderr?.on('data', (chunk: Buffer) => {
    seen.text += chunk.toString()
  })
  const base = `http://127.0.0.1:${port}`
  const deadline = Date.now() + 60_000
  for (;;) {
    if (gateway.exitCode !== null) assert.fail(`exited (${gateway.exitCode}): ${seen.text}`)
    const ready = await fetch(`${base}/readyz`).then(
      (r) => r.ok,
      () => false,
    )
    if (ready) break
    if (Date.now() > deadline) assert.fail(`never ready: ${seen.text}`)
    await sleep(50)
  }
  return { gateway, seen, url: `${base}/mcp` }
}

/** One tools/call through the gateway, then a pause in which an unbatched line would show. */
async function callOnce(url: string): Promise<void> {
  const client = new Client({ name: 'log-batches', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  await client.callTool({ name: 'echo', arguments: { message: 'hi' } })
  await client.close()
  await sleep(300)
}

function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode)
    else child.once('exit', (code) => resolve(code))
  })
}

describe('batched log lines', () => {
  test('the call line waits in its batch, and SIGTERM writes it', async () => {
    const { gateway, seen, url } = await start()
    try {
      await callOnce(url)
      assert.doesNotMatch(seen.text, CALL_LINE, 'the call line was written at once, not batched')
      gateway.kill('SIGTERM')
      assert.equal(await exited(gateway), 0)
    } finally {
      gateway.kill('SIGKILL')
    }
    assert.match(seen.text, CALL_LINE)
    const lines = seen.text.split('\n').filter((line) => line !== '')
    assert.equal(JSON.parse(lines.at(-1)!).msg, 'stopped', 'the last line is still the last')
  })

  test('an uncaught error writes the pending batch before its report', async () => {
    const { gateway, seen, url } = await start(['--import', crashOnSignal])
    try {
      await callOnce(url)
      assert.doesNotMatch(seen.text, CALL_LINE, 'the call line was written at once, not batched')
      gateway.kill('SIGUSR2')
      assert.equal(await exited(gateway), 1)
    } finally {
      gateway.kill('SIGKILL')
    }
    const call = CALL_LINE.exec(seen.text)
    const crash = seen.text.indexOf('crash requested by the test')
    assert.ok(call, `the call line was lost: ${seen.text}`)
    assert.ok(crash > call.index, 'the call line comes before the error report')
  })
})
