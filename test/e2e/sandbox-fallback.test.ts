/**
 * Without bubblewrap (forced with BARBICAN_SANDBOX_MECHANISM=node-permission), a server no
 * mechanism can confine (here a shell that runs an MCP server) is refused by default, naming the
 * two lines that run it; with `sandbox.fallback: unconfined` it runs, and the startup log,
 * `barbican check` and `/readyz` mark it unconfined (ADR 097).
 */
import assert from 'node:assert/strict'
import { mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { MECHANISM_ENV } from '../../src/sandbox/sandbox.ts'
import { jsonLogger } from '../../src/telemetry/log.ts'
import { runCli } from '../support/cli.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const echo = join(root, 'test/fixtures/upstream-hostile.ts')

let previous: string | undefined
before(() => {
  previous = process.env[MECHANISM_ENV]
  process.env[MECHANISM_ENV] = 'node-permission'
})
after(() => {
  if (previous === undefined) delete process.env[MECHANISM_ENV]
  else process.env[MECHANISM_ENV] = previous
})

/** A config whose one upstream is a shell (not Node) that starts the fixture server. */
function configFile(dir: string, fallback: boolean): string {
  const file = join(dir, 'barbican.json')
  const text = JSON.stringify({
    listen: '127.0.0.1:0',
    ...(fallback ? { sandbox: { fallback: 'unconfined' } } : {}),
    upstreams: {
      shell: { command: '/bin/sh', args: ['-c', `exec "${process.execPath}" "${echo}"`] },
    },
  })
  writeFileSync(file, text)
  return file
}

for (const fallback of [false, true]) {
  describe(`a server no mechanism can confine, ${fallback ? 'with' : 'without'} sandbox.fallback: unconfined`, () => {
    let dir: string
    let file: string
    let server: RunningServer
    const lines: Array<Record<string, unknown>> = []

    before(async () => {
      dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-fallback-')))
      file = configFile(dir, fallback)
      const { config } = parseConfigText(readFileSync(file, 'utf8'), { file })
      server = await startServer(
        config,
        jsonLogger({ write: (line) => lines.push(JSON.parse(line) as Record<string, unknown>) }),
      )
      await server.started
    })

    after(async () => {
      await server?.stop()
      rmSync(dir, { recursive: true, force: true })
    })

    test('the log says what it runs under', () => {
      if (fallback) {
        const warned = lines.find((r) => r.msg === 'upstream runs unconfined')
        assert.equal(warned?.level, 'warn')
        assert.match(String(warned?.sandbox), /^unconfined \(sandbox\.fallback: unconfined/)
        const started = lines.find((r) => r.msg === 'upstream process started')
        assert.match(String(started?.sandbox), /^unconfined/)
      } else {
        const refused = lines
          .map((r) => JSON.stringify(r))
          .find((r) => /runs confined by default/.test(r))
        assert.ok(refused, JSON.stringify(lines.map((r) => r.msg)))
        assert.match(refused, /sandbox: none/)
        assert.ok(!lines.some((r) => r.msg === 'upstream process started'))
      }
    })

    test('/readyz marks it', async () => {
      let body: {
        upstreams: Array<{ name: string; state: string; sandbox?: string; error?: string }>
      }
      // The first start may still be under way.
      for (let i = 0; ; i++) {
        body = (await (await fetch(`${server.url}/readyz`)).json()) as typeof body
        const shell = body.upstreams.find((u) => u.name === 'shell')!
        if (fallback ? shell.state === 'ready' : shell.error !== undefined) break
        if (i > 100) assert.fail(JSON.stringify(body))
        await new Promise((r) => setTimeout(r, 100))
      }
      const shell = body.upstreams.find((u) => u.name === 'shell')!
      assert.equal(shell.sandbox, fallback ? 'unconfined' : 'refused')
      if (!fallback) {
        assert.match(String(shell.error), /add `sandbox: none` to this entry \(upstreams\.shell\)/)
        assert.match(String(shell.error), /`sandbox: \{ fallback: unconfined \}`/)
      }
    })

    test('barbican check says it', async () => {
      const out = await runCli(['check', '--config', file])
      if (fallback) {
        assert.match(out.stdout, /ok {4}shell: hostile/)
        assert.match(out.stdout, /sandbox: unconfined \(sandbox\.fallback: unconfined/)
      } else {
        assert.match(out.stdout, /FAIL {2}shell: upstream "shell" runs confined by default/)
        assert.match(out.stdout, /sandbox: refused: /)
      }
    })
  })
}
