import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Inbox } from '../../test/fixtures/upstream-helpers.ts'
import { startWsEcho } from '../../test/fixtures/upstream-ws-echo.ts'
import { hasCode } from '../../test/support/errors.ts'
import { BarbicanError } from '../common/errors.ts'
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'
import { silentLogger } from '../telemetry/log.ts'
import { WebSocketOutboundTransport } from './websocket-outbound.ts'

function connect(url: string, maxMessageBytes = DEFAULT_JSON_LIMITS.maxMessageBytes) {
  return new WebSocketOutboundTransport({
    name: 'ws',
    url,
    log: silentLogger,
    limits: { ...DEFAULT_JSON_LIMITS, maxMessageBytes },
    headers: { authorization: 'Bearer upstream-token' },
  })
}

describe('WebSocket outbound transport', () => {
  test('speaks JSON-RPC over the mcp subprotocol, one message per text frame', async () => {
    const server = await startWsEcho()
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'echo', params: { hello: 'ws' } })
      await transport.send({ jsonrpc: '2.0', id: 2, method: 'echo', params: { n: 2 } })
      assert.deepEqual(await inbox.response(1), { jsonrpc: '2.0', id: 1, result: { hello: 'ws' } })
      assert.deepEqual(await inbox.response(2), { jsonrpc: '2.0', id: 2, result: { n: 2 } })
      assert.equal(server.handshakes[0]?.['sec-websocket-protocol'], 'mcp')
      assert.equal(server.handshakes[0]?.authorization, 'Bearer upstream-token')
    } finally {
      await transport.close()
      await server.close()
    }
    assert.equal(inbox.closed, true)
  })

  test('reports a binary frame as a protocol fault and stays open', async () => {
    const server = await startWsEcho()
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'binary' })
      await inbox.until(() => inbox.errors[0])
      assert.ok(hasCode('ERR_UPSTREAM_PROTOCOL')(inbox.errors[0]))
      await transport.send({ jsonrpc: '2.0', id: 2, method: 'echo' })
      await inbox.response(2)
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('closes the connection on a frame beyond the size limit', async () => {
    const server = await startWsEcho()
    const transport = connect(server.url, 1024)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'oversize' })
      await inbox.closing()
      assert.equal(
        inbox.messages.some((m) => 'id' in m && m.id === 1),
        false,
      )
      await assert.rejects(
        transport.send({ jsonrpc: '2.0', id: 2, method: 'echo' }),
        hasCode('ERR_UPSTREAM_CLOSED'),
      )
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('refuses a server that does not accept the mcp subprotocol', async () => {
    const server = await startWsEcho({ acceptMcp: false })
    const transport = connect(server.url)
    try {
      await assert.rejects(transport.start(), (err) => err instanceof BarbicanError)
    } finally {
      await transport.close()
      await server.close()
    }
  })

  test('fires onclose when the server goes away', async () => {
    const server = await startWsEcho()
    const transport = connect(server.url)
    const inbox = new Inbox(transport)
    try {
      await transport.start()
      await server.close()
      await inbox.closing()
    } finally {
      await transport.close()
    }
  })
})
