import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import {
  Client as ModernClient,
  StreamableHTTPClientTransport as ModernTransport,
} from '@modelcontextprotocol/client'
import { rawRequest, within } from '../../test/fixtures/inbound-http-client.ts'
import { startInbound, type TestInbound } from '../../test/fixtures/inbound-server.ts'
import { errorOf } from '../../test/support/errors.ts'
import { decodeHeaderValue, statusForReply } from './streamable-http-stateless.ts'

const POST_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
}

function post(t: TestInbound, body: unknown, extra: Record<string, string> = {}) {
  return rawRequest(`${t.url}/mcp`, {
    method: 'POST',
    headers: { ...POST_HEADERS, ...extra },
    body: JSON.stringify(body),
  })
}

const call = (id: number, name: string, args: Record<string, unknown>, meta: object) => ({
  jsonrpc: '2.0',
  id,
  method: 'tools/call',
  params: { name, arguments: args, _meta: meta },
})

describe('2026-07-28 header helpers', () => {
  it('decodes the =?base64?…?= form and passes plain values through', () => {
    assert.equal(
      decodeHeaderValue(`=?base64?${Buffer.from('héllo').toString('base64')}?=`),
      'héllo',
    )
    assert.equal(decodeHeaderValue('plain'), 'plain')
    assert.equal(decodeHeaderValue('=?base64?***?='), undefined)
    assert.equal(
      decodeHeaderValue(`=?base64?${Buffer.from([0xff]).toString('base64')}?=`),
      undefined,
    )
  })

  it('maps modern error codes to the HTTP status the spec assigns', () => {
    const error = (code: number) => ({
      jsonrpc: '2.0' as const,
      id: 1,
      error: { code, message: 'x' },
    })
    assert.equal(statusForReply(error(-32601)), 404)
    assert.equal(statusForReply(error(-32020)), 400)
    assert.equal(statusForReply(error(-32022)), 400)
    assert.equal(statusForReply(error(-32603)), 200)
    // A rate-limited request is refused as a whole (policies/rate-limit.ts).
    assert.equal(statusForReply(error(-32029)), 429)
    assert.equal(statusForReply({ jsonrpc: '2.0', id: 1, result: {} }), 200)
  })
})

describe('Streamable HTTP inbound with the official SDK v2 client (2026-07-28)', () => {
  for (const mode of [{ pin: '2026-07-28' }, 'auto'] as const) {
    it(`serves a ${typeof mode === 'string' ? 'probing' : 'pinned'} modern client statelessly, progress included`, async () => {
      const t = await startInbound()
      const client = new ModernClient(
        { name: 'sdk-v2', version: '2.0.0' },
        { versionNegotiation: { mode } },
      )
      try {
        await within(
          client.connect(new ModernTransport(new URL(`${t.url}/mcp/alpha`))),
          5000,
          'v2 connect',
        )
        assert.equal((await client.listTools()).tools.length, 4)
        const echo = await client.callTool({ name: 'echo', arguments: { text: 'modern' } })
        assert.deepEqual(echo.content, [{ type: 'text', text: 'alpha:modern' }])
        const progress: number[] = []
        await client.callTool(
          { name: 'progress', arguments: { count: 2 } },
          {
            onprogress: (p: { progress: number }) => progress.push(p.progress),
          },
        )
        assert.deepEqual(progress, [1, 2])
        assert.ok(t.handler.connections.length >= 3)
        for (const c of t.handler.connections) {
          assert.equal(c.info.kind, 'streamable-http-stateless')
          assert.equal(c.closed, true)
        }
        assert.equal(t.inbound.streamable.sessionCount, 0)
      } finally {
        await client.close()
        await t.close()
      }
    })
  }
})

describe('Streamable HTTP inbound, 2026-07-28 stateless requests', () => {
  const modern = (name: string, args: Record<string, unknown> = {}, version = '2026-07-28') =>
    call(1, name, args, {
      'io.modelcontextprotocol/protocolVersion': version,
      'io.modelcontextprotocol/clientCapabilities': {},
    })
  const headers = (name: string, extra: Record<string, string> = {}) => ({
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': 'tools/call',
    'mcp-name': name,
    ...extra,
  })

  it('serves a POST with matching headers on its own short-lived transport, without a session', async () => {
    const t = await startInbound()
    try {
      const res = await post(t, modern('echo', { text: 'now' }), headers('echo'))
      assert.equal(res.status, 200)
      assert.equal(res.headers['mcp-session-id'], undefined)
      assert.deepEqual((res.json() as { result: unknown }).result, {
        resultType: 'complete',
        content: [{ type: 'text', text: 'default:now' }],
      })
      const connection = t.handler.connections[0]
      assert.equal(connection?.info.kind, 'streamable-http-stateless')
      assert.equal(connection?.closed, true)
    } finally {
      await t.close()
    }
  })

  it('decodes Mcp-Name values sent in the =?base64?…?= form', async () => {
    const t = await startInbound()
    try {
      const encoded = `=?base64?${Buffer.from('echo').toString('base64')}?=`
      const res = await post(t, modern('echo', { text: 'b64' }), headers(encoded))
      assert.equal(res.status, 200)
    } finally {
      await t.close()
    }
  })

  it('refuses a header that disagrees with the body with 400 and -32020, naming both values', async () => {
    const t = await startInbound()
    try {
      const res = await post(t, modern('echo'), headers('foo'))
      assert.equal(res.status, 400)
      const body = res.json() as { id: number; error: { code: number; message: string } }
      assert.equal(body.id, 1)
      assert.equal(body.error.code, -32020)
      assert.match(
        body.error.message,
        /Mcp-Name header value 'foo' does not match body value 'echo'/,
      )
      const noMethod = await post(t, modern('echo'), {
        'mcp-protocol-version': '2026-07-28',
        'mcp-name': 'echo',
      })
      assert.equal(noMethod.status, 400)
      assert.equal(errorOf(noMethod.json()).code, -32020)
      const otherVersion = await post(t, modern('echo', {}, '2026-12-01'), headers('echo'))
      assert.equal(otherVersion.status, 400)
      assert.equal(errorOf(otherVersion.json()).code, -32020)
      assert.equal(t.handler.connections.length, 0)
    } finally {
      await t.close()
    }
  })

  it('answers 202 to a notification and 404 with -32601 to an unknown method', async () => {
    const t = await startInbound()
    try {
      const note = await post(
        t,
        { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 1 } },
        { 'mcp-protocol-version': '2026-07-28' },
      )
      assert.equal(note.status, 202)
      assert.equal(t.handler.connections[0]?.info.kind, 'streamable-http-stateless')
      const meta = {
        'io.modelcontextprotocol/protocolVersion': '2026-07-28',
        'io.modelcontextprotocol/clientCapabilities': {},
      }
      const unknown = await post(
        t,
        { jsonrpc: '2.0', id: 2, method: 'nothing/here', params: { _meta: meta } },
        { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'nothing/here' },
      )
      assert.equal(unknown.status, 404)
      assert.equal(errorOf(unknown.json()).code, -32601)
    } finally {
      await t.close()
    }
  })

  it('aborts the request when the client closes its response stream', async () => {
    const t = await startInbound()
    try {
      const arrived = t.handler.nextMessage('tools/call')
      const aborted = new Promise((resolve) => {
        t.handler.onaborted = resolve
      })
      const client = new AbortController()
      const pending = rawRequest(`${t.url}/mcp`, {
        method: 'POST',
        headers: { ...POST_HEADERS, ...headers('slow') },
        body: JSON.stringify(modern('slow', { ms: 30_000 })),
        signal: client.signal,
      }).catch(() => undefined)
      const { connection } = await within(arrived, 2000, 'the request to arrive')
      client.abort()
      assert.equal(await within(aborted, 2000, 'the abort'), 1)
      await pending
      assert.equal(connection.closed, true)
    } finally {
      await t.close()
    }
  })
})
