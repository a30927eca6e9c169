import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { HOP_HEADER } from '../transports/session-directory.ts'
import { Cluster, publishToFleet } from './cluster.ts'

const REDIS = process.env.BARBICAN_TEST_REDIS_URL ?? 'redis://127.0.0.1:6379'
const quiet = () => jsonLogger({ write: () => {} })

/** A replica stand-in: answers its own sessions, hands the others to its cluster, else 404. */
async function replica(cluster: () => Cluster, own: Set<string>): Promise<Server> {
  const server = createServer(async (req, res) => {
    const id = String(req.headers['mcp-session-id'] ?? '')
    if (own.has(id)) {
      let body = ''
      for await (const chunk of req) body += chunk
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ at: 'owner', body, hop: req.headers[HOP_HEADER] ?? null }))
      return
    }
    if (req.headers[HOP_HEADER] === undefined && (await cluster().relay(id, req, res))) return
    res.writeHead(404).end('Session not found')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return server
}

const urlOf = (s: Server) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`

function post(base: string, id: string, body: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(`${base}/mcp`, {
      method: 'POST',
      headers: { 'mcp-session-id': id, 'content-type': 'application/json' },
    })
    req.on('response', async (res: IncomingMessage) => {
      let text = ''
      for await (const chunk of res) text += chunk
      resolve({ status: res.statusCode ?? 0, text })
    })
    req.on('error', reject)
    req.end(body)
  })
}

describe('Cluster over Redis', () => {
  const prefix = `barbican-test-${randomBytes(6).toString('hex')}:`
  const options = { redisUrl: REDIS, prefix, log: quiet(), heartbeatMs: 100, deadAfterMs: 300 }
  let a: Cluster
  let b: Cluster
  const ownA = new Set<string>()
  let serverA: Server
  let serverB: Server

  before(async () => {
    a = await Cluster.join(options)
    b = await Cluster.join(options)
    serverA = await replica(() => a, ownA)
    serverB = await replica(() => b, new Set())
    await a.announce(urlOf(serverA))
    await b.announce(urlOf(serverB))
  })

  after(async () => {
    await Promise.allSettled([a.leave(), b.leave()])
    serverA.close()
    serverB.close()
  })

  it('relays a request for a session held elsewhere to its owner, body and all', async () => {
    ownA.add('s1')
    a.opened('s1')
    await new Promise((r) => setTimeout(r, 20))
    const reply = await post(urlOf(serverB), 's1', '{"x":1}')
    assert.equal(reply.status, 200)
    assert.deepEqual(JSON.parse(reply.text), { at: 'owner', body: '{"x":1}', hop: b.id })
  })

  it('answers an unknown session with the local 404', async () => {
    const reply = await post(urlOf(serverB), 'nobody', '{}')
    assert.equal(reply.status, 404)
  })

  it('gives 404, not a hang, once the owner is unreachable', async () => {
    ownA.add('s2')
    a.opened('s2')
    const owner = await Cluster.join(options)
    // A replica that announced an address nothing listens on: like one killed a moment ago.
    const dead = createServer()
    await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve))
    const deadUrl = urlOf(dead)
    dead.close()
    await owner.announce(deadUrl)
    owner.opened('s3')
    await new Promise((r) => setTimeout(r, 150))
    const started = Date.now()
    const reply = await post(urlOf(serverB), 's3', '{}')
    assert.equal(reply.status, 404)
    assert.ok(Date.now() - started < 1500, 'answered within the connect timeout')
    await owner.leave()
  })

  it('answers 502, not 404, when the owner fails after the request reached it', async () => {
    // A 404 would invite the client to send the call again on a new session: it may have run.
    const owner = await Cluster.join(options)
    const dying = createServer((req) => req.socket.destroy())
    await new Promise<void>((resolve) => dying.listen(0, '127.0.0.1', resolve))
    await owner.announce(urlOf(dying))
    owner.opened('s5')
    await new Promise((r) => setTimeout(r, 150))
    const reply = await post(urlOf(serverB), 's5', '{}')
    assert.equal(reply.status, 502)
    assert.equal(JSON.parse(reply.text).error.code, -32019)
    dying.close()
    await owner.leave()
  })

  it('forgets a replica that stopped its heartbeat: its sessions get 404', async () => {
    const owner = await Cluster.join(options)
    await owner.announce('http://127.0.0.1:9')
    owner.opened('s4')
    await owner.withdraw()
    const reply = await post(urlOf(serverB), 's4', '{}')
    assert.equal(reply.status, 404)
    await owner.leave()
  })

  it('knows the live replicas', async () => {
    await new Promise((r) => setTimeout(r, 150))
    assert.equal(b.replicas.get(a.id), urlOf(serverA))
    assert.equal(b.replicas.get(b.id), urlOf(serverB))
  })

  it('carries bus messages to the other replicas, not back to the sender', async () => {
    const atA: unknown[] = []
    const atB: unknown[] = []
    a.on('t', (d) => atA.push(d))
    b.on('t', (d) => atB.push(d))
    a.publish('t', { n: 1 })
    const deadline = Date.now() + 1000
    while (atB.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10))
    assert.deepEqual(atB, [{ n: 1 }])
    assert.deepEqual(atA, [])
  })

  it('carries a message published from outside the fleet (the CLI) to every replica', async () => {
    const atA: unknown[] = []
    const atB: unknown[] = []
    a.on('cli', (d) => atA.push(d))
    b.on('cli', (d) => atB.push(d))
    await publishToFleet({ redisUrl: REDIS, prefix }, 'cli', { k: 'x' })
    const deadline = Date.now() + 1000
    while ((atA.length === 0 || atB.length === 0) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10))
    assert.deepEqual(atA, [{ k: 'x' }])
    assert.deepEqual(atB, [{ k: 'x' }])
  })

  it("posts a WebSocket client's retry to the holder and hands back each message", async () => {
    // A holder stand-in, answering by what the state names: the holder's real answers are
    // tested end to end (test/e2e/fleet-held-calls.test.ts); here, each way an answer can go.
    const seen: IncomingMessage['headers'][] = []
    const holder = createServer(async (req, res) => {
      let body = ''
      for await (const chunk of req) body += chunk
      seen.push(req.headers)
      const { id, params } = JSON.parse(body) as { id: number; params: { requestState: string } }
      switch (params.requestState) {
        case 'streamed':
          res.writeHead(200, { 'content-type': 'text/event-stream' })
          res.write(
            `data: ${JSON.stringify({ jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } })}\n\n`,
          )
          res.end(`data: ${JSON.stringify({ jsonrpc: '2.0', id, result: { ok: true } })}\n\n`)
          return
        case 'refused':
          res.writeHead(401, { 'content-type': 'application/json' })
          res.end(
            JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32001, message: 'no' } }),
          )
          return
        case 'garbage':
          res.writeHead(500).end('oops')
          return
        default:
          req.socket.destroy()
      }
    })
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve))
    const owner = await Cluster.join(options)
    await owner.announce(urlOf(holder))
    b.heldCallOwner = (state) => (state === 'here' ? b.id : owner.id)
    b.retryHeaders = async (server, request) => ({
      'mcp-method': request.method,
      'x-server': server,
    })
    const retry = async (requestState: string, signal = new AbortController().signal) => {
      const sent: unknown[] = []
      const relayed = await b.relaySocketRetry(
        { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 't', requestState } },
        {
          server: 'alpha',
          headers: {
            authorization: 'Bearer k',
            host: 'gw.example',
            'sec-websocket-key': 'x',
            upgrade: 'websocket',
          },
          identity: undefined,
          send: (m) => sent.push(m),
          signal,
        },
      )
      return { relayed, sent }
    }
    try {
      assert.deepEqual(await retry('here'), { relayed: false, sent: [] }, 'held here: served here')
      assert.deepEqual((await retry('streamed')).sent, [
        { jsonrpc: '2.0', method: 'notifications/progress', params: { progress: 1 } },
        { jsonrpc: '2.0', id: 7, result: { ok: true } },
      ])
      const headers = seen.at(-1)!
      assert.equal(headers.authorization, 'Bearer k', "the client's own credential")
      assert.equal(headers.host, 'gw.example')
      assert.equal(headers[HOP_HEADER], b.id)
      assert.equal(headers['mcp-method'], 'tools/call')
      assert.equal(headers['x-server'], 'alpha')
      assert.equal(headers['sec-websocket-key'], undefined, "the handshake's own headers stay")
      // A refusal naming no id is this request's answer.
      assert.deepEqual((await retry('refused')).sent, [
        { jsonrpc: '2.0', id: 7, error: { code: -32001, message: 'no' } },
      ])
      // Cut after the request may have reached the holder, or no response: -32019, never a re-run.
      for (const state of ['cut', 'garbage']) {
        const { relayed, sent } = await retry(state)
        assert.equal(relayed, true)
        assert.equal((sent[0] as { error: { code: number } }).error.code, -32019, state)
      }
      // Cancelled by the client: the holder sees the request go, and nothing is sent.
      const cancel = new AbortController()
      cancel.abort()
      assert.deepEqual(await retry('streamed', cancel.signal), { relayed: true, sent: [] })
    } finally {
      b.heldCallOwner = undefined
      b.retryHeaders = undefined
      holder.close()
      await owner.leave()
    }
  })

  it('tells a WebSocket client at once that a retry names a stopped replica', async () => {
    b.heldCallOwner = () => 'a-replica-long-gone'
    b.retryHeaders = async () => ({})
    try {
      const sent: unknown[] = []
      const relayed = await b.relaySocketRetry(
        { jsonrpc: '2.0', id: 'r', method: 'tools/call', params: { requestState: 's' } },
        {
          server: 'default',
          headers: {},
          identity: undefined,
          send: (m) => sent.push(m),
          signal: new AbortController().signal,
        },
      )
      assert.equal(relayed, true)
      const { error } = sent[0] as { error: { code: number; message: string } }
      assert.equal(error.code, -32602)
      assert.match(error.message, /replica that has stopped; call again/)
    } finally {
      b.heldCallOwner = undefined
      b.retryHeaders = undefined
    }
  })

  it('hands every replica the same request-state key', async () => {
    const [ka, kb] = await Promise.all([a.sharedStateKey(), b.sharedStateKey()])
    assert.equal(ka.length, 32)
    assert.deepEqual(ka, kb)
  })
})

describe('Cluster without Redis', () => {
  it('refuses to join with ERR_CLUSTER_UNAVAILABLE', async () => {
    await assert.rejects(
      Cluster.join({ redisUrl: 'redis://127.0.0.1:1', prefix: 'x:', log: quiet() }),
      (err: unknown) => err instanceof BarbicanError && err.code === 'ERR_CLUSTER_UNAVAILABLE',
    )
  })
})
