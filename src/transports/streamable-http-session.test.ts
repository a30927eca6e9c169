import assert from 'node:assert/strict'
import { createServer, request, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { describe, it } from 'node:test'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { StreamableHttpSession } from './streamable-http-session.ts'

const log = jsonLogger({ level: 'error', write: () => {} })

function session(): StreamableHttpSession {
  return new StreamableHttpSession(
    's1',
    'anonymous',
    'default',
    {
      replay: { maxEvents: 100, maxBytes: 1 << 20 },
      retainedStreams: 4,
      sse: { maxQueuedBytes: 1 << 20, keepAliveMs: 0, log },
      log,
    },
    () => {},
  )
}

const call: JsonRpcMessage = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: {} }
const progress: JsonRpcMessage = {
  jsonrpc: '2.0',
  method: 'notifications/progress',
  params: { progressToken: 't', progress: 1 },
}

describe('StreamableHttpSession', () => {
  it('sends a related message for a POST its client closed to the standalone stream', {
    timeout: 5000,
  }, async () => {
    const s = session()
    let postClosed!: () => void
    const closed = new Promise<void>((resolve) => {
      postClosed = resolve
    })
    let received!: () => void
    const receivedPost = new Promise<void>((resolve) => {
      received = resolve
    })
    s.onmessage = () => received()
    const server = createServer((req, res: ServerResponse) => {
      if (req.method === 'GET') {
        s.receiveGet(res, undefined)
        return
      }
      res.on('close', () => postClosed())
      req.resume()
      req.on('end', () =>
        s.receivePost(res, [{ ok: true, message: call }], false, true, req.headers, undefined),
      )
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    try {
      // The standalone GET stream, read as it arrives.
      let standalone = ''
      const gotEvent = new Promise<void>((resolve) => {
        request({ port, method: 'GET', headers: { accept: 'text/event-stream' } }, (res) => {
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            standalone += chunk
            if (standalone.includes('notifications/progress')) resolve()
          })
        }).end()
      })
      // A POST whose client goes away before anything is sent on it.
      const post = request({ port, method: 'POST' })
      post.on('error', () => {})
      post.end('{}')
      await receivedPost
      post.destroy()
      await closed
      await s.send(progress, { relatedRequestId: 1 })
      await gotEvent
      assert.match(standalone, /"progress":1/)
      // The request's answer has no one to reach: dropped without an error.
      await s.send({ jsonrpc: '2.0', id: 1, result: {} })
      assert.equal(s.working, false)
    } finally {
      await s.close()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  })
})
