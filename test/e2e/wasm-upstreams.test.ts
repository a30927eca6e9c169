/**
 * A Wasm servlet as an upstream, end to end: `barbican lock` pins the module, and the official
 * SDK client lists and calls its tools through Barbican over every inbound transport (Streamable
 * HTTP, legacy HTTP+SSE, WebSocket, and stdio through `barbican stdio`). Two upstreams run the
 * same module, so their tools are namespaced like any other upstream's.
 */
import assert from 'node:assert/strict'
import {
  appendFileSync,
  copyFileSync,
  mkdtempSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { memoryStore } from '../../src/store/memory.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { runCli } from '../support/cli.ts'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const barbicanBin = join(root, 'bin/barbican.js')

const TRANSPORTS: Record<string, (s: RunningServer, configFile: string) => Transport> = {
  'Streamable HTTP': (s) => new StreamableHTTPClientTransport(new URL(`${s.url}/mcp`)),
  'legacy HTTP+SSE': (s) => new SSEClientTransport(new URL(`${s.url}/sse`)),
  WebSocket: (s) => new WebSocketClientTransport(new URL(`${s.url.replace('http', 'ws')}/ws`)),
  'stdio (barbican stdio)': (_s, configFile) =>
    new StdioClientTransport({
      command: process.execPath,
      args: [barbicanBin, 'stdio', '--config', configFile],
      stderr: 'ignore',
    }),
}

describe('Wasm upstreams through Barbican', () => {
  let dir: string
  let configFile: string
  let server: RunningServer
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'barbican-wasm-'))
    copyFileSync(join(root, 'test/fixtures/wasm/servlet.wasm'), join(dir, 'servlet.wasm'))
    configFile = join(dir, 'barbican.json')
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      log: { level: 'error' },
      upstreams: {
        calc: { wasm: './servlet.wasm', maxMemoryMb: 1 },
        web: { wasm: './servlet.wasm', allowedHosts: ['example.org'], maxMemoryMb: 1 },
      },
    })
    writeFileSync(configFile, text)
    const locked = await runCli(['lock', '--config', configFile])
    assert.equal(locked.code, 0, locked.stdout + locked.stderr)
    const { config } = parseConfigText(text, { file: configFile })
    server = await startServer(config, silentLogger, {
      store: memoryStore(),
      lockfilePath: join(dir, 'barbican.lock'),
    })
  })
  after(async () => {
    await server?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  test('barbican lock pins each module by its SHA-256', () => {
    const lock = JSON.parse(readFileSync(join(dir, 'barbican.lock'), 'utf8'))
    assert.equal(lock.upstreams.calc.runner, 'wasm')
    assert.equal(lock.upstreams.calc.path, join(dir, 'servlet.wasm'))
    assert.match(lock.upstreams.calc.sha256, /^[0-9a-f]{64}$/)
  })

  for (const [name, transport] of Object.entries(TRANSPORTS)) {
    test(`over ${name}: lists the namespaced tools and calls them`, async () => {
      const client = new Client({ name: 'wasm-e2e', version: '1.0.0' })
      await client.connect(transport(server, configFile))
      try {
        const { tools } = await client.listTools()
        const names = tools.map((t) => t.name).sort()
        for (const tool of ['calc__echo', 'calc__fetch', 'web__echo', 'web__fetch']) {
          assert.ok(names.includes(tool), `${tool} missing from ${names.join(', ')}`)
        }
        const echo = await client.callTool({
          name: 'calc__echo',
          arguments: { text: `hi over ${name}` },
        })
        assert.equal(textOf(echo), `hi over ${name}`)
        // The module's grants hold through Barbican: no host was granted to `calc`.
        const fetched = await client.callTool({
          name: 'calc__fetch',
          arguments: { url: 'http://169.254.169.254/latest/meta-data/' },
        })
        assert.equal(fetched.isError, true)
        assert.match(textOf(fetched), /not allowed/)
      } finally {
        await client.close()
      }
    })
  }
})

describe('a Wasm module that no longer matches barbican.lock', () => {
  test('is refused, and the other upstreams keep working', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-wasm-tampered-'))
    try {
      copyFileSync(join(root, 'test/fixtures/wasm/servlet.wasm'), join(dir, 'good.wasm'))
      copyFileSync(join(root, 'test/fixtures/wasm/servlet.wasm'), join(dir, 'tampered.wasm'))
      const configFile = join(dir, 'barbican.json')
      const text = JSON.stringify({
        listen: '127.0.0.1:0',
        log: { level: 'error' },
        upstreams: {
          good: { wasm: './good.wasm', maxMemoryMb: 1 },
          tampered: { wasm: './tampered.wasm', maxMemoryMb: 1 },
        },
      })
      writeFileSync(configFile, text)
      assert.equal((await runCli(['lock', '--config', configFile])).code, 0)
      appendFileSync(join(dir, 'tampered.wasm'), Buffer.from([0]))
      const { config } = parseConfigText(text, { file: configFile })
      const server = await startServer(config, silentLogger, {
        store: memoryStore(),
        lockfilePath: join(dir, 'barbican.lock'),
      })
      const client = new Client({ name: 'wasm-e2e', version: '1.0.0' })
      try {
        await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
        const names = (await client.listTools()).tools.map((t) => t.name)
        assert.ok(names.includes('good__echo'), names.join(', '))
        assert.ok(!names.some((n) => n.startsWith('tampered__')), names.join(', '))
        const ready = await fetch(`${server.url}/readyz`)
        assert.match(await ready.text(), /tampered.*sha256.*barbican\.lock pins/s)
      } finally {
        await client.close()
        await server.stop()
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
