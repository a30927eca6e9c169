import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { driveEverything, Inbox, startEverything } from '../../test/fixtures/upstream-helpers.ts'
import {
  event,
  json,
  type ScriptedServer,
  scriptedServer,
  sse,
} from '../../test/fixtures/upstream-http-server.ts'
import { hasCode } from '../../test/support/errors.ts'
import { DEFAULT_JSON_LIMITS, type JsonLimits } from '../protocol/json-limits.ts'
import type { JsonRpcErrorResponse } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import { type HttpOutboundOptions, HttpOutboundTransport } from './http-outbound.ts'

function connect(server: ScriptedServer, extra: Partial<HttpOutboundOptions> = {}) {
  return new HttpOutboundTransport({
    name: 'scripted',
    url: server.url,
    log: silentLogger,
    limits: DEFAULT_JSON_LIMITS,
    ...extra,
  })
}

const request = (id: number, method = 'tools/call') => ({ jsonrpc: '2.0' as const, id, method })
const result = (id: unknown, value: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id,
  result: value,
})

function barbicanCode(reply: unknown): unknown {
  const error = (reply as JsonRpcErrorResponse).error
  return (error?.data as { barbicanCode?: unknown } | undefined)?.barbicanCode
}

describe('Streamable HTTP outbound transport', () => {
  test('carries a raw MCP exchange with the official everything server', async () => {
    const server = await startEverything('streamableHttp')
    const transport = new HttpOutboundTransport({
      name: 'everything',
      url: `${server.origin}/mcp`,
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
    })
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      const drive = await driveEverything(transport, inbox)
      assert.equal(drive.protocolVersion, '2025-06-18')
      assert.ok(drive.toolNames.includes('echo'))
      assert.deepEqual(drive.echo, [{ type: 'text', text: 'Echo: through the gate' }])
      assert.match(transport.sessionId ?? '', /^[0-9a-f-]{36}$/)
      assert.deepEqual(inbox.errors, [])
    } finally {
      await transport.close()
      await server.stop()
    }
    assert.equal(inbox.closed, true)
  })

  test('echoes the session id, protocol version and per-message headers, then DELETEs the session', async () => {
    const server = await scriptedServer((req, res) => {
      if (req.method === 'GET') return void res.writeHead(405).end()
      if (req.method === 'DELETE') return void res.writeHead(200).end()
      const message = JSON.parse(req.body)
      if (message.method === 'initialize') {
        return json(res, 200, result(message.id), { 'mcp-session-id': 'sess-1' })
      }
      if (message.id === undefined) return void res.writeHead(202).end()
      json(res, 200, result(message.id))
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {} })
      await inbox.response(1)
      assert.equal(transport.sessionId, 'sess-1')
      transport.protocolVersion = '2025-11-25'
      await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
      await transport.send(request(2), {
        headers: { 'Mcp-Method': 'tools/call', 'Mcp-Name': 'echo', 'MCP-Protocol-Version': 'x' },
      })
      await inbox.response(2)
    } finally {
      await transport.close()
      await server.close()
    }
    const [init, initialized, call] = server.requests.filter((r) => r.method === 'POST')
    assert.equal(init?.headers.accept, 'application/json, text/event-stream')
    assert.equal(init?.headers['content-type'], 'application/json')
    assert.equal(init?.headers['mcp-session-id'], undefined)
    assert.equal(initialized?.headers['mcp-session-id'], 'sess-1')
    assert.equal(initialized?.headers['mcp-protocol-version'], '2025-11-25')
    assert.equal(call?.headers['mcp-method'], 'tools/call')
    assert.equal(call?.headers['mcp-name'], 'echo')
    assert.equal(call?.headers['mcp-protocol-version'], 'x', 'a per-message header wins')
    // The standalone stream was tried after initialized, and its 405 was no error.
    assert.equal(server.requests.filter((r) => r.method === 'GET').length, 1)
    assert.deepEqual(inbox.errors, [])
    const last = server.requests.at(-1)
    assert.equal(last?.method, 'DELETE')
    assert.equal(last?.headers['mcp-session-id'], 'sess-1')
  })

  test('delivers every event of an SSE answer, in order', async () => {
    const server = await scriptedServer((req, res) => {
      const message = JSON.parse(req.body)
      sse(res)
      event(res, { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })
      event(res, { jsonrpc: '2.0', method: 'notifications/message', params: { data: 'x' } })
      event(res, result(message.id, { done: true }))
      res.end()
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(5))
      await inbox.response(5)
    } finally {
      await transport.close()
      await server.close()
    }
    assert.deepEqual(
      inbox.messages.map((m) => ('method' in m ? m.method : m.id)),
      ['notifications/progress', 'notifications/message', 5],
    )
  })

  test('delivers SSE events that arrive in pieces, split inside a character', async () => {
    const server = await scriptedServer(async (req, res) => {
      const id = JSON.parse(req.body).id
      sse(res)
      const progress = Buffer.from(
        `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { data: 'é😀' } })}\n\n`,
      )
      const answer = Buffer.from(`data: ${JSON.stringify(result(id, { text: 'ça' }))}\n\n`)
      const pause = () => new Promise((resolve) => setTimeout(resolve, 15))
      const split = progress.indexOf(Buffer.from('😀')) + 2 // inside the 4-byte character
      res.write(progress.subarray(0, split))
      await pause()
      res.write(progress.subarray(split))
      await pause()
      res.write(answer.subarray(0, 10))
      await pause()
      res.end(answer.subarray(10))
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(9))
      assert.deepEqual(await inbox.response(9), result(9, { text: 'ça' }))
    } finally {
      await transport.close()
      await server.close()
    }
    assert.deepEqual(inbox.messages[0], {
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { data: 'é😀' },
    })
    assert.deepEqual(inbox.errors, [])
  })

  test('reuses keep-alive connections for consecutive requests', async () => {
    const server = await scriptedServer((req, res) =>
      json(res, 200, result(JSON.parse(req.body).id)),
    )
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      for (let id = 1; id <= 6; id++) {
        await transport.send(request(id))
        await inbox.response(id)
      }
    } finally {
      await transport.close()
      await server.close()
    }
    // Without keep-alive this would be 6; the pool may open a second one while the first frees.
    assert.ok(server.connections <= 2, `${server.connections} connections`)
  })

  test('reads an answered SSE stream to its end, so its connection is reused', async () => {
    let ended: Promise<void> = Promise.resolve()
    const server = await scriptedServer((req, res) => {
      sse(res)
      event(res, result(JSON.parse(req.body).id))
      ended = new Promise((resolve) => res.once('close', () => resolve()))
      // The server ends the stream a little after the answer, as real servers may.
      setTimeout(() => res.end(), 20)
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      for (let id = 1; id <= 5; id++) {
        await transport.send(request(id))
        await inbox.response(id)
        // Let the stream's end reach the client's pool before the next request.
        await ended
        await new Promise((resolve) => setTimeout(resolve, 30))
      }
    } finally {
      await transport.close()
      await server.close()
    }
    // Cutting the stream at the answer needs a connection per request (5); reading it to its
    // end needs one (a second only if the machine is too slow for the waits above).
    assert.ok(server.connections <= 2, `${server.connections} connections`)
    assert.deepEqual(inbox.errors, [])
  })

  test('cuts an answered SSE stream the server keeps open, after the linger time', async () => {
    let answeredAt = 0
    let closedAt = 0
    const closed = new Promise<void>((resolve) => {
      void scriptedServer((req, res) => {
        sse(res)
        event(res, result(JSON.parse(req.body).id))
        answeredAt = Date.now()
        res.on('close', () => {
          closedAt = Date.now()
          resolve()
        })
      }).then((server) => start(server))
    })
    let stop = async () => {}
    const start = async (server: ScriptedServer) => {
      const transport = connect(server, { answeredStreamLingerMs: 100, requestTimeoutMs: 30_000 })
      const inbox = new Inbox(transport)
      stop = async () => {
        await transport.close()
        await server.close()
      }
      await transport.send(request(1))
      assert.deepEqual(await inbox.response(1), result(1))
    }
    try {
      await closed
    } finally {
      await stop()
    }
    const lingered = closedAt - answeredAt
    assert.ok(lingered >= 80 && lingered < 5_000, `stream cut ${lingered} ms after the answer`)
  })

  test('times out each request at its own deadline, the earliest first', async () => {
    const server = await scriptedServer(() => {
      // Never respond.
    })
    const transport = connect(server, { requestTimeoutMs: 30_000 })
    const inbox = new Inbox(transport)
    const sent = Date.now()
    try {
      // `send` resolves at the response headers, which never come: not awaited.
      const sends = [
        transport.send(request(1), { timeoutMs: 400 }),
        transport.send(request(2), { timeoutMs: 100 }),
        transport.send(request(3)),
      ]
      for (const sent of sends) sent.catch(() => {})
      const second = await inbox.response(2, 5000)
      const secondAt = Date.now() - sent
      const first = await inbox.response(1, 5000)
      const firstAt = Date.now() - sent
      assert.equal(barbicanCode(second), 'ERR_UPSTREAM_TIMEOUT')
      assert.equal(barbicanCode(first), 'ERR_UPSTREAM_TIMEOUT')
      assert.ok(secondAt >= 90 && secondAt < 380, `request 2 timed out after ${secondAt} ms`)
      assert.ok(firstAt >= 390, `request 1 timed out after ${firstAt} ms`)
      assert.equal(
        inbox.messages.filter((m) => 'id' in m && m.id === 3).length,
        0,
        'request 3 is still waiting',
      )
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('answers a request the server never answers with a timeout error, without hanging', async () => {
    const server = await scriptedServer(() => {
      // Never respond.
    })
    const transport = connect(server, { requestTimeoutMs: 150 })
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1, 5000)
      assert.ok('error' in reply)
      assert.equal(reply.error.code, -32006)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_TIMEOUT')
      // Reported once, on the reply its caller waits for; not again through onerror (ADR 120).
      assert.deepEqual(inbox.errors, [])
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('times out a stream that stops short of the answer', async () => {
    const server = await scriptedServer((_req, res) => {
      sse(res)
      event(res, { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1), { timeoutMs: 150 })
      const reply = await inbox.response(1, 5000)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_TIMEOUT')
      assert.equal(inbox.messages.length, 2, 'the progress event, then the timeout')
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('turns an HTTP error into an error reply for a request and a rejection for a notification', async () => {
    const server = await scriptedServer((_req, res) => {
      res.writeHead(500, { 'content-type': 'text/plain' }).end('boom')
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1)
      assert.ok('error' in reply)
      assert.equal(reply.error.code, -32005)
      assert.deepEqual(reply.error.data, {
        barbicanCode: 'ERR_UPSTREAM_UNAVAILABLE',
        details: { httpStatus: 500 },
      })
      assert.ok(inbox.errors.some(hasCode('ERR_UPSTREAM_UNAVAILABLE')))
      await assert.rejects(
        transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' }),
        hasCode('ERR_UPSTREAM_UNAVAILABLE'),
      )
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test("passes on the server's own JSON-RPC error from an HTTP 404, and stays open", async () => {
    const server = await scriptedServer((_req, res) => {
      json(
        res,
        404,
        { jsonrpc: '2.0', id: null, error: { code: -32601, message: 'Method not found' } },
        { 'mcp-session-id': 'ignored-on-errors' },
      )
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(9, 'nope/nope'))
      const reply = await inbox.response(9)
      assert.deepEqual(reply, {
        jsonrpc: '2.0',
        id: 9,
        error: { code: -32601, message: 'Method not found' },
      })
      assert.equal(inbox.closed, false)
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('closes the connection when the server forgets its session (404 without a body)', async () => {
    const server = await scriptedServer((req, res) => {
      const message = JSON.parse(req.body)
      if (message.id === 1) return json(res, 200, result(1), { 'mcp-session-id': 'gone' })
      res.writeHead(404).end()
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      await inbox.response(1)
      await transport.send(request(2))
      const reply = await inbox.response(2)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_CLOSED')
      await inbox.closing()
    } finally {
      await transport.close()
      await server.close()
    }
    assert.equal(
      server.requests.some((r) => r.method === 'DELETE'),
      false,
      'an expired session is not deleted',
    )
  })

  test('refuses an answer larger than maxMessageBytes', async () => {
    const limits: JsonLimits = { ...DEFAULT_JSON_LIMITS, maxMessageBytes: 1024 }
    const server = await scriptedServer((req, res) =>
      json(res, 200, result(JSON.parse(req.body).id, { big: 'z'.repeat(10_000) })),
    )
    const transport = connect(server, { limits })
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_PROTOCOL')
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('resumes a dropped stream with GET and Last-Event-ID after the retry delay', async () => {
    let droppedAt = 0
    const server = await scriptedServer((req, res) => {
      if (req.method === 'POST') {
        sse(res)
        // A priming event (id, no data) with a retry hint, then the server drops the stream.
        res.write('retry: 60\nid: ev-1\ndata:\n\n')
        droppedAt = Date.now()
        res.end()
        return
      }
      assert.equal(req.headers['last-event-id'], 'ev-1')
      sse(res)
      event(res, result(1, { resumed: true }), 'ev-2')
      res.end()
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1)
      assert.deepEqual(reply, result(1, { resumed: true }))
    } finally {
      await transport.close()
      await server.close()
    }
    const get = server.requests.find((r) => r.method === 'GET')
    assert.equal(get?.headers['last-event-id'], 'ev-1')
    assert.equal(get?.headers.accept, 'text/event-stream')
    assert.ok(get!.at - droppedAt >= 55, 'the retry delay was honoured')
  })

  test('fails a request whose stream ends without an answer or an event id', async () => {
    const server = await scriptedServer((_req, res) => {
      sse(res)
      res.end()
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_CLOSED')
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test("aborts the POST when the caller's signal aborts, delivering nothing", async () => {
    let serverSawClose: () => void = () => {}
    const closed = new Promise<void>((resolve) => {
      serverSawClose = resolve
    })
    const server = await scriptedServer((_req, res) => {
      sse(res)
      res.on('close', serverSawClose)
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    const controller = new AbortController()
    try {
      await transport.send(request(1), { signal: controller.signal })
      controller.abort()
      await closed
      assert.deepEqual(inbox.messages, [])
      assert.deepEqual(inbox.errors, [])
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('delivers messages from the standalone GET stream opened after initialization', async () => {
    const server = await scriptedServer((req, res) => {
      if (req.method === 'GET') {
        sse(res)
        event(res, { jsonrpc: '2.0', method: 'notifications/tools/list_changed' }, 'g-1')
        return
      }
      if (req.method === 'DELETE') return void res.writeHead(200).end()
      res.writeHead(202).end()
    })
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
      const notification = await inbox.until(() => inbox.messages[0])
      assert.deepEqual(notification, { jsonrpc: '2.0', method: 'notifications/tools/list_changed' })
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('refuses a header value that would split the request, before sending anything', async () => {
    const server = await scriptedServer((req, res) =>
      json(res, 200, result(JSON.parse(req.body).id)),
    )
    const transport = connect(server)
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1), { headers: { 'mcp-name': 'echo\r\nx-injected: 1' } })
      const reply = await inbox.response(1)
      assert.equal(barbicanCode(reply), 'ERR_INVALID_PARAMS')
    } finally {
      await transport.close()
      await server.close()
    }
    assert.equal(server.requests.length, 0)
  })

  test('answers requests with ERR_UPSTREAM_UNAVAILABLE when nothing listens', async () => {
    const server = await scriptedServer(() => {})
    const url = server.url
    await server.close()
    const transport = new HttpOutboundTransport({
      name: 'down',
      url,
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
    })
    const inbox = new Inbox(transport)
    try {
      await transport.send(request(1))
      const reply = await inbox.response(1)
      assert.equal(barbicanCode(reply), 'ERR_UPSTREAM_UNAVAILABLE')
    } finally {
      await transport.close()
    }
    await assert.rejects(transport.send(request(2)), hasCode('ERR_UPSTREAM_CLOSED'))
  })
})
