import assert from 'node:assert/strict'
import { execFile } from 'node:child_process'
import { Agent } from 'node:http'
import { connect } from 'node:net'
import { describe, it } from 'node:test'
import { promisify } from 'node:util'
import { rawRequest, within } from '../../test/fixtures/inbound-http-client.ts'
import { startInbound } from '../../test/fixtures/inbound-server.ts'
import { createHttpInbound, DEFAULT_HTTP_INBOUND_OPTIONS } from './http-inbound.ts'

const run = promisify(execFile)

const JSON_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
}

const initializeBody = JSON.stringify({
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 't', version: '1' },
  },
})

describe('HTTP inbound listener', () => {
  it('answers /healthz and serves routes the gateway adds to the table', async () => {
    const t = await startInbound()
    try {
      const health = await rawRequest(`${t.url}/healthz`)
      assert.equal(health.status, 200)
      assert.deepEqual(health.json(), { status: 'ok' })
      t.inbound.routes.set('/readyz', (_req, res) => {
        res.writeHead(503).end('not ready')
      })
      assert.equal((await rawRequest(`${t.url}/readyz`)).status, 503)
      assert.equal((await rawRequest(`${t.url}/nothing-here`)).status, 404)
    } finally {
      await t.close()
    }
  })

  it('refuses a foreign Host header with 403 and a reason (DNS rebinding)', async () => {
    const t = await startInbound()
    try {
      const res = await rawRequest(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...JSON_HEADERS, host: 'evil.example' },
        body: initializeBody,
      })
      assert.equal(res.status, 403)
      assert.match(errorMessage(res.json()), /Host "evil\.example" is not in the allowed hosts/)
      assert.equal(t.handler.connections.length, 0)
      assert.ok(t.logs.some((r) => r.msg === 'refused an HTTP request' && r.header === 'host'))
    } finally {
      await t.close()
    }
  })

  it('keeps refusing foreign Host and Origin headers after accepting allowed ones', async () => {
    const t = await startInbound()
    try {
      const allowedHost = new URL(t.url).host
      const good = { origin: 'http://localhost:6274' }
      for (let round = 0; round < 2; round++) {
        assert.equal((await rawRequest(`${t.url}/healthz`)).status, 200)
        assert.equal((await rawRequest(`${t.url}/healthz`, { headers: good })).status, 200)
        const host = await rawRequest(`${t.url}/healthz`, { headers: { host: 'evil.example' } })
        assert.equal(host.status, 403)
        const origin = await rawRequest(`${t.url}/healthz`, {
          headers: { host: allowedHost, origin: 'https://evil.example' },
        })
        assert.equal(origin.status, 403)
        const both = await rawRequest(`${t.url}/healthz`, {
          headers: { host: 'evil.example', ...good },
        })
        assert.equal(both.status, 403)
      }
    } finally {
      await t.close()
    }
  })

  it('refuses a foreign Origin with 403 and lets an allowed one through with CORS headers', async () => {
    const t = await startInbound()
    try {
      const bad = await rawRequest(`${t.url}/healthz`, {
        headers: { origin: 'https://evil.example' },
      })
      assert.equal(bad.status, 403)
      assert.match(errorMessage(bad.json()), /Origin "https:\/\/evil\.example"/)
      const good = await rawRequest(`${t.url}/healthz`, {
        headers: { origin: 'http://localhost:6274' },
      })
      assert.equal(good.status, 200)
      assert.equal(good.headers['access-control-allow-origin'], 'http://localhost:6274')
      assert.match(String(good.headers['access-control-expose-headers']), /mcp-session-id/)
      const preflight = await rawRequest(`${t.url}/mcp`, {
        method: 'OPTIONS',
        headers: { origin: 'http://localhost:6274', 'access-control-request-headers': 'mcp-name' },
      })
      assert.equal(preflight.status, 204)
      assert.equal(preflight.headers['access-control-allow-headers'], 'mcp-name')
    } finally {
      await t.close()
    }
  })

  it('answers an oversize body with 413 and keeps the keep-alive connection usable', async () => {
    const t = await startInbound({ maxBodyBytes: 1024 })
    const agent = new Agent({ keepAlive: true, maxSockets: 1 })
    try {
      const big = JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'ping',
        params: { pad: 'x'.repeat(5000) },
      })
      const refused = await rawRequest(`${t.url}/mcp`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: big,
        agent,
      })
      assert.equal(refused.status, 413)
      assert.match(refused.text, /exceeds the limit of 1024 bytes/)
      const next = await rawRequest(`${t.url}/mcp`, {
        method: 'POST',
        headers: JSON_HEADERS,
        body: initializeBody,
        agent,
      })
      assert.equal(next.status, 200)
      assert.equal(next.reusedSocket, true)
      assert.equal((next.json() as { id: number }).id, 1)
    } finally {
      agent.destroy()
      await t.close()
    }
  })

  it('closes the connection after a 413 when the declared body is too big to drain', async () => {
    const t = await startInbound({ maxBodyBytes: 1024 })
    try {
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1')
      let received = ''
      socket.setEncoding('utf8')
      socket.on('data', (chunk: string) => {
        received += chunk
      })
      socket.write(
        'POST /mcp HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n' +
          `Content-Length: ${50 * 1024 * 1024}\r\n\r\n{"jsonrpc":`,
      )
      await within(
        new Promise((resolve) => socket.on('close', resolve)),
        3000,
        'the server to close',
      )
      assert.match(received, /^HTTP\/1\.1 413/)
      assert.match(received, /connection: close/i)
    } finally {
      await t.close()
    }
  })

  it('lets a client still sending a body too big to drain read the 413 (no EPIPE)', async () => {
    const t = await startInbound({ maxBodyBytes: 1024 })
    try {
      // 12 MiB written in 16 KiB chunks, one per turn of the event loop, by a client in another
      // process, as a fuzzer's client writes it: the refusal comes while the client is still
      // sending, and must arrive instead of a reset.
      const client = `
        const { request } = require('node:http')
        const total = 12 * 1024 * 1024
        const chunk = Buffer.alloc(16 * 1024, 0x20)
        const req = request(process.argv[1], {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'content-length': String(total) },
        })
        req.on('response', (res) => {
          let text = ''
          res.setEncoding('utf8')
          res.on('data', (c) => { text += c })
          res.on('end', () => console.log(JSON.stringify({ status: res.statusCode, text })))
        })
        req.on('error', (err) => console.log(JSON.stringify({ error: err.code })))
        let sent = 0
        const write = () => {
          if (req.destroyed) return
          if (sent >= total) return req.end()
          sent += chunk.length
          if (req.write(chunk)) setImmediate(write)
          else req.once('drain', write)
        }
        write()`
      const { stdout } = await run(process.execPath, ['-e', client, `${t.url}/mcp`])
      const reply = JSON.parse(stdout) as { status?: number; text?: string; error?: string }
      assert.equal(reply.error, undefined, `the client saw ${reply.error} instead of the reply`)
      assert.equal(reply.status, 413)
      assert.match(reply.text ?? '', /exceeds the limit of 1024 bytes/)
    } finally {
      await t.close()
    }
  })

  it('drops a client that does not finish its headers within headersTimeoutMs', async () => {
    const t = await startInbound({ headersTimeoutMs: 200, requestTimeoutMs: 400 })
    try {
      const socket = connect(Number(new URL(t.url).port), '127.0.0.1')
      let received = ''
      socket.on('data', (chunk: Buffer) => {
        received += chunk.toString()
      })
      socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\n')
      await within(
        new Promise((resolve) => socket.on('close', resolve)),
        3000,
        'the server to drop us',
      )
      assert.match(received, /^HTTP\/1\.1 408/)
    } finally {
      await t.close()
    }
  })

  it('lets a request in progress finish during shutdown, then refuses new connections', async () => {
    const t = await startInbound()
    const init = await rawRequest(`${t.url}/mcp`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: initializeBody,
    })
    const sessionId = String(init.headers['mcp-session-id'])
    const arrived = t.handler.nextMessage('tools/call')
    const slowCall = rawRequest(`${t.url}/mcp`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'mcp-session-id': sessionId },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 300 } },
      }),
    })
    // Shut down only once the request reached the handler.
    const { connection } = await within(arrived, 2000, 'the call to arrive')
    const closing = t.inbound.close({ deadlineMs: 5000 })
    const answer = await slowCall
    assert.equal(answer.status, 200)
    assert.deepEqual((answer.json() as { result: unknown }).result, {
      content: [{ type: 'text', text: 'slept 300' }],
    })
    await within(closing, 5000, 'shutdown')
    assert.equal(connection.closed, true)
    await assert.rejects(rawRequest(`${t.url}/healthz`), /ECONNREFUSED/)
  })

  it('destroys what is still running when the shutdown deadline passes', async () => {
    const t = await startInbound()
    const init = await rawRequest(`${t.url}/mcp`, {
      method: 'POST',
      headers: JSON_HEADERS,
      body: initializeBody,
    })
    const arrived = t.handler.nextMessage('tools/call')
    const stuck = rawRequest(`${t.url}/mcp`, {
      method: 'POST',
      headers: { ...JSON_HEADERS, 'mcp-session-id': String(init.headers['mcp-session-id']) },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'tools/call',
        params: { name: 'slow', arguments: { ms: 60_000 } },
      }),
    })
    await within(arrived, 2000, 'the call to arrive')
    await within(t.inbound.close({ deadlineMs: 200 }), 3000, 'shutdown at the deadline')
    // The session was closed at the deadline: the stuck request got an error reply or a reset.
    const outcome = await stuck.then(
      (res) => res.status,
      () => 'reset',
    )
    assert.ok(outcome === 200 || outcome === 'reset', String(outcome))
    assert.ok(
      t.logs.some((r) => r.msg === 'shutdown deadline reached; dropping connections still open'),
    )
  })

  it('rejects invalid limits with ERR_CONFIG_INVALID and documents its defaults', () => {
    assert.throws(
      () => createHttpInbound(t0(), { maxBodyBytes: -1 }),
      (err: { code?: string }) => err.code === 'ERR_CONFIG_INVALID',
    )
    assert.equal(DEFAULT_HTTP_INBOUND_OPTIONS.host, '127.0.0.1')
    assert.equal(DEFAULT_HTTP_INBOUND_OPTIONS.maxBodyBytes, 4 * 1024 * 1024)
  })
})

function errorMessage(body: unknown): string {
  return (body as { error: { message: string } }).error.message
}

function t0() {
  return { hasServer: () => true, connect: () => {} }
}
