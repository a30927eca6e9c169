import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import { openSse, rawRequest, within } from '../../test/fixtures/inbound-http-client.ts'
import { startInbound } from '../../test/fixtures/inbound-server.ts'

describe('legacy HTTP+SSE inbound', () => {
  it('serves the official SDK SSE client: initialize, list and call on /sse/<server>', async () => {
    const t = await startInbound()
    const client = new Client({ name: 'sdk-sse', version: '1.0.0' })
    const transport = new SSEClientTransport(new URL(`${t.url}/sse/alpha`))
    try {
      await within(client.connect(transport), 5000, 'SDK initialize over SSE')
      assert.equal(client.getServerVersion()?.name, 'echo')
      assert.equal((await client.listTools()).tools.length, 4)
      const result = await client.callTool({ name: 'echo', arguments: { text: 'legacy' } })
      assert.deepEqual(result.content, [{ type: 'text', text: 'alpha:legacy' }])
      const connection = t.handler.connections[0]
      assert.equal(connection?.info.kind, 'sse')
      assert.equal(connection?.info.server, 'alpha')
    } finally {
      await client.close()
      await t.close()
    }
  })

  it('announces a relative POST endpoint carrying a random session id, and replies on the stream', async () => {
    const t = await startInbound()
    try {
      const stream = await openSse(`${t.url}/sse`)
      const endpoint = await stream.next()
      assert.equal(endpoint.event, 'endpoint')
      assert.match(endpoint.data, /^\/messages\?sessionId=[A-Za-z0-9_-]{32}$/)
      const res = await rawRequest(`${t.url}${endpoint.data}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'ping' }),
      })
      assert.equal(res.status, 202)
      const reply = await stream.next()
      assert.equal(reply.event, 'message')
      assert.deepEqual(JSON.parse(reply.data), { jsonrpc: '2.0', id: 4, result: {} })
      stream.close()
    } finally {
      await t.close()
    }
  })

  it('answers an unknown or missing session id with 404 / 400', async () => {
    const t = await startInbound()
    try {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' })
      const headers = { 'content-type': 'application/json' }
      const unknown = await rawRequest(`${t.url}/messages?sessionId=nope`, {
        method: 'POST',
        headers,
        body,
      })
      assert.equal(unknown.status, 404)
      const missing = await rawRequest(`${t.url}/messages`, { method: 'POST', headers, body })
      assert.equal(missing.status, 400)
    } finally {
      await t.close()
    }
  })

  it('replies to an unparsable POST with 400 and the JSON-RPC parse error', async () => {
    const t = await startInbound()
    try {
      const stream = await openSse(`${t.url}/sse`)
      const endpoint = await stream.next()
      const res = await rawRequest(`${t.url}${endpoint.data}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{oops',
      })
      assert.equal(res.status, 400)
      assert.equal((res.json() as { error: { code: number } }).error.code, -32700)
      stream.close()
    } finally {
      await t.close()
    }
  })

  it('closes the transport when the client drops the stream, after which the id is unknown', async () => {
    const t = await startInbound()
    try {
      const connected = t.handler.nextConnection()
      const stream = await openSse(`${t.url}/sse`)
      const endpoint = await stream.next()
      const connection = await within(connected, 2000, 'the connection')
      const closed = new Promise<void>((resolve) => {
        const previous = connection.transport.onclose
        connection.transport.onclose = () => {
          previous?.()
          resolve()
        }
      })
      stream.close()
      await within(closed, 2000, 'the transport to close')
      const res = await rawRequest(`${t.url}${endpoint.data}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      })
      assert.equal(res.status, 404)
    } finally {
      await t.close()
    }
  })
})
