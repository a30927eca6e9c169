import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

// scripts/build.js into a scratch folder: what bin/barbican.js and src/common/lazy-deps.ts rely on.
const BUILD = fileURLToPath(new URL('../../scripts/build.js', import.meta.url))
const require = createRequire(import.meta.url)
/** Each one-file copy in dist/ and the module it is bundled from (src/common/lazy-deps.ts). */
const LAZY = [
  ['undici', 'undici'],
  ['ws', 'ws'],
  ['jose', 'jose'],
  ['ajv', 'ajv/dist/2020'],
] as const

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

  test('writes the entry, the config and code workers and the stamp, all in one folder', () => {
    for (const file of ['main.js', 'config-worker.js', 'code-worker.js', '.build-started'])
      assert.ok(existsSync(join(out, file)), file)
    // No per-upstream watchdog script any more (ADR 030): confinement carries die-with-parent.
    assert.equal(existsSync(join(out, 'stdio-launcher.js')), false)
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

  test('pg and redis are never bundled: loaded from their packages, and only when configured', () => {
    for (const file of readdirSync(out).filter((f) => f.endsWith('.js') || f.endsWith('.cjs'))) {
      const code = readFileSync(join(out, file), 'utf8')
      const bundled = /Client has already been connected|RedisClientMultiCommand/.test(code)
      assert.ok(!bundled, `${file} holds pg or redis code`)
    }
    const main = readFileSync(join(out, 'main.js'), 'utf8')
    // The store modules that open them are chunks main.js reaches only by import().
    assert.ok(!/barbican_schema_version|pg_advisory_xact_lock|HMGET/.test(main), 'main.js')
  })

  test('zod and yaml are only in the config worker, not in what a gateway keeps loaded', () => {
    const markers = /\$ZodType|parseDocument/
    // `barbican import` writes YAML: its own chunk, which main.js loads only for that command.
    const importCommand = /replace "mcpServers" with/
    const holders: string[] = []
    for (const file of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const code = readFileSync(join(out, file), 'utf8')
      if (file === 'config-worker.js') assert.match(code, markers)
      else if (markers.test(code)) {
        assert.match(code, importCommand, `${file} holds zod or yaml but is not the import command`)
        holders.push(file)
      }
    }
    const main = readFileSync(join(out, 'main.js'), 'utf8')
    for (const file of holders) {
      assert.ok(main.includes(`import("./${file}")`), `${file} is loaded only on demand`)
      assert.ok(!main.includes(`from"./${file}"`) && !main.includes(`from "./${file}"`), file)
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
    for (const [name, entry] of LAZY) {
      const copy = require(join(out, `${name}.cjs`)) as Record<string, unknown>
      const original = require(entry) as Record<string, unknown>
      assert.equal(typeof copy, typeof original, name)
      assert.deepEqual(Object.keys(copy).sort(), Object.keys(original).sort(), name)
    }
  })

  test("each copy is bundled from its package's public entry, not from copied internals", () => {
    for (const [name, module] of LAZY) {
      const map = JSON.parse(readFileSync(join(out, `${name}.cjs.map`), 'utf8')) as {
        sources: string[]
      }
      const entry = require.resolve(module).replace(/.*node_modules\//, 'node_modules/')
      assert.ok(
        // ajv ships source maps, which esbuild follows back to its TypeScript (lib/*.ts).
        map.sources.some(
          (source) =>
            source.endsWith(entry) ||
            source.endsWith(entry.replace('/dist/', '/lib/').replace(/\.js$/, '.ts')),
        ),
        `${name}.cjs does not include ${entry}`,
      )
    }
    assert.deepEqual(
      readdirSync(out).filter((f) => f.endsWith('.cjs')),
      ['ajv.cjs', 'jose.cjs', 'prom-client.cjs', 'undici.cjs', 'ws.cjs'],
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

  test('the OpenTelemetry SDK is in a chunk that main.js and its static imports never load', () => {
    const marker = /BatchSpanProcessor/
    const staticClosure = new Set<string>()
    const pending = ['main.js']
    for (let file = pending.pop(); file !== undefined; file = pending.pop()) {
      if (staticClosure.has(file)) continue
      staticClosure.add(file)
      const code = readFileSync(join(out, file), 'utf8')
      for (const m of code.matchAll(/\bfrom\s*["']\.\/(chunk-[A-Z0-9]+\.js)["']/g))
        pending.push(m[1]!)
    }
    for (const file of staticClosure) {
      assert.doesNotMatch(readFileSync(join(out, file), 'utf8'), marker, file)
    }
    const chunks = readdirSync(out).filter((f) => f.startsWith('chunk-') && f.endsWith('.js'))
    assert.ok(chunks.some((f) => marker.test(readFileSync(join(out, f), 'utf8'))))
  })

  test('the build exports spans over OTLP/HTTP protobuf by default, flushed at SIGTERM', async () => {
    const received: { path: string | undefined; type: string | undefined; bytes: number }[] = []
    const receiver = createServer((req, res) => {
      let bytes = 0
      req.on('data', (chunk: Buffer) => {
        bytes += chunk.length
      })
      req.on('end', () => {
        received.push({ path: req.url, type: req.headers['content-type'], bytes })
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
      })
    })
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
    const { port } = receiver.address() as { port: number }
    const config = join(out, 'traced.json')
    writeFileSync(
      config,
      JSON.stringify({
        listen: '127.0.0.1:0',
        upstreams: { gone: { url: 'http://127.0.0.1:9/mcp' } },
      }),
    )
    // A file, not `-e`: the config loader's worker thread inherits the process's flags.
    const runner = join(out, 'run-traced.mjs')
    writeFileSync(
      runner,
      `const { main } = await import('./main.js'); process.exitCode = await main(['serve', '--config', ${JSON.stringify(config)}])\n`,
    )
    const child = spawn(process.execPath, [runner], {
      env: { ...process.env, OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` },
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    try {
      let stderr = ''
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no URL: ${stderr}`)), 20_000)
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString()
          const match = /serving .* at (http:\/\/\S+)\/mcp/.exec(stderr)
          if (match) {
            clearTimeout(timer)
            resolve(match[1]!)
          }
        })
      })
      assert.match(stderr, /tracing on/)
      const res = await fetch(`${url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'build-test', version: '1.0.0' },
          },
        }),
      })
      assert.equal(res.status, 200, await res.text())
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
      assert.equal(received.length, 1, JSON.stringify(received))
      assert.equal(received[0]!.path, '/v1/traces')
      assert.equal(received[0]!.type, 'application/x-protobuf')
      assert.ok(received[0]!.bytes > 0)
    } finally {
      child.kill()
      receiver.close()
    }
  })
})
