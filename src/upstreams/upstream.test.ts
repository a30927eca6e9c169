import assert from 'node:assert/strict'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { testUpstream } from '../../test/support/upstreams.ts'
import type { BarbicanError } from '../common/errors.ts'
import { DEFAULT_JSON_LIMITS } from '../protocol/json-limits.ts'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { Hush, jsonLogger, silentLogger } from '../telemetry/log.ts'
import { createOutboundTransport } from '../transports/connect-outbound.ts'
import { memoryPair } from '../transports/memory.ts'
import type { Transport } from '../transports/transport.ts'
import { RECONNECT_CAP_MS } from './reconnect-backoff.ts'
import { Upstream } from './upstream.ts'

/** A legacy (2025-06-18) Streamable HTTP server that records the headers of every request. */
function recordingServer(seen: { method: string; version: string | undefined }[]): Server {
  return createServer(async (req: IncomingMessage, res) => {
    if (req.method !== 'POST') {
      // No standalone stream; a DELETE ending the session is fine.
      res.writeHead(req.method === 'DELETE' ? 200 : 405).end()
      return
    }
    let body = ''
    for await (const chunk of req) body += chunk
    const message = JSON.parse(body) as { id?: number; method?: string }
    seen.push({
      method: message.method ?? '(response)',
      version: req.headers['mcp-protocol-version'] as string,
    })
    if (message.id === undefined) {
      res.writeHead(202).end()
      return
    }
    const reply = (result: unknown) =>
      res
        .writeHead(200, { 'content-type': 'application/json', 'mcp-session-id': 'abc' })
        .end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }))
    if (message.method === 'initialize') {
      reply({
        protocolVersion: '2025-06-18',
        capabilities: { tools: {} },
        serverInfo: { name: 'rec', version: '1' },
      })
    } else if (message.method === 'tools/list') {
      reply({ tools: [] })
    } else {
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          jsonrpc: '2.0',
          id: message.id,
          error: { code: -32601, message: 'no' },
        }),
      )
    }
  })
}

describe('an upstream over Streamable HTTP', () => {
  const seen: { method: string; version: string | undefined }[] = []
  let server: Server
  let url: string
  before(async () => {
    server = recordingServer(seen)
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`
  })
  after(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  test('sends the negotiated MCP-Protocol-Version on every request after initialize', async () => {
    const upstream = testUpstream('rec', () =>
      createOutboundTransport(
        { transport: 'streamable-http', url },
        { name: 'rec', log: silentLogger, limits: DEFAULT_JSON_LIMITS },
      ),
    )
    try {
      await upstream.list('tools')
      const after = seen.slice(seen.findIndex((s) => s.method === 'initialize') + 1)
      assert.ok(after.some((s) => s.method === 'tools/list'))
      for (const s of after)
        assert.equal(s.version, '2025-06-18', `${s.method} carried ${s.version}`)
    } finally {
      await upstream.stop()
    }
  })
})

describe('an upstream that never answers its handshake', () => {
  test('stop() ends the handshake under way at once, closing its connection', async () => {
    let opened = 0
    let closed = 0
    const upstream = testUpstream('mute', () => {
      const [ours, theirs] = memoryPair()
      // The far end reads everything and answers nothing.
      theirs.onclose = () => void closed++
      void theirs.start()
      opened++
      return ours
    })
    const connecting = upstream.connect()
    connecting.catch(() => {})
    while (opened === 0) await new Promise((r) => setTimeout(r, 5))
    const started = Date.now()
    await upstream.stop()
    assert.ok(Date.now() - started < 1_000)
    assert.equal(closed, opened, 'the connection being opened was closed')
    await assert.rejects(connecting, (e) => (e as BarbicanError).code === 'ERR_SHUTTING_DOWN')
    assert.equal(upstream.state, 'stopped')
  })
})

describe('a 2026-07-28 upstream that answers the era probe late', () => {
  test('refuses initialize as modern, is probed again and kept as modern', async () => {
    let discovered = false
    const methods: string[] = []
    const upstream = new Upstream({
      name: 'slow',
      log: silentLogger,
      requestTimeoutMs: 5_000,
      probeTimeoutMs: 100,
      clientInfo: { name: 'barbican', version: '0' },
      clientCapabilities: {},
      onRequest: async (_upstream, request) => ({
        kind: 'error',
        id: request.id,
        code: -32601,
        message: 'no',
      }),
      createTransport: () => {
        const [ours, theirs] = memoryPair()
        // Like the Python SDK: the first discover (answered after the probe gave up) commits
        // the connection to 2026-07-28, and initialize is then refused with -32022.
        theirs.onmessage = (message) => {
          const m = message as { id?: number; method?: string }
          if (m.id === undefined || m.method === undefined) return
          methods.push(m.method)
          const reply = (body: object) =>
            void theirs.send({ jsonrpc: '2.0', id: m.id!, ...body } as JsonRpcMessage)
          if (m.method === 'server/discover') {
            const answer = () => {
              discovered = true
              reply({
                result: {
                  supportedVersions: ['2026-07-28'],
                  capabilities: { tools: {} },
                  serverInfo: { name: 'slow', version: '1' },
                },
              })
            }
            if (discovered) answer()
            else setTimeout(answer, 300)
          } else if (m.method === 'initialize') {
            if (discovered) {
              reply({
                error: {
                  code: -32022,
                  message: 'connection is serving the 2026-07-28 protocol',
                  data: { supported: ['2026-07-28'] },
                },
              })
            } else {
              setTimeout(
                () =>
                  reply({
                    error: {
                      code: -32022,
                      message: 'connection is serving the 2026-07-28 protocol',
                    },
                  }),
                400,
              )
            }
          } else if (m.method === 'tools/list') {
            reply({ result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } })
          } else reply({ error: { code: -32601, message: 'no' } })
        }
        void theirs.start()
        return ours
      },
    })
    try {
      const tools = await upstream.list('tools')
      assert.deepEqual(
        tools.map((t) => t.name),
        ['echo'],
      )
      assert.equal(upstream.era, 'modern')
      assert.deepEqual(methods.slice(0, 3), ['server/discover', 'initialize', 'server/discover'])
    } finally {
      await upstream.stop()
    }
  })
})

describe('an upstream that keeps failing', () => {
  test('logs one line per state change: failed, still failing at the longest backoff, ready', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout', 'Date'] })
    const lines: { level: string; msg: string; [key: string]: unknown }[] = []
    const log = jsonLogger({ level: 'debug', write: (line) => lines.push(JSON.parse(line)) })
    // The transports' logger, hushed by the same switch, as the gateway plan makes it.
    const hush = new Hush()
    const transportLog = hush.wrap(log)
    let attempts = 0
    let serving = false
    const upstream = new Upstream({
      name: 'flaky',
      log,
      hush,
      requestTimeoutMs: 5_000,
      restartOnExit: true,
      clientInfo: { name: 'barbican', version: '0' },
      clientCapabilities: {},
      onRequest: async (_upstream, request) => ({
        kind: 'error',
        id: request.id,
        code: -32601,
        message: 'no',
      }),
      createTransport: (): Transport => {
        attempts++
        if (serving) {
          const [ours, theirs] = memoryPair()
          void new McpServer({ name: 'flaky', version: '1' }).connect(theirs as never)
          return ours
        }
        return {
          // What a crashing process's transport says of each attempt.
          start: async () => {
            transportLog.warn('upstream process exited', { code: 3 })
            throw new Error('exited with code 3')
          },
          send: async () => {},
          close: async () => {},
        }
      },
    })
    /** Lets the retry timers fire, `ms` at a time, and the attempts they start settle. */
    const advance = async (ms: number) => {
      t.mock.timers.tick(ms)
      for (let i = 0; i < 20; i++) await Promise.resolve()
    }
    await upstream.start()
    while (attempts < 12) await advance(1_000)
    const visible = () => lines.filter((l) => l.level !== 'debug').map((l) => `${l.level} ${l.msg}`)
    assert.deepEqual(visible(), [
      'warn upstream process exited',
      'warn upstream failed',
      'warn upstream still failing',
    ])
    const failed = lines.find((l) => l.msg === 'upstream failed')
    assert.match(String(failed?.next), /retrying with backoff up to 30 s; logged again when ready/)
    const reminder = lines.find((l) => l.msg === 'upstream still failing')
    assert.equal(reminder?.retryInMs, RECONNECT_CAP_MS)
    // Every attempt was made and logged, at debug.
    const quiet = lines.filter((l) => l.level === 'debug').map((l) => l.msg)
    assert.equal(quiet.filter((m) => m === 'upstream process exited').length, attempts - 1)
    assert.equal(quiet.filter((m) => m === 'upstream failed again').length, attempts - 2)
    assert.equal(upstream.state, 'failed')

    serving = true
    const before = attempts
    // Read through a function: tsc narrowed `state` to 'failed' at the assertion above.
    const state = (): string => upstream.state
    while (state() !== 'ready') await advance(RECONNECT_CAP_MS)
    assert.equal(attempts, before + 1)
    const ready = lines.at(-1)
    assert.equal(`${ready?.level} ${ready?.msg}`, 'info upstream ready')
    assert.equal(ready?.afterFailedAttempts, before)
    // Ready again: the next failure is news and logged.
    assert.equal(hush.on, false)
    await upstream.stop()
  })
})
