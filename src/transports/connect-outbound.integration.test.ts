import assert from 'node:assert/strict'
import type { ServerResponse } from 'node:http'
import { describe, test } from 'node:test'
import {
  driveEverything,
  fixture,
  Inbox,
  startEverything,
} from '../../test/fixtures/upstream-helpers.ts'
import { event, json, scriptedServer, sse } from '../../test/fixtures/upstream-http-server.ts'
import { startWsEcho } from '../../test/fixtures/upstream-ws-echo.ts'
import { BarbicanError } from '../common/errors.ts'
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'
import { silentLogger } from '../telemetry/log.ts'
import {
  AutoHttpTransport,
  createOutboundTransport,
  type OutboundSpec,
} from './connect-outbound.ts'
import { HttpOutboundTransport } from './http-outbound.ts'
import { SseOutboundTransport } from './sse-outbound.ts'
import { StdioOutboundTransport } from './stdio-outbound.ts'
import { WebSocketOutboundTransport } from './websocket-outbound.ts'

const deps = { name: 'up', log: silentLogger, limits: DEFAULT_JSON_LIMITS }

describe('createOutboundTransport', () => {
  test('builds the transport each spec names', () => {
    const specs: Array<[OutboundSpec, unknown]> = [
      [{ transport: 'stdio', command: process.execPath, args: [] }, StdioOutboundTransport],
      [{ transport: 'streamable-http', url: 'http://127.0.0.1:1/mcp' }, HttpOutboundTransport],
      [{ transport: 'sse', url: 'http://127.0.0.1:1/sse' }, SseOutboundTransport],
      [{ transport: 'websocket', url: 'ws://127.0.0.1:1/ws' }, WebSocketOutboundTransport],
      [{ transport: 'auto', url: 'wss://127.0.0.1:1/ws' }, WebSocketOutboundTransport],
      [{ transport: 'auto', url: 'https://127.0.0.1:1/mcp' }, AutoHttpTransport],
    ]
    for (const [spec, type] of specs) {
      assert.ok(
        createOutboundTransport(spec, deps) instanceof (type as typeof Object),
        spec.transport,
      )
    }
  })

  test('refuses a URL scheme no transport speaks', () => {
    assert.throws(
      () => createOutboundTransport({ transport: 'auto', url: 'ftp://127.0.0.1/x' }, deps),
      (err) => err instanceof BarbicanError && err.code === 'ERR_CONFIG_INVALID',
    )
  })

  test('auto speaks Streamable HTTP to the official everything server', async () => {
    const server = await startEverything('streamableHttp')
    const transport = createOutboundTransport(
      { transport: 'auto', url: `${server.origin}/mcp` },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      const drive = await driveEverything(transport, inbox)
      assert.deepEqual(drive.echo, [{ type: 'text', text: 'Echo: through the gate' }])
      assert.equal(transport.kind, 'streamable-http')
      assert.ok(transport.sessionId)
    } finally {
      await transport.close()
      await server.stop()
    }
  })

  test('auto falls back to HTTP+SSE for the everything server in sse mode and replays the first message', async () => {
    const server = await startEverything('sse')
    const transport = createOutboundTransport(
      { transport: 'auto', url: `${server.origin}/sse` },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      const drive = await driveEverything(transport, inbox, '2024-11-05')
      assert.deepEqual(drive.echo, [{ type: 'text', text: 'Echo: through the gate' }])
      assert.equal(transport.kind, 'sse')
      assert.deepEqual(inbox.errors, [])
    } finally {
      await transport.close()
      await server.stop()
    }
    assert.equal(inbox.closed, true)
  })

  test('auto keeps the order of messages sent while it decides', async () => {
    let stream: ServerResponse | undefined
    const server = await scriptedServer((req, res) => {
      if (req.method === 'GET') {
        sse(res)
        res.write('event: endpoint\ndata: /post\n\n')
        stream = res
        return
      }
      if (req.url === '/mcp') return void res.writeHead(405).end()
      res.writeHead(202).end()
      const message = JSON.parse(req.body)
      if (message.id !== undefined) event(stream!, { jsonrpc: '2.0', id: message.id, result: {} })
    })
    const transport = createOutboundTransport(
      { transport: 'auto', url: server.url },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      const first = transport.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} })
      const second = transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
      const third = transport.send({ jsonrpc: '2.0', id: 2, method: 'tools/list' })
      await Promise.all([first, second, third])
      await inbox.response(2)
    } finally {
      await transport.close()
      await server.close()
    }
    const posted = server.requests
      .filter((r) => r.url === '/post')
      .map((r) => JSON.parse(r.body).method)
    assert.deepEqual(posted, ['initialize', 'notifications/initialized', 'tools/list'])
  })

  test('auto decides nothing from a first message that got no HTTP answer', async () => {
    let posts = 0
    let stream: ServerResponse | undefined
    const server = await scriptedServer((req, res, raw) => {
      if (req.method === 'GET') {
        sse(res)
        res.write('event: endpoint\ndata: /post\n\n')
        stream = res
        return
      }
      if (req.url === '/mcp' && ++posts === 1) return void raw.socket.destroy()
      if (req.url === '/mcp') return void res.writeHead(405).end()
      res.writeHead(202).end()
      event(stream!, { jsonrpc: '2.0', id: JSON.parse(req.body).id, result: {} })
    })
    const transport = createOutboundTransport(
      { transport: 'auto', url: server.url },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} })
      const failed = await inbox.response(1)
      assert.equal((failed as { error?: { code: number } }).error?.code, -32005)
      assert.equal(transport.kind, 'unknown')
      await transport.send({ jsonrpc: '2.0', id: 2, method: 'initialize', params: {} })
      assert.deepEqual(await inbox.response(2), { jsonrpc: '2.0', id: 2, result: {} })
      assert.equal(transport.kind, 'sse')
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('auto closes at once while its first message gets no answer at all', async () => {
    // Accepts the request and never answers: close must not wait for the exchange's timeout.
    const server = await scriptedServer(() => {})
    const transport = createOutboundTransport(
      { transport: 'auto', url: server.url },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      // The close rejects the send it cut short.
      const sent = transport.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} })
      sent.catch(() => {})
      while (server.requests.length === 0) await new Promise((r) => setTimeout(r, 10))
      const started = Date.now()
      await transport.close()
      assert.ok(Date.now() - started < 2_000, `close took ${Date.now() - started} ms`)
      assert.equal(inbox.closed, true)
    } finally {
      await server.close()
    }
  })

  test('auto does not fall back when a 404 carries a JSON-RPC error', async () => {
    const server = await scriptedServer((req, res) => {
      json(res, 404, {
        jsonrpc: '2.0',
        id: JSON.parse(req.body).id,
        error: { code: -32601, message: 'Method not found' },
      })
    })
    const transport = createOutboundTransport(
      { transport: 'auto', url: server.url },
      deps,
    ) as AutoHttpTransport
    const inbox = new Inbox(transport)
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'server/discover' })
      const reply = await inbox.response(1)
      assert.ok('error' in reply)
      assert.equal(reply.error.code, -32601)
      assert.equal(transport.kind, 'streamable-http')
    } finally {
      await transport.close()
      await server.close()
    }
    assert.equal(server.requests.filter((r) => r.method === 'GET').length, 0)
  })

  test('auto with a ws:// URL speaks WebSocket', async () => {
    const server = await startWsEcho()
    const transport = createOutboundTransport({ transport: 'auto', url: server.url }, deps)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'echo', params: { via: 'auto' } })
      assert.deepEqual(await inbox.response(1), { jsonrpc: '2.0', id: 1, result: { via: 'auto' } })
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('stdio specs pass their shutdown settings through', async () => {
    const transport = createOutboundTransport(
      {
        transport: 'stdio',
        command: process.execPath,
        args: [fixture('upstream-stubborn-wrapper.ts')],
      },
      { ...deps, stdio: { closeGraceMs: 50, termGraceMs: 50 } },
    ) as StdioOutboundTransport
    const inbox = new Inbox(transport)
    await transport.start()
    // The wrapper announces itself once its SIGTERM handler is in place.
    await inbox.until(() => inbox.messages[0])
    const began = Date.now()
    await transport.close()
    assert.ok(Date.now() - began < 1500, 'short grace periods were used')
    assert.equal(transport.exitStatus?.signal, 'SIGKILL')
  })
})
