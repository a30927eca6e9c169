import assert from 'node:assert/strict'
import type { IncomingMessage } from 'node:http'
import { describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { WebSocketClientTransport } from '@modelcontextprotocol/sdk/client/websocket.js'
import { WebSocket } from 'ws'
import { within } from '../../test/fixtures/inbound-http-client.ts'
import { startInbound } from '../../test/fixtures/inbound-server.ts'
import { AuthFailure } from '../auth/auth-failure.ts'
import { InboundAuthenticator } from '../auth/authenticator.ts'
import type { Identity } from '../auth/identity.ts'

/** Opens a ws client; resolves once open, or with the HTTP status of a refused handshake. */
function open(
  url: string,
  protocols: string[] = ['mcp'],
  headers: Record<string, string> = {},
): Promise<{ ws: WebSocket } | { status: number; body: string }> {
  return within(
    new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { headers })
      ws.once('open', () => resolve({ ws }))
      ws.once('unexpected-response', (_req, res: IncomingMessage) => {
        let body = ''
        res.on('data', (chunk: Buffer) => {
          body += chunk.toString()
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
      })
      ws.once('error', reject)
    }),
    3000,
    `WebSocket ${url}`,
  )
}

function nextMessage(ws: WebSocket): Promise<Record<string, unknown>> {
  return within(
    new Promise((resolve) =>
      ws.once('message', (data: Buffer) => resolve(JSON.parse(data.toString()))),
    ),
    2000,
    'a WebSocket message',
  )
}

function closeCode(ws: WebSocket): Promise<number> {
  return within(
    new Promise((resolve) => ws.once('close', (code: number) => resolve(code))),
    2000,
    'the WebSocket to close',
  )
}

describe('WebSocket inbound', () => {
  it('serves the official SDK WebSocket client on /ws/<server>', async () => {
    const t = await startInbound()
    const client = new Client({ name: 'sdk-ws', version: '1.0.0' })
    try {
      await within(
        client.connect(
          new WebSocketClientTransport(new URL(`${t.url.replace('http', 'ws')}/ws/alpha`)),
        ),
        5000,
        'SDK initialize over WebSocket',
      )
      assert.equal((await client.listTools()).tools.length, 4)
      const result = await client.callTool({ name: 'echo', arguments: { text: 'ws' } })
      assert.deepEqual(result.content, [{ type: 'text', text: 'alpha:ws' }])
      assert.equal(t.handler.connections[0]?.info.kind, 'websocket')
    } finally {
      await client.close()
      await t.close()
    }
  })

  it('refuses a handshake without the mcp subprotocol with a readable reason', async () => {
    const t = await startInbound()
    try {
      const ws = t.url.replace('http', 'ws')
      for (const protocols of [[], ['graphql-ws']]) {
        const outcome = await open(`${ws}/ws`, protocols)
        assert.ok('status' in outcome)
        assert.equal(outcome.status, 400)
        assert.match(outcome.body, /must offer the \\"mcp\\" subprotocol/)
      }
      const accepted = await open(`${ws}/ws`, ['graphql-ws', 'mcp'])
      assert.ok('ws' in accepted)
      assert.equal(accepted.ws.protocol, 'mcp')
      accepted.ws.close()
    } finally {
      await t.close()
    }
  })

  it('refuses a foreign Origin (403) and an unknown server (404) at the handshake', async () => {
    const t = await startInbound()
    try {
      const ws = t.url.replace('http', 'ws')
      const foreign = await open(`${ws}/ws`, ['mcp'], { origin: 'https://evil.example' })
      assert.ok('status' in foreign && foreign.status === 403)
      const unknown = await open(`${ws}/ws/nope`)
      assert.ok('status' in unknown && unknown.status === 404)
      assert.equal(t.handler.connections.length, 0)
    } finally {
      await t.close()
    }
  })

  it('answers a text frame that is not JSON with -32700 and keeps the connection', async () => {
    const t = await startInbound()
    try {
      const outcome = await open(`${t.url.replace('http', 'ws')}/ws`)
      assert.ok('ws' in outcome)
      const reply = nextMessage(outcome.ws)
      outcome.ws.send('{nope')
      assert.equal(((await reply).error as { code: number }).code, -32700)
      const pong = nextMessage(outcome.ws)
      outcome.ws.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }))
      assert.deepEqual(await pong, { jsonrpc: '2.0', id: 1, result: {} })
      outcome.ws.close()
    } finally {
      await t.close()
    }
  })

  it('closes with 1003 on a binary frame and 1009 on a frame over the payload limit', async () => {
    const t = await startInbound({ wsMaxPayloadBytes: 1024 })
    try {
      const url = `${t.url.replace('http', 'ws')}/ws`
      const binary = await open(url)
      assert.ok('ws' in binary)
      const binaryClosed = closeCode(binary.ws)
      binary.ws.send(Buffer.from('{"jsonrpc":"2.0","id":1,"method":"ping"}'), { binary: true })
      assert.equal(await binaryClosed, 1003)
      const big = await open(url)
      assert.ok('ws' in big)
      const bigClosed = closeCode(big.ws)
      big.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'ping',
          params: { pad: 'x'.repeat(4096) },
        }),
      )
      assert.equal(await bigClosed, 1009)
    } finally {
      await t.close()
    }
  })

  it('drops a client that stops reading once its send buffer passes wsMaxBufferedBytes', async () => {
    const t = await startInbound({ wsMaxBufferedBytes: 64 * 1024 })
    try {
      const connected = t.handler.nextConnection()
      const outcome = await open(`${t.url.replace('http', 'ws')}/ws`)
      assert.ok('ws' in outcome)
      const { transport } = await within(connected, 2000, 'the connection')
      outcome.ws.pause()
      const payload = 'x'.repeat(16 * 1024)
      const slowLine = () =>
        t.logs.some((r) => r.msg === 'WebSocket client reads too slowly; disconnecting it')
      for (let i = 0; i < 4000 && !slowLine(); i++) {
        // Not awaited: a stalled peer never lets the write complete.
        transport
          .send({ jsonrpc: '2.0', method: 'notifications/message', params: { payload } })
          .catch(() => {})
        await new Promise((resolve) => setImmediate(resolve))
      }
      assert.ok(slowLine(), 'a log line names the disconnect')
      await assert.rejects(transport.send({ jsonrpc: '2.0', method: 'notifications/message' }))
      outcome.ws.terminate()
    } finally {
      await t.close()
    }
  })

  it('closes connections with 1001 on shutdown once their requests are answered', async () => {
    const t = await startInbound()
    const outcome = await open(`${t.url.replace('http', 'ws')}/ws`)
    assert.ok('ws' in outcome)
    const arrived = t.handler.nextMessage('tools/call')
    const reply = nextMessage(outcome.ws)
    const closed = closeCode(outcome.ws)
    outcome.ws.send(
      JSON.stringify({
        jsonrpc: '2.0',
        id: 3,
        method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 200 } },
      }),
    )
    await within(arrived, 2000, 'the call to arrive')
    const closing = t.inbound.close({ deadlineMs: 3000 })
    assert.equal((await reply).id, 3)
    assert.equal(await closed, 1001)
    await within(closing, 3000, 'shutdown')
  })

  it('checks the credential before every message, in order, and closes with 1008 when it is gone', async () => {
    const t = await startInbound()
    // An issuer whose answers take a while and can be withdrawn: introspection is the
    // asynchronous re-check (API keys and JWTs are re-checked synchronously).
    let active = true
    let delays = [0, 60, 30, 0]
    const seenBy: Identity[] = []
    t.inbound.authenticator = new InboundAuthenticator({
      baseUrl: () => t.url,
      servers: () => ['default', 'alpha'],
      requiredScopes: [],
      authorizationServers: [],
      introspection: {
        introspect: async (token) => {
          await new Promise((resolve) => setTimeout(resolve, delays.shift() ?? 0))
          if (!active) throw new AuthFailure('invalid_token', 'The token is not active')
          const identity: Identity = { subject: token, scopes: [], method: 'introspection' }
          seenBy.push(identity)
          return identity
        },
      },
    })
    try {
      const opened = await open(`${t.url.replace('http', 'ws')}/ws`, ['mcp'], {
        authorization: 'Bearer opaque-1',
      })
      assert.ok('ws' in opened)
      const ws = opened.ws
      const arrived = t.handler.nextMessage('third')
      for (const method of ['first', 'second', 'third']) {
        ws.send(JSON.stringify({ jsonrpc: '2.0', method }))
      }
      await within(arrived, 2000, 'the third message')
      const connection = t.handler.connections[0]!
      // The slower check of the first message did not let the second overtake it.
      assert.deepEqual(
        connection.received.map((m) => ('method' in m ? m.method : undefined)),
        ['first', 'second', 'third'],
      )
      assert.equal(seenBy.length, 4, 'one check at the upgrade, one per message')
      active = false
      delays = []
      const closed = within(
        new Promise<{ code: number; reason: string }>((resolve) =>
          ws.once('close', (code: number, reason: Buffer) =>
            resolve({ code, reason: reason.toString() }),
          ),
        ),
        2000,
        'the WebSocket to close',
      )
      ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'fourth' }))
      assert.deepEqual(await closed, {
        code: 1008,
        reason: 'Credential rejected: The token is not active',
      })
      assert.equal(connection.received.length, 3, 'the refused message was not handled')
    } finally {
      await t.close()
    }
  })

  it('refuses an upgrade with 429 when every connection of the address is working on a request', async () => {
    // Without inbound auth the caller is its address: both sockets come from 127.0.0.1.
    const t = await startInbound({ maxSessionsPerIdentity: 1 })
    try {
      const first = await open(`${t.url.replace('http', 'ws')}/ws`)
      assert.ok('ws' in first)
      const seen = t.handler.nextMessage('tools/call')
      first.ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'tools/call',
          params: { name: 'slow', arguments: { ms: 500 } },
        }),
      )
      await within(seen, 2000, 'the slow call')
      const refused = await open(`${t.url.replace('http', 'ws')}/ws`)
      assert.ok('status' in refused)
      assert.equal(refused.status, 429)
      assert.match(refused.body, /Too many sessions for this caller/)
      assert.equal(t.handler.connections.length, 1)
      assert.equal(t.handler.connections[0]?.closed, false, 'the busy one was not evicted')
      first.ws.close()
    } finally {
      await t.close()
    }
  })

  it('hands a 2026-07-28 retry to the fleet, which answers it on the socket or leaves it here', async () => {
    const t = await startInbound()
    const offered: { state: unknown; server: string; header: unknown }[] = []
    let aborted = false
    t.inbound.sessionDirectory = {
      opened() {},
      closed() {},
      relay: async () => false,
      async relaySocketRetry(request, retry) {
        const state = request.params?.requestState
        offered.push({ state, server: retry.server, header: retry.headers['x-client'] })
        if (state === 'held-here') return false
        if (state === 'slow') {
          await new Promise((resolve) => retry.signal.addEventListener('abort', resolve))
          aborted = true
          // Whatever comes after a cancellation is not sent.
          retry.send({ jsonrpc: '2.0', id: request.id, result: { late: true } })
          return true
        }
        retry.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })
        retry.send({ jsonrpc: '2.0', id: request.id, result: { relayed: true } })
        return true
      },
    }
    const retry = (id: number, requestState: string, claim = true) =>
      JSON.stringify({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: {
          name: 'echo',
          arguments: { text: 'x' },
          requestState,
          ...(claim
            ? {
                _meta: {
                  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
                  'io.modelcontextprotocol/clientCapabilities': {},
                },
              }
            : {}),
        },
      })
    try {
      const opened = await open(`${t.url.replace('http', 'ws')}/ws/alpha`, ['mcp'], {
        'x-client': 'c1',
      })
      assert.ok('ws' in opened)
      const { ws } = opened
      const frames: Record<string, unknown>[] = []
      ws.on('message', (data: Buffer) => frames.push(JSON.parse(data.toString())))
      ws.send(retry(1, 'elsewhere'))
      await within(
        (async () => {
          while (frames.length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
        })(),
        2000,
        'the relayed answer',
      )
      assert.deepEqual(frames, [
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } },
        { jsonrpc: '2.0', id: 1, result: { relayed: true } },
      ])
      assert.deepEqual(offered[0], { state: 'elsewhere', server: 'alpha', header: 'c1' })
      const connection = t.handler.connections[0]
      assert.equal(connection?.received.length, 0, 'the session never saw the relayed retry')
      // A cancelled relay ends, and sends nothing.
      ws.send(retry(2, 'slow'))
      await within(
        (async () => {
          while (offered.length < 2) await new Promise((resolve) => setTimeout(resolve, 5))
        })(),
        2000,
        'the slow relay',
      )
      ws.send(
        JSON.stringify({
          jsonrpc: '2.0',
          method: 'notifications/cancelled',
          params: { requestId: 2 },
        }),
      )
      // Held here: the session gets it. Without a 2026-07-28 claim: never offered to the fleet.
      const seen = t.handler.nextMessage('tools/call')
      ws.send(retry(3, 'held-here'))
      const { message } = await within(seen, 2000, 'the retry held here')
      assert.equal((message as { id: number }).id, 3)
      assert.ok(aborted, 'the cancellation reached the relay')
      ws.send(retry(4, 'legacy', false))
      await within(t.handler.nextMessage('tools/call'), 2000, 'the legacy request')
      assert.deepEqual(
        offered.map((o) => o.state),
        ['elsewhere', 'slow', 'held-here'],
      )
      assert.ok(!frames.some((f) => f.id === 2), 'nothing answered the cancelled request')
      ws.close()
    } finally {
      await t.close()
    }
  })
})
