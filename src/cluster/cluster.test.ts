import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, it } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { jsonLogger } from '../common/log.ts'
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
