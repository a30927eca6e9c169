import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { driveEverything, Inbox, startEverything } from '../../test/fixtures/upstream-helpers.ts'
import { event, scriptedServer, sse } from '../../test/fixtures/upstream-http-server.ts'
import { hasCode } from '../../test/support/errors.ts'
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'
import { silentLogger } from '../telemetry/log.ts'
import { SseOutboundTransport } from './sse-outbound.ts'

function connect(url: string, connectTimeoutMs?: number) {
  return new SseOutboundTransport({
    name: 'legacy',
    url,
    log: silentLogger,
    limits: DEFAULT_JSON_LIMITS,
    ...(connectTimeoutMs === undefined ? {} : { connectTimeoutMs }),
  })
}

describe('legacy HTTP+SSE outbound transport', () => {
  test('carries a raw MCP exchange with the official everything server in sse mode', async () => {
    const server = await startEverything('sse')
    const transport = connect(`${server.origin}/sse`)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      assert.equal(transport.endpoint?.origin, server.origin)
      assert.equal(transport.endpoint?.pathname, '/message')
      const drive = await driveEverything(transport, inbox, '2024-11-05')
      assert.equal(drive.protocolVersion, '2024-11-05')
      assert.ok(drive.toolNames.includes('echo'))
      assert.deepEqual(drive.echo, [{ type: 'text', text: 'Echo: through the gate' }])
    } finally {
      await transport.close()
      await server.stop()
    }
    assert.equal(inbox.closed, true)
  })

  test('posts to the endpoint resolved against the stream URL and reads answers from the stream', async () => {
    let stream: import('node:http').ServerResponse | undefined
    const server = await scriptedServer((req, res) => {
      if (req.method === 'GET') {
        sse(res)
        res.write('event: endpoint\ndata: messages?session=abc\n\n')
        stream = res
        return
      }
      res.writeHead(202).end('Accepted')
      event(stream!, { jsonrpc: '2.0', id: JSON.parse(req.body).id, result: { ok: true } })
    }, '/legacy/sse')
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      assert.equal(transport.endpoint?.href, `${server.origin}/legacy/messages?session=abc`)
      await transport.send({ jsonrpc: '2.0', id: 4, method: 'ping' })
      assert.deepEqual(await inbox.response(4), { jsonrpc: '2.0', id: 4, result: { ok: true } })
    } finally {
      await transport.close()
      await server.close()
    }
    const post = server.requests.find((r) => r.method === 'POST')
    assert.equal(post?.url, '/legacy/messages?session=abc')
    assert.equal(post?.headers['content-type'], 'application/json')
  })

  test('refuses an endpoint on another origin', async () => {
    const server = await scriptedServer((_req, res) => {
      sse(res)
      res.write('event: endpoint\ndata: http://203.0.113.9/steal\n\n')
    })
    const transport = connect(server.url)
    try {
      await assert.rejects(transport.start(), hasCode('ERR_UPSTREAM_PROTOCOL'))
    } finally {
      await transport.close()
      await server.close()
    }
    assert.equal(server.requests.length, 1, 'nothing was posted anywhere')
  })

  test('fails start with a timeout when no endpoint is announced', async () => {
    const server = await scriptedServer((_req, res) => sse(res))
    const transport = connect(server.url, 150)
    try {
      await assert.rejects(transport.start(), hasCode('ERR_UPSTREAM_TIMEOUT'))
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('fires onclose when the server ends the stream', async () => {
    let stream: import('node:http').ServerResponse | undefined
    const server = await scriptedServer((_req, res) => {
      sse(res)
      res.write('event: endpoint\ndata: /post\n\n')
      stream = res
    })
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      stream!.end()
      await inbox.closing()
      await assert.rejects(
        transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' }),
        hasCode('ERR_UPSTREAM_CLOSED'),
      )
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('answers a request refused by the endpoint with an error reply', async () => {
    const server = await scriptedServer((req, res) => {
      if (req.method === 'GET') {
        sse(res)
        res.write('event: endpoint\ndata: /post\n\n')
        return
      }
      res.writeHead(400).end('bad')
    })
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'ping' })
      const reply = await inbox.response(1)
      assert.ok('error' in reply)
      assert.equal(reply.error.code, -32008)
      assert.ok(inbox.errors.some(hasCode('ERR_UPSTREAM_PROTOCOL')))
    } finally {
      await transport.close()
      await server.close()
    }
  })
})
