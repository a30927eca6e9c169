/**
 * Legacy sessions without sticky routing (docs/decisions/058), in-process: two gateways joined
 * to one fleet on the real Redis. An HTTP+SSE session opened on A takes its POSTs through B
 * (relayed; the replies come on A's stream); a Streamable HTTP session opened on A is used
 * through B by an SDK client; another identity's request for that session is still a 404.
 */
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { joinFleet, serveInFleet } from '../../src/app/fleet.ts'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import type { Cluster } from '../../src/cluster/cluster.ts'
import { normalizeConfig } from '../../src/config/normalize.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { freshRedisPrefix, REDIS_URL } from '../support/backends.ts'

const alice = generateApiKey()
const bob = generateApiKey()
const everything = new URL(
  '../../node_modules/@modelcontextprotocol/server-everything/dist/index.js',
  import.meta.url,
).pathname

describe('legacy sessions relayed between replicas', () => {
  const redis = { url: REDIS_URL, prefix: freshRedisPrefix() }
  const env: NodeJS.ProcessEnv = {}
  const servers: RunningServer[] = []
  const clusters: Cluster[] = []

  before(async () => {
    const config = normalizeConfig({
      listen: '127.0.0.1:0',
      auth: {
        apiKeys: {
          keys: [
            { id: 'alice', hash: alice.hash, subject: 'alice' },
            { id: 'bob', hash: bob.hash, subject: 'bob' },
          ],
        },
      },
      upstreams: { everything: { command: process.execPath, args: [everything, 'stdio'] } },
    })
    for (let i = 0; i < 2; i++) {
      const cluster = (await joinFleet(redis, env, silentLogger))!
      const server = await startServer(config, silentLogger)
      await serveInFleet(cluster, server, {})
      servers.push(server)
      clusters.push(cluster)
    }
  })

  after(async () => {
    for (const s of servers) await s.stop()
    for (const c of clusters) await c.leave()
  })

  test('HTTP+SSE: POSTs through another replica reach the session, replies on its stream', async () => {
    const [a, b] = servers as [RunningServer, RunningServer]
    const auth = { authorization: `Bearer ${alice.key}` }
    const stream = await fetch(`${a.url}/sse`, {
      headers: { ...auth, accept: 'text/event-stream' },
    })
    assert.equal(stream.status, 200)
    const reader = stream.body!.getReader()
    const decoder = new TextDecoder()
    let seen = ''
    const next = async (pattern: RegExp) => {
      while (!pattern.test(seen)) {
        const { value, done } = await reader.read()
        if (done) throw new Error(`stream ended: ${seen}`)
        seen += decoder.decode(value)
      }
      return pattern.exec(seen)!
    }
    const endpoint = (await next(/event: endpoint\ndata: (\S+)/))[1]!
    const post = (body: unknown, key = alice.key) =>
      fetch(`${b.url}${endpoint}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
    const init = await post({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2024-11-05',
        capabilities: {},
        clientInfo: { name: 't', version: '1' },
      },
    })
    assert.equal(init.status, 202)
    await next(/"id":1,"result":\{[^\n]*"serverInfo"/)
    const intruder = await post({ jsonrpc: '2.0', id: 2, method: 'ping' }, bob.key)
    assert.equal(intruder.status, 404, 'another identity cannot use the session through a relay')
    await reader.cancel()
  })

  test('Streamable HTTP: an SDK client whose session lives on A works through B', async () => {
    const [a, b] = servers as [RunningServer, RunningServer]
    const headers = { authorization: `Bearer ${alice.key}` }
    const client = new Client({ name: 'relayed', version: '1.0.0' })
    const transport = new StreamableHTTPClientTransport(new URL(`${a.url}/mcp`), {
      requestInit: { headers },
    })
    await client.connect(transport)
    const id = transport.sessionId!
    const res = await fetch(`${b.url}/mcp`, {
      method: 'POST',
      headers: {
        ...headers,
        'mcp-session-id': id,
        'mcp-protocol-version': '2025-11-25',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 7,
        method: 'tools/call',
        params: { name: 'echo', arguments: { message: 'via b' } },
      }),
    })
    assert.equal(res.status, 200)
    assert.match(await res.text(), /Echo: via b/)
    const stranger = await fetch(`${b.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${bob.key}`,
        'mcp-session-id': id,
        'mcp-protocol-version': '2025-11-25',
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 8, method: 'ping' }),
    })
    assert.equal(stranger.status, 404)
    await client.close()
  })
})
