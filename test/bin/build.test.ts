import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

// scripts/build.js into a scratch folder: what bin/barbican.js and src/common/lazy-deps.ts rely on.
const BUILD = fileURLToPath(new URL('../../scripts/build.js', import.meta.url))
const require = createRequire(import.meta.url)

describe('scripts/build.js', () => {
  let out: string
  before(() => {
    out = mkdtempSync(join(tmpdir(), 'barbican-build-'))
    execFileSync(process.execPath, [BUILD, '--strict', '--out', out], {
      encoding: 'utf8',
      timeout: 60_000,
    })
  })
  after(() => rmSync(out, { recursive: true, force: true }))

  test('writes the entry, the launcher and the stamp, all in one folder', () => {
    for (const file of ['main.js', 'config-worker.js', 'stdio-launcher.js', '.build-started'])
      assert.ok(existsSync(join(out, file)), file)
    const started = Number(readFileSync(join(out, '.build-started'), 'utf8'))
    assert.ok(started > Date.now() - 120_000 && started <= Date.now())
    assert.deepEqual(
      readdirSync(out, { withFileTypes: true }).filter((e) => e.isDirectory()),
      [],
    )
  })

  test('static imports of Node built-ins are gone (they go through getBuiltinModule)', () => {
    for (const file of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const code = readFileSync(join(out, file), 'utf8')
      assert.doesNotMatch(code, /\bfrom\s*["'](node:)?(http|crypto|util|fs|net)["']/, file)
    }
    const all = readdirSync(out)
      .filter((f) => f.endsWith('.js'))
      .map((f) => readFileSync(join(out, f), 'utf8'))
      .join('\n')
    assert.match(all, /getBuiltinModule\("node:http"\)/)
  })

  test('zod and yaml are only in the config worker, not in what a gateway keeps loaded', () => {
    const markers = /\$ZodType|parseDocument/
    for (const file of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const code = readFileSync(join(out, file), 'utf8')
      if (file === 'config-worker.js') assert.match(code, markers)
      else assert.doesNotMatch(code, markers, file)
    }
  })

  test('every file is ASCII, so V8 keeps its source as one byte per character', () => {
    for (const file of readdirSync(out).filter((f) => /\.(c?js)$/.test(f))) {
      const bytes = readFileSync(join(out, file))
      assert.equal(
        bytes.findIndex((byte) => byte > 0x7f),
        -1,
        file,
      )
    }
  })

  test('the one-file copies export what the packages export', () => {
    for (const name of ['undici', 'ws', 'jose']) {
      const copy = require(join(out, `${name}.cjs`)) as Record<string, unknown>
      const original = require(name) as Record<string, unknown>
      assert.equal(typeof copy, typeof original, name)
      assert.deepEqual(Object.keys(copy).sort(), Object.keys(original).sort(), name)
    }
  })

  test("each copy is bundled from its package's public entry, not from copied internals", () => {
    for (const name of ['undici', 'ws', 'jose']) {
      const map = JSON.parse(readFileSync(join(out, `${name}.cjs.map`), 'utf8')) as {
        sources: string[]
      }
      const entry = require.resolve(name).replace(/.*node_modules\//, 'node_modules/')
      assert.ok(
        map.sources.some((source) => source.endsWith(entry)),
        `${name}.cjs does not include ${entry}`,
      )
    }
    assert.deepEqual(
      readdirSync(out).filter((f) => f.endsWith('.cjs')),
      ['jose.cjs', 'prom-client.cjs', 'undici.cjs', 'ws.cjs'],
    )
  })

  test('the prom-client copy holds the five modules Barbican uses, without the Pushgateway', () => {
    const copy = require(join(out, 'prom-client.cjs')) as Record<string, unknown>
    assert.deepEqual(Object.keys(copy).sort(), [
      'Counter',
      'Gauge',
      'Histogram',
      'Registry',
      'collectDefaultMetrics',
    ])
    const map = JSON.parse(readFileSync(join(out, 'prom-client.cjs.map'), 'utf8')) as {
      sources: string[]
    }
    const lib = map.sources.filter((s) => s.includes('node_modules/prom-client/'))
    assert.ok(lib.some((s) => s.endsWith('prom-client/lib/histogram.js')))
    assert.ok(!map.sources.some((s) => /pushgateway|summary|tdigest/.test(s)), lib.join(', '))
  })

  test('the undici copy requests through its Agent, and fetches through it too', async () => {
    type Copy = typeof import('undici')
    const copy = require(join(out, 'undici.cjs')) as Copy
    const server = createServer((req, res) => {
      let body = ''
      req.on('data', (chunk: Buffer) => {
        body += chunk.toString()
      })
      req.on('end', () => res.end(`${req.method} ${req.url} ${body}`))
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as { port: number }
    const agent = new copy.Agent()
    try {
      const response = await copy.request(`http://127.0.0.1:${port}/a?b=1`, {
        dispatcher: agent,
        method: 'POST',
        body: 'hi',
      })
      assert.equal(await response.body.text(), 'POST /a?b=1 hi')
      const fetched = await copy.fetch(`http://127.0.0.1:${port}/f`, { dispatcher: agent })
      assert.equal(await fetched.text(), 'GET /f ')
      assert.throws(() => copy.request('not a url', { dispatcher: agent }))
    } finally {
      await agent.close()
      server.close()
    }
  })
})
