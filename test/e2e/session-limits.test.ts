/**
 * Sessions are bounded per identity and per transport, the way an attacker would test it: one API
 * key opening sessions in a loop (Streamable HTTP, legacy SSE, WebSocket) only pushes out its own
 * oldest idle sessions, while another caller still opens and uses sessions, and no transport
 * holds more than `limits.maxSessions`.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import WebSocket from 'ws'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'flood', version: '1' },
  },
}

const PER_IDENTITY = 3
const TOTAL = 5

describe('sessions are bounded per identity and per transport', () => {
  let upstream: RecordingUpstream
  let server: RunningServer
  const mallory = generateApiKey()
  const bob = generateApiKey()

  before(async () => {
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      limits: { maxSessions: TOTAL, maxSessionsPerIdentity: PER_IDENTITY },
      auth: {
        apiKeys: {
          keys: [
            { id: 'm', hash: mallory.hash, subject: 'mallory' },
            { id: 'b', hash: bob.hash, subject: 'bob' },
          ],
        },
      },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
  })

  /** POSTs to /mcp; `initialize` when no session id is given. */
  async function post(key: string, sessionId?: string) {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${key}`,
        'content-type': 'application/json',
        accept: 'application/json',
        ...(sessionId ? { 'mcp-session-id': sessionId, 'mcp-protocol-version': '2025-06-18' } : {}),
      },
      body: JSON.stringify(sessionId ? { jsonrpc: '2.0', id: 2, method: 'ping' } : INIT),
    })
    await res.body?.cancel()
    return { status: res.status, sessionId: res.headers.get('mcp-session-id') ?? undefined }
  }

  test('Streamable HTTP: a flood from one key evicts its own oldest idle sessions and locks nobody out', async () => {
    const bobs = await post(bob.key)
    assert.equal(bobs.status, 200)
    const mallorys: string[] = []
    for (let i = 0; i < 40; i++) {
      const opened = await post(mallory.key)
      assert.equal(opened.status, 200, `mallory's session ${i} was refused`)
      mallorys.push(opened.sessionId as string)
    }
    assert.equal((await post(mallory.key, mallorys[0])).status, 404, 'the oldest was evicted')
    for (const id of mallorys.slice(-PER_IDENTITY)) {
      assert.equal((await post(mallory.key, id)).status, 200)
    }
    assert.equal((await post(bob.key, bobs.sessionId)).status, 200, "bob's session survived")
    assert.equal((await post(bob.key)).status, 200, 'bob can still open a session')
    assert.ok(server.http.streamable.sessionCount <= TOTAL)
  })

  /** Opens a legacy SSE stream; resolves once the endpoint event came, with a "stream ended" promise. */
  async function openSse(key: string) {
    const controller = new AbortController()
    const res = await fetch(`${server.url}/sse`, {
      headers: { authorization: `Bearer ${key}`, accept: 'text/event-stream' },
      signal: controller.signal,
    })
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    let text = ''
    while (!text.includes('event: endpoint')) {
      const { done, value } = await reader.read()
      if (done) break
      text += new TextDecoder().decode(value)
    }
    const ended = (async () => {
      for (;;) {
        const { done } = await reader.read().catch(() => ({ done: true }))
        if (done) return true
      }
    })()
    return { status: res.status, ended, close: () => controller.abort() }
  }

  test('legacy SSE: the caller’s oldest idle stream ends, another caller still connects', async () => {
    const streams = []
    try {
      for (let i = 0; i <= PER_IDENTITY; i++) {
        const stream = await openSse(mallory.key)
        assert.equal(stream.status, 200)
        streams.push(stream)
      }
      const ended = await Promise.race([
        streams[0]!.ended,
        new Promise((resolve) => setTimeout(() => resolve(false), 3_000)),
      ])
      assert.equal(ended, true, "mallory's oldest stream was ended")
      const bobs = await openSse(bob.key)
      streams.push(bobs)
      assert.equal(bobs.status, 200)
    } finally {
      for (const stream of streams) stream.close()
    }
  })

  async function openSocket(key: string) {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, 'mcp', {
      headers: { authorization: `Bearer ${key}` },
    })
    const closed = new Promise<{ code: number; reason: string }>((resolve) =>
      ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })),
    )
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    return { ws, closed }
  }

  test('WebSocket: connections are capped per caller and in all, by evicting the oldest idle', async () => {
    const sockets: Awaited<ReturnType<typeof openSocket>>[] = []
    const within = <T>(promise: Promise<T>) =>
      Promise.race([
        promise,
        new Promise<never>((_, reject) =>
          setTimeout(() => reject(new Error('the socket was left open')), 3_000),
        ),
      ])
    try {
      for (let i = 0; i <= PER_IDENTITY; i++) sockets.push(await openSocket(mallory.key))
      const first = await within(sockets[0]!.closed)
      assert.equal(first.code, 1008)
      assert.match(first.reason, /^Evicted: too many sessions for this caller/)
      assert.equal(server.http.websocket.connectionCount, PER_IDENTITY)
      // Bob fills the transport to its total: the least recently active idle socket goes.
      for (let i = 0; i < TOTAL - PER_IDENTITY + 1; i++) sockets.push(await openSocket(bob.key))
      const second = await within(sockets[1]!.closed)
      assert.match(second.reason, /^Evicted: too many sessions; this was the oldest idle one/)
      assert.ok(server.http.websocket.connectionCount <= TOTAL)
    } finally {
      for (const { ws } of sockets) ws.close()
    }
  })
})
