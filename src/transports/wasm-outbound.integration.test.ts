import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import { checkMemory, type WasmOutboundOptions, WasmOutboundTransport } from './wasm-outbound.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const FIXTURE = join(root, 'test/fixtures/wasm/servlet.wasm')
const FIXTURE_SHA256 = createHash('sha256').update(readFileSync(FIXTURE)).digest('hex')

function options(overrides: Partial<WasmOutboundOptions> = {}): WasmOutboundOptions {
  return {
    name: 'servlet',
    log: silentLogger,
    source: FIXTURE,
    sha256: FIXTURE_SHA256,
    allowedHosts: [],
    allowedPaths: {},
    config: {},
    maxMemoryMb: 16,
    maxModuleBytes: 1024 * 1024,
    callTimeoutMs: 10_000,
    ...overrides,
  }
}

/** A started transport and a way to send a request and await its answer. */
async function open(overrides: Partial<WasmOutboundOptions> = {}) {
  const transport = new WasmOutboundTransport(options(overrides))
  const waiting = new Map<unknown, (m: JsonRpcMessage) => void>()
  transport.onmessage = (m) => {
    if ('id' in m) waiting.get(m.id)?.(m)
  }
  await transport.start()
  let next = 1
  const request = (method: string, params?: Record<string, unknown>) => {
    const id = next++
    return new Promise<Record<string, unknown>>((resolve) => {
      waiting.set(id, (m) => resolve(m as unknown as Record<string, unknown>))
      void transport.send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) })
    })
  }
  return { transport, request }
}

function textOf(reply: Record<string, unknown>): string {
  const result = reply.result as { content: { text: string }[] }
  return result.content.map((c) => c.text).join('')
}

describe('Wasm outbound transport', () => {
  test('answers initialize, tools/list and tools/call from the servlet exports', async () => {
    const { transport, request } = await open()
    try {
      const init = await request('initialize', { protocolVersion: '2025-06-18' })
      assert.deepEqual((init.result as { capabilities: unknown }).capabilities, { tools: {} })
      assert.equal((init.result as { protocolVersion: string }).protocolVersion, '2025-06-18')
      const list = await request('tools/list')
      const names = (list.result as { tools: { name: string }[] }).tools.map((t) => t.name)
      assert.deepEqual(names, ['echo', 'fetch', 'spin'])
      const echo = await request('tools/call', {
        name: 'echo',
        arguments: { text: 'hi "there"' },
      })
      assert.equal(textOf(echo), 'hi "there"')
      const unknown = await request('resources/list')
      assert.equal((unknown.error as { code: number }).code, -32601)
    } finally {
      await transport.close()
    }
  })

  test('a request to a host the module was not granted fails before any connection', async () => {
    let connections = 0
    const listener = createServer((socket) => {
      connections++
      socket.destroy()
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    const port = (listener.address() as { port: number }).port
    const { transport, request } = await open({ allowedHosts: ['example.org'] })
    try {
      const reply = await request('tools/call', {
        name: 'fetch',
        arguments: { url: `http://127.0.0.1:${port}/secret` },
      })
      const result = reply.result as { isError: boolean }
      assert.equal(result.isError, true)
      assert.match(textOf(reply), /not allowed.*127\.0\.0\.1/)
      assert.equal(connections, 0)
      // The module's worker is replaced after the failure: the upstream keeps working.
      const echo = await request('tools/call', { name: 'echo', arguments: { text: 'still' } })
      assert.equal(textOf(echo), 'still')
    } finally {
      await transport.close()
      listener.close()
    }
  })

  test('a granted host is reached, through the guarded fetch', async () => {
    const { createServer: createHttpServer } = await import('node:http')
    const paths: string[] = []
    const listener = createHttpServer((req, res) => {
      paths.push(req.url ?? '')
      res.end('ok')
    })
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve))
    const port = (listener.address() as { port: number }).port
    // Loopback is special: reachable only because the entry lists it.
    const { transport, request } = await open({ allowedHosts: ['127.0.0.1'] })
    try {
      const reply = await request('tools/call', {
        name: 'fetch',
        arguments: { url: `http://127.0.0.1:${port}/granted` },
      })
      assert.equal(textOf(reply), 'fetched')
      assert.deepEqual(paths, ['/granted'])
    } finally {
      await transport.close()
      listener.close()
    }
  })

  test('a call past the time limit is stopped with ERR_UPSTREAM_TIMEOUT', async () => {
    const { transport, request } = await open({ callTimeoutMs: 300 })
    try {
      const started = Date.now()
      const reply = await request('tools/call', { name: 'spin', arguments: {} })
      const error = reply.error as { message: string; data: { barbicanCode: string } }
      assert.equal(error.data.barbicanCode, 'ERR_UPSTREAM_TIMEOUT')
      assert.ok(Date.now() - started < 5_000)
      const echo = await request('tools/call', { name: 'echo', arguments: { text: 'after' } })
      assert.equal(textOf(echo), 'after')
    } finally {
      await transport.close()
    }
  })

  test('refuses a module that is not pinned, or whose bytes differ from the pin', async () => {
    await assert.rejects(new WasmOutboundTransport(options({ sha256: undefined })).start(), {
      code: 'ERR_LAUNCH_REFUSED',
      message: new RegExp(`not pinned in barbican.lock \\(its sha256 is ${FIXTURE_SHA256}\\)`),
    })
    await assert.rejects(new WasmOutboundTransport(options({ sha256: '0'.repeat(64) })).start(), {
      code: 'ERR_LAUNCH_REFUSED',
      message: /but barbican.lock pins 0000/,
    })
  })

  test('refuses a module larger than maxModuleBytes', async () => {
    await assert.rejects(new WasmOutboundTransport(options({ maxModuleBytes: 100 })).start(), {
      code: 'ERR_LAUNCH_REFUSED',
      message: /larger than maxModuleBytes \(100\)/,
    })
  })
})

describe('Wasm memory ceiling', () => {
  const header = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00]
  const module = (...sections: number[][]) => new Uint8Array([...header, ...sections.flat()])

  test('accepts a declared maximum within the ceiling', () => {
    // memory section: one memory, min 1 page, max 16 pages (1 MiB).
    checkMemory(module([0x05, 0x04, 0x01, 0x01, 0x01, 0x10]), 1, 'm.wasm')
    checkMemory(readFileSync(FIXTURE), 1, FIXTURE)
  })

  test('refuses a maximum over the ceiling, a memory without maximum and an imported one', () => {
    assert.throws(() => checkMemory(module([0x05, 0x04, 0x01, 0x01, 0x01, 0x20]), 1, 'm'), {
      code: 'ERR_LAUNCH_REFUSED',
      message: /may grow its memory to 2 MiB, over maxMemoryMb \(1\)/,
    })
    assert.throws(() => checkMemory(module([0x05, 0x03, 0x01, 0x00, 0x01]), 1, 'm'), {
      message: /without a maximum/,
    })
    // import section: one import "a"."b", kind memory.
    const imported = [0x02, 0x08, 0x01, 0x01, 0x61, 0x01, 0x62, 0x02, 0x00, 0x01]
    assert.throws(() => checkMemory(module(imported), 1, 'm'), { message: /imports its memory/ })
    assert.throws(() => checkMemory(new Uint8Array([1, 2, 3]), 1, 'm'), {
      message: /not a Wasm module/,
    })
  })
})

describe('Wasm fixture build', () => {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-wasm-build-'))
  after(() => rmSync(dir, { recursive: true, force: true }))
  test('scripts/build-wasm-fixture.js reproduces the committed module byte for byte', () => {
    const out = join(dir, 'servlet.wasm')
    execFileSync(process.execPath, [join(root, 'scripts/build-wasm-fixture.js'), out], {
      cwd: root,
    })
    const built = createHash('sha256').update(readFileSync(out)).digest('hex')
    assert.equal(built, FIXTURE_SHA256)
  })
})
