/**
 * The caller's identity reaches upstreams whatever inbound transport carried the call: legacy
 * HTTP+SSE (SDK v1), Streamable HTTP in the 2026-07-28 stateless mode (SDK v2), and WebSocket.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import {
  Client as ClientV2,
  StreamableHTTPClientTransport as StreamableHTTPClientTransportV2,
} from '@modelcontextprotocol/client'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js'
import WebSocket from 'ws'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'

type Context = { user: string; tenant?: string }

function contextOf(result: unknown): Context {
  const text = (result as { content: { text: string }[] }).content[0]!.text
  return (JSON.parse(text) as { meta: Record<string, Context> }).meta['dev.barbican/context']!
}

describe('identity over every inbound transport', () => {
  let upstream: RecordingUpstream
  let server: RunningServer
  const carol = generateApiKey()
  const auth = { authorization: `Bearer ${carol.key}` }

  before(async () => {
    upstream = await startRecordingUpstream()
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: { rec: { url: upstream.url, transport: 'streamable-http' } },
      auth: { apiKeys: { keys: [{ id: 'c', hash: carol.hash, subject: 'carol', tenant: 't9' }] } },
    })
    server = await startServer(parseConfigText(text).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await upstream?.close()
  })

  test('legacy HTTP+SSE (SDK v1)', async () => {
    const client = new Client({ name: 'sse', version: '1.0.0' })
    await client.connect(
      new SSEClientTransport(new URL(`${server.url}/sse`), {
        requestInit: { headers: auth },
        eventSourceInit: {
          fetch: (url, init) =>
            fetch(url, { ...init, headers: { ...(init?.headers as object), ...auth } }),
        },
      }),
    )
    try {
      const context = contextOf(await client.callTool({ name: 'whoami', arguments: {} }))
      assert.deepEqual([context.user, context.tenant], ['carol', 't9'])
    } finally {
      await client.close()
    }
  })

  test('Streamable HTTP, 2026-07-28 stateless requests (SDK v2)', async () => {
    const client = new ClientV2({ name: 'v2', version: '1.0.0' })
    await client.connect(
      new StreamableHTTPClientTransportV2(new URL(`${server.url}/mcp`), {
        requestInit: { headers: auth },
      }),
    )
    try {
      const context = contextOf(await client.callTool({ name: 'whoami', arguments: {} }))
      assert.deepEqual([context.user, context.tenant], ['carol', 't9'])
    } finally {
      await client.close()
    }
  })

  test('WebSocket', async () => {
    const ws = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, 'mcp', { headers: auth })
    const replies = new Map<number, unknown>()
    const waiting = new Map<number, (reply: unknown) => void>()
    ws.on('message', (data) => {
      const message = JSON.parse(String(data)) as { id?: number }
      if (typeof message.id !== 'number') return
      replies.set(message.id, message)
      waiting.get(message.id)?.(message)
    })
    const ask = (id: number, method: string, params: unknown) =>
      new Promise<unknown>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no answer to ${method}`)), 10_000)
        waiting.set(id, (reply) => {
          clearTimeout(timer)
          resolve(reply)
        })
        ws.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }))
      })
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve())
      ws.once('error', reject)
    })
    try {
      await ask(1, 'initialize', {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'ws', version: '1' },
      })
      ws.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }))
      const reply = (await ask(2, 'tools/call', { name: 'whoami', arguments: {} })) as {
        result: unknown
      }
      const context = contextOf(reply.result)
      assert.deepEqual([context.user, context.tenant], ['carol', 't9'])
    } finally {
      await new Promise<void>((resolve) => {
        ws.once('close', () => resolve())
        ws.close()
      })
    }
  })
})
