import assert from 'node:assert/strict'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { ListRootsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { openSse, rawRequest, within } from '../../test/fixtures/inbound-http-client.ts'
import { startInbound, type TestInbound } from '../../test/fixtures/inbound-server.ts'
import { errorOf } from '../../test/support/errors.ts'

const POST_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
}

function initialize(version = '2025-06-18') {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 't', version: '1' } },
  })
}

/** Opens a legacy session by hand; returns its id. */
async function openSession(
  t: TestInbound,
  version = '2025-06-18',
  extra: Record<string, string> = {},
) {
  const res = await rawRequest(`${t.url}/mcp`, {
    method: 'POST',
    headers: { ...POST_HEADERS, ...extra },
    body: initialize(version),
  })
  assert.equal(res.status, 200)
  const id = res.headers['mcp-session-id']
  assert.equal(typeof id, 'string')
  return id as string
}

function post(
  t: TestInbound,
  sessionId: string | undefined,
  body: unknown,
  extra: Record<string, string> = {},
) {
  return rawRequest(`${t.url}/mcp`, {
    method: 'POST',
    headers: { ...POST_HEADERS, ...(sessionId ? { 'mcp-session-id': sessionId } : {}), ...extra },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  })
}

const call = (id: number, name: string, args: Record<string, unknown> = {}, meta?: object) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args, ...(meta ? { _meta: meta } : {}) },
})

describe('Streamable HTTP inbound with the official SDK client', () => {
  it('initializes, lists and calls tools, receives related progress and answers a server request', async () => {
    const t = await startInbound()
    const client = new Client(
      { name: 'sdk-test', version: '1.0.0' },
      { capabilities: { roots: { listChanged: false } } },
    )
    client.setRequestHandler(ListRootsRequestSchema, () => ({
      roots: [{ uri: 'file:///tmp', name: 'tmp' }],
    }))
    const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/mcp/alpha`))
    try {
      await within(client.connect(transport), 5000, 'SDK initialize')
      assert.equal(typeof transport.sessionId, 'string')
      const tools = await client.listTools()
      assert.equal(tools.tools.length, 4)
      const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } })
      assert.deepEqual(echo.content, [{ type: 'text', text: 'alpha:hi' }])
      const progress: number[] = []
      const withProgress = await client.callTool(
        { name: 'progress', arguments: { count: 3 } },
        undefined,
        {
          onprogress: (p) => progress.push(p.progress),
        },
      )
      assert.deepEqual(withProgress.content, [{ type: 'text', text: 'progressed 3' }])
      assert.deepEqual(progress, [1, 2, 3])
      const asked = await client.callTool({ name: 'ask', arguments: {} })
      assert.deepEqual(asked.content, [{ type: 'text', text: 'roots 1' }])
      const connection = t.handler.connections[0]
      assert.equal(connection?.info.kind, 'streamable-http')
      assert.equal(connection?.info.server, 'alpha')
      await transport.terminateSession()
      assert.equal(connection?.closed, true)
    } finally {
      await client.close()
      await t.close()
    }
  })
})

describe('Streamable HTTP inbound sessions', () => {
  it('answers a related notification by switching the POST to an SSE stream, and plain calls as JSON', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const plain = await post(t, sessionId, call(1, 'echo', { text: 'a' }))
      assert.equal(plain.headers['content-type'], 'application/json')
      const stream = await openSse(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...POST_HEADERS, 'mcp-session-id': sessionId },
        body: JSON.stringify(call(2, 'progress', { count: 2 }, { progressToken: 'p' })),
      })
      assert.equal(stream.headers['content-type'], 'text/event-stream')
      const events = [await stream.next(), await stream.next(), await stream.next()]
      assert.deepEqual(
        events.map((e) => JSON.parse(e.data).method ?? 'response'),
        ['notifications/progress', 'notifications/progress', 'response'],
      )
      await within(stream.ended, 2000, 'the stream to end after the response')
    } finally {
      await t.close()
    }
  })

  it('requires a session id after initialize (400), and refuses unknown ones (404)', async () => {
    const t = await startInbound()
    try {
      await openSession(t)
      const missing = await post(t, undefined, call(1, 'echo'))
      assert.equal(missing.status, 400)
      assert.match(errorOf(missing.json()).message, /Mcp-Session-Id/)
      const unknown = await post(t, 'no-such-session', call(1, 'echo'))
      assert.equal(unknown.status, 404)
    } finally {
      await t.close()
    }
  })

  it('mints unguessable session ids from a CSPRNG', async () => {
    const t = await startInbound()
    try {
      const a = await openSession(t)
      const b = await openSession(t)
      assert.notEqual(a, b)
      assert.match(a, /^[A-Za-z0-9_-]{32}$/)
    } finally {
      await t.close()
    }
  })

  it('ends a session on DELETE; the id then gets 404', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const del = await rawRequest(`${t.url}/mcp`, {
        method: 'DELETE',
        headers: { 'mcp-session-id': sessionId },
      })
      assert.equal(del.status, 200)
      assert.equal(t.handler.connections[0]?.closed, true)
      assert.equal((await post(t, sessionId, call(1, 'echo'))).status, 404)
      const again = await rawRequest(`${t.url}/mcp`, {
        method: 'DELETE',
        headers: { 'mcp-session-id': sessionId },
      })
      assert.equal(again.status, 404)
    } finally {
      await t.close()
    }
  })

  it('binds a session to the Authorization that created it; another caller gets 404', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t, '2025-06-18', { authorization: 'Bearer alice' })
      const mallory = await post(t, sessionId, call(1, 'echo'), { authorization: 'Bearer mallory' })
      assert.equal(mallory.status, 404)
      const anonymous = await post(t, sessionId, call(1, 'echo'))
      assert.equal(anonymous.status, 404)
      const alice = await post(t, sessionId, call(1, 'echo', { text: 'ok' }), {
        authorization: 'Bearer alice',
      })
      assert.equal(alice.status, 200)
    } finally {
      await t.close()
    }
  })

  it('refuses an unsupported MCP-Protocol-Version with 400 and accepts an absent one', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const bad = await post(t, sessionId, call(1, 'echo'), {
        'mcp-protocol-version': '1999-01-01',
      })
      assert.equal(bad.status, 400)
      assert.equal((await post(t, sessionId, call(2, 'echo'))).status, 200)
      const good = await post(t, sessionId, call(3, 'echo'), {
        'mcp-protocol-version': '2025-06-18',
      })
      assert.equal(good.status, 200)
    } finally {
      await t.close()
    }
  })

  it('answers 202 to a body of notifications only', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const res = await post(t, sessionId, { jsonrpc: '2.0', method: 'notifications/initialized' })
      assert.equal(res.status, 202)
      assert.equal(res.text, '')
    } finally {
      await t.close()
    }
  })

  it('accepts batches only in sessions that negotiated 2025-03-26', async () => {
    const t = await startInbound()
    const batch = [
      { jsonrpc: '2.0', id: 'a', method: 'ping' },
      { jsonrpc: '2.0', id: 'b', method: 'ping' },
    ]
    try {
      const modern = await openSession(t, '2025-06-18')
      const refused = await post(t, modern, batch)
      assert.equal(refused.status, 400)
      assert.equal(errorOf(refused.json()).code, -32600)
      const old = await openSession(t, '2025-03-26')
      const accepted = await post(t, old, batch)
      assert.equal(accepted.status, 200)
      const replies = accepted.json() as Array<{ id: string; result: object }>
      assert.deepEqual(replies.map((r) => r.id).sort(), ['a', 'b'])
    } finally {
      await t.close()
    }
  })

  it('answers 500 with -32603 when handling a POST body throws, and goes on serving', async () => {
    const t = await startInbound()
    const connect = t.handler.connect.bind(t.handler)
    let failures = 1
    t.handler.connect = (transport, info) => {
      if (failures-- > 0) throw new Error('handler exploded')
      connect(transport, info)
    }
    try {
      const failed = await post(t, undefined, initialize())
      assert.equal(failed.status, 500)
      assert.equal(errorOf(failed.json()).code, -32603)
      assert.ok(t.logs.some((r) => r.msg === 'HTTP request failed'))
      // The endpoint and the connection's server are unharmed: the next initialize works.
      await openSession(t)
    } finally {
      await t.close()
    }
  })

  it('tells request ids 1 and "1" apart, and refuses an id already in use in the batch', async () => {
    const t = await startInbound()
    try {
      const session = await openSession(t, '2025-03-26')
      const distinct = await post(t, session, [
        { jsonrpc: '2.0', id: 1, method: 'ping' },
        { jsonrpc: '2.0', id: '1', method: 'ping' },
      ])
      assert.equal(distinct.status, 200)
      const replies = distinct.json() as Array<{ id: unknown; result?: object }>
      assert.deepEqual(replies.map((r) => [typeof r.id, 'result' in r]).sort(), [
        ['number', true],
        ['string', true],
      ])
      const repeated = await post(t, session, [
        { jsonrpc: '2.0', id: 7, method: 'ping' },
        { jsonrpc: '2.0', id: 7, method: 'ping' },
      ])
      assert.equal(repeated.status, 200)
      const answers = repeated.json() as Array<{ id: unknown; error?: { message: string } }>
      assert.equal(answers.length, 2)
      assert.deepEqual(answers.map((r) => r.error?.message).sort(), [
        'Request id is already in use',
        undefined,
      ])
    } finally {
      await t.close()
    }
  })

  it('answers GET and DELETE without a session id with 405, and a second standalone GET with 409', async () => {
    const t = await startInbound()
    try {
      assert.equal(
        (await rawRequest(`${t.url}/mcp`, { headers: { accept: 'text/event-stream' } })).status,
        405,
      )
      assert.equal((await rawRequest(`${t.url}/mcp`, { method: 'DELETE' })).status, 405)
      const sessionId = await openSession(t)
      const first = await openSse(`${t.url}/mcp`, { headers: { 'mcp-session-id': sessionId } })
      assert.equal(first.status, 200)
      const second = await rawRequest(`${t.url}/mcp`, {
        headers: { accept: 'text/event-stream', 'mcp-session-id': sessionId },
      })
      assert.equal(second.status, 409)
      first.close()
    } finally {
      await t.close()
    }
  })

  it('answers 404 for an unknown virtual server in the path', async () => {
    const t = await startInbound()
    try {
      const res = await rawRequest(`${t.url}/mcp/nope`, {
        method: 'POST',
        headers: POST_HEADERS,
        body: initialize(),
      })
      assert.equal(res.status, 404)
      assert.equal(t.handler.connections.length, 0)
    } finally {
      await t.close()
    }
  })

  it('puts unrelated messages on the standalone stream and replays only that stream after Last-Event-ID', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const session = t.handler.connections[0]?.transport
      assert.ok(session)
      const note = (n: number) => ({
        jsonrpc: '2.0' as const,
        method: 'notifications/message',
        params: { n },
      })
      const first = await openSse(`${t.url}/mcp`, { headers: { 'mcp-session-id': sessionId } })
      await session.send(note(1))
      await session.send(note(2))
      const e1 = await first.next()
      const e2 = await first.next()
      assert.equal(JSON.parse(e2.data).params.n, 2)
      first.close()
      await within(first.ended, 2000, 'the first GET to close')
      // A POST stream with its own events, and two standalone events missed while disconnected.
      const postStream = await openSse(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...POST_HEADERS, 'mcp-session-id': sessionId },
        body: JSON.stringify(call(5, 'progress', { count: 1 }, { progressToken: 'x' })),
      })
      await postStream.next()
      await postStream.next()
      await session.send(note(3))
      await session.send(note(4))
      const resumed = await openSse(`${t.url}/mcp`, {
        headers: { 'mcp-session-id': sessionId, 'last-event-id': String(e2.id) },
      })
      const replayed = [await resumed.next(), await resumed.next()]
      assert.deepEqual(
        replayed.map((e) => JSON.parse(e.data).params.n),
        [3, 4],
      )
      assert.notEqual(e1.id?.split('-')[0], undefined)
      assert.ok(replayed.every((e) => e.id?.split('-')[0] === e2.id?.split('-')[0]))
      await assert.rejects(resumed.next(200), /Timed out|ended/)
      resumed.close()
    } finally {
      await t.close()
    }
  })

  it('resumes a POST stream with Last-Event-ID, replaying its later events and ending after the response', async () => {
    const t = await startInbound()
    try {
      const sessionId = await openSession(t)
      const stream = await openSse(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...POST_HEADERS, 'mcp-session-id': sessionId },
        body: JSON.stringify(call(9, 'progress', { count: 3 }, { progressToken: 'r' })),
      })
      const firstEvent = await stream.next()
      stream.close()
      // Something unrelated on the standalone stream must not leak into the resumption.
      await t.handler.connections[0]?.transport.send({
        jsonrpc: '2.0',
        method: 'notifications/message',
      })
      const resumed = await openSse(`${t.url}/mcp`, {
        headers: { 'mcp-session-id': sessionId, 'last-event-id': String(firstEvent.id) },
      })
      const rest = [await resumed.next(), await resumed.next(), await resumed.next()]
      assert.deepEqual(
        rest.map((e) => JSON.parse(e.data).params?.progress ?? JSON.parse(e.data).id),
        [2, 3, 9],
      )
      await within(resumed.ended, 2000, 'the resumed stream to end after the response')
    } finally {
      await t.close()
    }
  })

  it('closes sessions idle for sessionIdleTimeoutMs but keeps one whose stream is open', async () => {
    const t = await startInbound({ sessionIdleTimeoutMs: 150 })
    try {
      const listening = await openSession(t)
      const idle = await openSession(t)
      const [a, b] = t.handler.connections
      assert.ok(a && b)
      const stream = await openSse(`${t.url}/mcp`, { headers: { 'mcp-session-id': listening } })
      const closed = new Promise<void>((resolve) => {
        const previous = b.transport.onclose
        b.transport.onclose = () => {
          previous?.()
          resolve()
        }
      })
      await within(closed, 3000, 'the idle session to close')
      assert.equal((await post(t, idle, call(1, 'echo'))).status, 404)
      assert.equal(a.closed, false)
      assert.equal((await post(t, listening, call(1, 'echo'))).status, 200)
      stream.close()
    } finally {
      await t.close()
    }
  })

  it('evicts the oldest idle session of a caller at maxSessionsPerIdentity; 429 when all are busy', async () => {
    // Without inbound auth the caller is its address: every session here comes from 127.0.0.1.
    const t = await startInbound({ maxSessionsPerIdentity: 2 })
    try {
      const first = await openSession(t)
      const second = await openSession(t)
      await post(t, second, call(1, 'echo', { text: 'used later than first' }))
      const third = await openSession(t)
      assert.equal((await post(t, first, call(2, 'echo'))).status, 404, 'the oldest was evicted')
      assert.equal((await post(t, second, call(3, 'echo'))).status, 200)
      assert.equal((await post(t, third, call(4, 'echo'))).status, 200)
      // Both sessions now work on a request: neither is evicted, the new one is refused.
      const seen = [t.handler.nextMessage('tools/call'), t.handler.nextMessage('tools/call')]
      const slow = [
        post(t, second, call(5, 'slow', { ms: 400 })),
        post(t, third, call(6, 'slow', { ms: 400 })),
      ]
      await Promise.all(seen)
      const refused = await post(t, undefined, initialize())
      assert.equal(refused.status, 429)
      assert.equal(refused.headers['retry-after'], '5')
      assert.match(errorOf(refused.json()).message, /Too many sessions for this caller/)
      assert.deepEqual(
        (await Promise.all(slow)).map((r) => r.status),
        [200, 200],
      )
    } finally {
      await t.close()
    }
  })

  it('evicts the oldest idle session of anyone at maxSessions; 503 only when all are busy', async () => {
    const t = await startInbound({ maxSessions: 1 })
    try {
      const first = await openSession(t)
      const second = await openSession(t)
      assert.equal((await post(t, first, call(1, 'echo'))).status, 404)
      const seen = t.handler.nextMessage('tools/call')
      const slow = post(t, second, call(2, 'slow', { ms: 400 }))
      await seen
      const res = await post(t, undefined, initialize())
      assert.equal(res.status, 503)
      assert.equal((await slow).status, 200)
    } finally {
      await t.close()
    }
  })

  it('keeps at most sseReplayEvents per stream and warns when a reader missed evicted ones', async () => {
    const t = await startInbound({ sseReplayEvents: 3 })
    try {
      const sessionId = await openSession(t)
      const session = t.handler.connections[0]?.transport
      assert.ok(session)
      for (let n = 1; n <= 6; n++) {
        await session.send({ jsonrpc: '2.0', method: 'notifications/message', params: { n } })
      }
      const stream = await openSse(`${t.url}/mcp`, { headers: { 'mcp-session-id': sessionId } })
      const got = [await stream.next(), await stream.next(), await stream.next()]
      assert.deepEqual(
        got.map((e) => JSON.parse(e.data).params.n),
        [4, 5, 6],
      )
      const warning = t.logs.find((r) => String(r.msg).includes('lost events evicted'))
      assert.equal(warning?.lost, 3)
      stream.close()
    } finally {
      await t.close()
    }
  })

  it('disconnects a standalone SSE reader that stops reading, without queueing without bound', async () => {
    const t = await startInbound({ sseMaxQueuedBytes: 64 * 1024, sseReplayBytes: 64 * 1024 })
    try {
      const sessionId = await openSession(t)
      const session = t.handler.connections[0]?.transport
      assert.ok(session)
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1')
      socket.write(
        `GET /mcp HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sessionId}\r\n\r\n`,
      )
      await within(
        new Promise((resolve) => socket.once('data', resolve)),
        2000,
        'the stream headers',
      )
      socket.pause()
      const closed = new Promise((resolve) => socket.on('close', resolve))
      const payload = 'x'.repeat(8 * 1024)
      // Far more than socket buffers and the queue can hold.
      for (let i = 0; i < 4000; i++) {
        await session.send({
          jsonrpc: '2.0',
          method: 'notifications/message',
          params: { i, payload },
        })
        if (t.logs.some((r) => r.msg === 'SSE client reads too slowly; disconnecting it')) break
      }
      const record = t.logs.find((r) => r.msg === 'SSE client reads too slowly; disconnecting it')
      assert.ok(record, 'a log line names the disconnect')
      assert.ok(Number(record.queuedBytes) <= 64 * 1024)
      socket.resume()
      await within(closed, 3000, 'the slow reader to be disconnected')
    } finally {
      await t.close()
    }
  })
})
