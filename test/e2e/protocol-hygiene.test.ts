/**
 * Protocol hygiene at the edges, over a real Barbican and a recording upstream
 * (test/fixtures/upstream-recorder.ts): members smuggled beside a method's own params never reach
 * the upstream, and an error about a malformed response never carries that response's id, which
 * on WebSocket may be the id of the client's own request in flight.
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import WebSocket from 'ws'
import type { RunningServer } from '../../src/app/server.ts'
import {
  recordedMessages,
  startRecordingGateway,
  upstreamFaults,
} from '../support/upstream-record.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const _recorder = join(root, 'test/fixtures/upstream-recorder.ts')

type Message = Record<string, unknown>

/** A raw WebSocket MCP client: sends any text, collects every message Barbican sends back. */
async function rawWebSocket(url: string) {
  const ws = new WebSocket(url, 'mcp')
  const received: Message[] = []
  const waiters: (() => void)[] = []
  ws.on('message', (data) => {
    received.push(JSON.parse(String(data)) as Message)
    for (const wake of waiters.splice(0)) wake()
  })
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
  const until = async (done: () => boolean, ms = 5000): Promise<void> => {
    const deadline = Date.now() + ms
    while (!done()) {
      if (Date.now() > deadline) throw new Error(`timed out; received ${JSON.stringify(received)}`)
      await new Promise<void>((resolve) => {
        waiters.push(resolve)
        setTimeout(resolve, 50)
      })
    }
  }
  return {
    received,
    send: (message: unknown) =>
      ws.send(typeof message === 'string' ? message : JSON.stringify(message)),
    async request(message: Message): Promise<Message> {
      ws.send(JSON.stringify(message))
      await until(() => received.some((m) => m.id === message.id))
      return received.find((m) => m.id === message.id)!
    },
    until,
    close: () => ws.close(),
  }
}

describe('protocol hygiene toward upstreams and clients', () => {
  let server: RunningServer
  let record: string
  let wsUrl: string

  before(async () => {
    ;({ server, record } = await startRecordingGateway('barbican-hygiene-'))
    wsUrl = `${server.url.replace('http', 'ws')}/ws`
  })

  after(async () => {
    await server.stop()
  })

  test('forwards only the params members each method defines, dropping look-alikes', async () => {
    const client = await rawWebSocket(wsUrl)
    try {
      const init = await client.request({
        jsonrpc: '2.0',
        id: 'init',
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'hygiene', version: '1' },
        },
      })
      assert.ok(init.result, JSON.stringify(init))
      client.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
      const smuggled = [
        {
          method: 'tools/call',
          params: {
            name: 'echo',
            Name: 'rm',
            NAME: 'rm',
            'name ': 'rm',
            arguments: { a: 1 },
            Arguments: { b: 2 },
          },
        },
        { method: 'prompts/get', params: { name: 'greet', Name: 'other', arguments: {} } },
        { method: 'resources/read', params: { uri: 'mem://a', URI: 'file:///etc/passwd' } },
        {
          method: 'completion/complete',
          params: {
            ref: { type: 'ref/prompt', name: 'greet', Name: 'other' },
            argument: { name: 'who', value: 'x' },
            Ref: { type: 'ref/prompt', name: 'other' },
          },
        },
        { method: 'resources/subscribe', params: { uri: 'mem://a', Uri: 'mem://b' } },
      ]
      let n = 0
      for (const call of smuggled) {
        const reply = await client.request({ jsonrpc: '2.0', id: ++n, ...call })
        assert.ok(reply.result, `${call.method}: ${JSON.stringify(reply)}`)
      }
      const upstream = recordedMessages(record) as Message[]
      for (const call of smuggled) {
        const seen = upstream.find((m) => m.method === call.method)
        assert.ok(seen, `${call.method} reached the upstream`)
        const params = seen.params as Message
        assert.deepEqual(
          Object.keys(params)
            .filter((k) => k !== '_meta')
            .sort(),
          Object.keys(call.params)
            .filter((k) => /^[a-z]+$/.test(k))
            .sort(),
          call.method,
        )
      }
      const complete = upstream.find((m) => m.method === 'completion/complete')
      assert.deepEqual((complete?.params as Message | undefined)?.ref, {
        type: 'ref/prompt',
        name: 'greet',
      })
      assert.deepEqual(upstreamFaults(record), [])
    } finally {
      client.close()
    }
  })

  test('answers a malformed response with id null, never with the id of a request in flight', async () => {
    const client = await rawWebSocket(wsUrl)
    try {
      await client.request({
        jsonrpc: '2.0',
        id: 'init',
        method: 'initialize',
        params: {
          protocolVersion: '2025-06-18',
          capabilities: {},
          clientInfo: { name: 'h', version: '1' },
        },
      })
      // The client's own request 7 is in flight when it (wrongly) sends a response numbered 7.
      client.send({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'echo', arguments: {} },
      })
      client.send('{"id":7,"result":{}}')
      client.send('{"jsonrpc":"2.0","id":7,"result":"not an object"}')
      client.send('{"jsonrpc":"2.0","id":7,"error":{"code":"x","message":"m"}}')
      await client.until(() => client.received.filter((m) => m.id === null).length === 3)
      await client.until(() => client.received.some((m) => m.id === 7))
      // Let any late echo arrive before counting.
      await new Promise((resolve) => setTimeout(resolve, 200))
      const sevens = client.received.filter((m) => m.id === 7)
      assert.equal(sevens.length, 1, JSON.stringify(client.received))
      assert.ok(sevens[0]!.result, 'the one reply to 7 is its real result')
      for (const e of client.received.filter((m) => m.id === null)) {
        assert.equal((e.error as Message).code, -32600)
      }
    } finally {
      client.close()
    }
  })
})
