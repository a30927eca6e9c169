import assert from 'node:assert/strict'
import { mkdtempSync, rmSync } from 'node:fs'
import { createServer, request, type Server } from 'node:http'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { silentLogger } from '../telemetry/log.ts'
import { type EgressAttempt, type EgressProxy, startEgressProxy } from './egress-proxy.ts'

/** One request through the proxy's unix socket: absolute-form, as a forward proxy gets it. */
function forward(socketPath: string, url: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: url, headers: { host: 'proxy' } }, (res) => {
      let body = ''
      res.setEncoding('utf8')
      res.on('data', (c: string) => {
        body += c
      })
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }))
    })
    req.once('error', reject)
    req.end()
  })
}

/** The status line a CONNECT gets. */
function tunnel(socketPath: string, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(socketPath)
    socket.once('error', reject)
    socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`)
    socket.once('data', (chunk) => {
      socket.destroy()
      resolve(chunk.toString('latin1').split('\r\n')[0]!)
    })
  })
}

describe('the egress proxy', () => {
  let dir: string
  let site: Server
  let port: number
  let proxy: EgressProxy
  const refused: EgressAttempt[] = []

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'egress-proxy-'))
    site = createServer((req, res) => res.end(`${req.headers.host} ${req.url}`))
    await new Promise<void>((resolve) => site.listen(0, '127.0.0.1', resolve))
    port = (site.address() as { port: number }).port
    proxy = await startEgressProxy(join(dir, 'p.sock'), {
      upstream: 'up',
      allow: [`127.0.0.1:${port}`, `rebound.example.com:${port}`, `listed.example.com:${port}`],
      log: silentLogger,
      onRefused: (a) => refused.push(a),
      // A name that resolves to loopback (rebinding), and one that resolves to a listed address.
      resolve: async (host) => (host === 'rebound.example.com' ? ['127.0.0.2'] : ['127.0.0.1']),
    })
  })

  after(async () => {
    await proxy.close()
    site.close()
    rmSync(dir, { recursive: true, force: true })
  })

  test('forwards plain http to a listed destination, keeping the Host header', async () => {
    const answer = await forward(proxy.socketPath, `http://127.0.0.1:${port}/a?b=1`)
    assert.deepEqual(answer, { status: 200, body: `127.0.0.1:${port} /a?b=1` })
  })

  test('tunnels CONNECT to a listed destination', async () => {
    assert.equal(
      await tunnel(proxy.socketPath, `127.0.0.1:${port}`),
      'HTTP/1.1 200 Connection Established',
    )
  })

  test('refuses an unlisted destination before any lookup, and reports it', async () => {
    const answer = await forward(proxy.socketPath, 'http://127.0.0.1:1/')
    assert.equal(answer.status, 403)
    assert.match(answer.body, /127\.0\.0\.1:1 is not in sandbox\.network\.allow/)
    assert.match(await tunnel(proxy.socketPath, 'example.com:443'), /^HTTP\/1\.1 403/)
    assert.deepEqual(
      refused.map((r) => `${r.method} ${r.host}:${r.port}`),
      ['GET 127.0.0.1:1', 'CONNECT example.com:443'],
    )
  })

  test('refuses a listed name whose DNS answer is a special address that is not listed', async () => {
    const answer = await forward(proxy.socketPath, `http://rebound.example.com:${port}/`)
    assert.equal(answer.status, 403)
    assert.match(answer.body, /resolves to 127\.0\.0\.2, a loopback address/)
    assert.equal(refused.at(-1)?.address, '127.0.0.2')
    // Its answer is a listed address: allowed, and connected to that very address.
    const listed = await forward(proxy.socketPath, `http://listed.example.com:${port}/x`)
    assert.deepEqual(listed, { status: 200, body: `listed.example.com:${port} /x` })
  })

  test('refuses a request that is not absolute http', async () => {
    assert.equal((await forward(proxy.socketPath, '/relative')).status, 400)
  })
})
