/**
 * A `${VAR}` that is not set holds back only the upstream entries that use it, with the reason
 * (ADR 121): `barbican check` names it and fails, `--strict` refuses the file as before, and a
 * gateway serves the other upstreams while `/readyz`, the admin API and the console show the
 * held entry and why.
 */
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { runCli } from '../support/cli.ts'

const bin = fileURLToPath(new URL('../../bin/barbican.js', import.meta.url))
const drifting = fileURLToPath(new URL('../fixtures/drifting-server.ts', import.meta.url))
/** A name no environment sets. */
const UNSET = 'BARBICAN_TEST_HELD_URL_NEVER_SET'
const REASON = `upstreams.web.url needs environment variable ${UNSET}, which is not set`

describe('an upstream entry whose variable is not set', () => {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-held-'))
  const description = join(dir, 'description.txt')
  const file = join(dir, 'barbican.yaml')
  let server: RunningServer

  before(async () => {
    assert.equal(process.env[UNSET], undefined)
    writeFileSync(description, 'Echo the text back.')
    writeFileSync(
      file,
      [
        'upstreams:',
        `  drift: { command: ${JSON.stringify(process.execPath)}, args: [${JSON.stringify(drifting)}, ${JSON.stringify(description)}], sandbox: none }`,
        `  web: { url: "\${${UNSET}}" }`,
        '',
      ].join('\n'),
    )
    const { config } = parseConfigText(readFileSync(file, 'utf8'), { file, env: process.env })
    server = await startServer({ ...config, listen: { host: '127.0.0.1', port: 0 } }, silentLogger)
    await server.started
  })
  after(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  test('check names the held entry and its reason, tries the others, and fails', async () => {
    const { code, stdout, stderr } = await runCli(['check', '--config', file])
    assert.equal(code, 1, stdout + stderr)
    assert.ok(stdout.includes(`HELD  web: ${REASON}`), stdout)
    assert.match(stdout, /^ok {4}drift: drifting 1\.0\.0/m)
    assert.match(stderr, /1 upstream\(s\) held back: a variable they use is not set/)
  })

  test('check --strict refuses the file, as serve --strict does', async () => {
    const { code, stdout, stderr } = await runCli(['check', '--strict', '--config', file])
    assert.equal(code, 1)
    assert.match(stderr, new RegExp(`upstreams\\.web\\.url .*needs environment variable ${UNSET}`))
    assert.doesNotMatch(stdout, /drift/)
  })

  test('serve logs it once with the reason and counts it in the summary; --strict refuses to start', async () => {
    const run = (args: string[]) =>
      new Promise<{ code: number | null; err: string }>((resolve) => {
        const child = spawn(
          process.execPath,
          [bin, 'serve', ...args, '--config', file, '--listen', '127.0.0.1:0'],
          {
            stdio: ['ignore', 'ignore', 'pipe'],
          },
        )
        let err = ''
        child.stderr.on('data', (c: Buffer) => {
          err += c.toString()
          // Once the summary is out, what start-up says is said.
          if (err.includes('"msg":"ready: ')) child.kill('SIGTERM')
        })
        child.on('close', (code) => resolve({ code, err }))
      })
    const served = await run([])
    const records = served.err
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
    const held = records.filter((r) => r.msg === 'upstream held back')
    assert.equal(held.length, 1, served.err)
    assert.equal(held[0]?.level, 'warn')
    assert.equal(held[0]?.upstream, 'web')
    assert.match(String(held[0]?.reason), new RegExp(REASON))
    const summary = records.find((r) => String(r.msg).startsWith('ready: '))
    assert.match(String(summary?.msg), /^ready: 1\/2 upstreams, .*\(web: held — see above\)$/)
    const strict = await run(['--strict'])
    assert.equal(strict.code, 1)
    assert.match(strict.err, new RegExp(`needs environment variable ${UNSET}`))
  })

  test('/readyz lists it as held, with the reason, beside the upstream that runs', async () => {
    const res = await fetch(`${server.url}/readyz`)
    const body = (await res.json()) as {
      status: string
      upstreams: { name: string; state: string; error?: string }[]
    }
    assert.equal(res.status, 503)
    assert.equal(body.status, 'degraded')
    const states = Object.fromEntries(body.upstreams.map((u) => [u.name, u.state]))
    assert.deepEqual(states, { drift: 'ready', web: 'held' })
    assert.match(body.upstreams.find((u) => u.name === 'web')?.error ?? '', new RegExp(REASON))
  })

  test('the admin API and the console show it with the reason; its tools are simply absent', async () => {
    const status = (await (await fetch(`${server.url}/admin/api/status`)).json()) as {
      upstreams: { name: string; state: string; lastError?: string }[]
      servers: { upstreams: string[]; counts?: { tools: number } }[]
    }
    const web = status.upstreams.find((u) => u.name === 'web')
    assert.equal(web?.state, 'held')
    assert.match(web?.lastError ?? '', new RegExp(REASON))
    assert.deepEqual(status.servers[0]?.upstreams, ['drift'])
    assert.equal(status.servers[0]?.counts?.tools, 1)
    const page = await (await fetch(`${server.url}/admin`)).text()
    const row = page.match(/<tr><td>web<\/td>.*?<\/tr>/)?.[0] ?? ''
    assert.match(row, /held/)
    assert.match(row, new RegExp(REASON))
  })
})
