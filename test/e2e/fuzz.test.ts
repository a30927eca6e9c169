/**
 * A seeded, structure-aware fuzz test over every inbound transport (stdio, Streamable HTTP,
 * legacy HTTP+SSE, WebSocket): mutated MCP messages (test/support/fuzz-messages.ts) go through
 * a real Barbican to a recording upstream (test/fixtures/upstream-recorder.ts). It checks that
 * every request id gets at most one reply (exactly one for a request with an intact envelope),
 * that no reply carries an id the client used only in a response, that every reply is clean
 * JSON-RPC, that the upstream received nothing but clean JSON-RPC with only the params each
 * method defines, and that Barbican still serves a clean call afterwards.
 *
 * Bounded and replayable: BARBICAN_FUZZ_SEED replays a run (the seed is in every failure
 * message), BARBICAN_FUZZ_COUNT sets the messages per transport (default 350).
 */
import assert from 'node:assert/strict'
import { join } from 'node:path'
import { PassThrough } from 'node:stream'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import WebSocket from 'ws'
import type { RunningServer } from '../../src/app/server.ts'
import { isPlainObject } from '../../src/protocol/jsonrpc.ts'
import { serveStdio } from '../../src/transports/stdio-inbound.ts'
import { MessageFuzzer } from '../support/fuzz-messages.ts'
import { startRecordingGateway, upstreamFaults } from '../support/upstream-record.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const _recorder = join(root, 'test/fixtures/upstream-recorder.ts')

const SEED = Number(process.env.BARBICAN_FUZZ_SEED ?? Math.floor(Math.random() * 2 ** 31))
const COUNT = Number(process.env.BARBICAN_FUZZ_COUNT ?? 350)
const replay = `(replay: BARBICAN_FUZZ_SEED=${SEED})`

/** One client connection over one inbound transport, speaking raw text. */
interface Driver {
  /** Connects and runs the legacy handshake at `revision`. */
  open(revision: string): Promise<void>
  /** Sends one payload; resolves once it is handed over (HTTP: once the POST is answered). */
  send(text: string): Promise<void>
  /** Every message Barbican sent back, batches flattened, in arrival order. */
  readonly received: unknown[]
  close(): Promise<void>
}

function collect(received: unknown[], text: string): void {
  if (text.trim() === '') return
  const value = JSON.parse(text) as unknown
  if (Array.isArray(value)) received.push(...value)
  else received.push(value)
}

function initialize(revision: string): string {
  return JSON.stringify({
    jsonrpc: '2.0',
    id: 'init',
    method: 'initialize',
    params: {
      protocolVersion: revision,
      capabilities: {},
      clientInfo: { name: 'fuzz', version: '1' },
    },
  })
}
const INITIALIZED = JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' })

async function until(done: () => boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
  return done()
}

function stdioDriver(server: RunningServer): Driver {
  const input = new PassThrough()
  const output = new PassThrough()
  const received: unknown[] = []
  let buffered = ''
  output.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8')
    let newline = buffered.indexOf('\n')
    while (newline >= 0) {
      collect(received, buffered.slice(0, newline))
      buffered = buffered.slice(newline + 1)
      newline = buffered.indexOf('\n')
    }
  })
  const transport = serveStdio(server.gateway, { input, output, server: 'default' })
  return {
    received,
    async open(revision) {
      input.write(`${initialize(revision)}\n`)
      await until(() => received.some((m) => isPlainObject(m) && m.id === 'init'), 5000)
      input.write(`${INITIALIZED}\n`)
    },
    async send(text) {
      // A payload with a raw newline would be two stdio messages; JSON never needs one.
      input.write(`${text.replace(/\n/g, ' ')}\n`)
    },
    async close() {
      await transport.close()
    },
  }
}

async function readBody(res: Response, received: unknown[]): Promise<void> {
  const text = await res.text()
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    for (const line of text.split('\n'))
      if (line.startsWith('data:')) collect(received, line.slice(5))
  } else {
    collect(received, text)
  }
}

function streamableHttpDriver(server: RunningServer): Driver {
  const received: unknown[] = []
  const url = `${server.url}/mcp`
  let session = ''
  const post = async (text: string): Promise<Response> =>
    await fetch(url, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-06-18' } : {}),
      },
      body: text,
    })
  return {
    received,
    async open(revision) {
      const res = await post(initialize(revision))
      session = res.headers.get('mcp-session-id') ?? ''
      await readBody(res, received)
      await readBody(await post(INITIALIZED), received)
    },
    async send(text) {
      const res = await post(text)
      assert.ok(res.status < 500, `HTTP ${res.status} for ${text} ${replay}`)
      await readBody(res, received)
    },
    async close() {
      await fetch(url, { method: 'DELETE', headers: { 'mcp-session-id': session } })
    },
  }
}

function sseDriver(server: RunningServer): Driver {
  const received: unknown[] = []
  const controller = new AbortController()
  let endpoint = ''
  return {
    received,
    async open(revision) {
      const res = await fetch(`${server.url}/sse`, {
        headers: { accept: 'text/event-stream' },
        signal: controller.signal,
      })
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader()
      let buffered = ''
      const pump = async () => {
        for (;;) {
          const { value, done } = await reader.read()
          if (done) return
          buffered += value
          let end = buffered.indexOf('\n\n')
          while (end >= 0) {
            const event = buffered.slice(0, end)
            buffered = buffered.slice(end + 2)
            const data = event
              .split('\n')
              .filter((l) => l.startsWith('data:'))
              .map((l) => l.slice(5).trim())
              .join('\n')
            if (event.includes('event: endpoint')) endpoint = new URL(data, server.url).href
            else if (data) collect(received, data)
            end = buffered.indexOf('\n\n')
          }
        }
      }
      pump().catch(() => {})
      await until(() => endpoint !== '', 5000)
      await this.send(initialize(revision))
      await until(() => received.some((m) => isPlainObject(m) && m.id === 'init'), 5000)
      await this.send(INITIALIZED)
    },
    async send(text) {
      const res = await fetch(endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: text,
      })
      assert.ok(res.status < 500, `HTTP ${res.status} for ${text} ${replay}`)
      // Errors about the payload itself come back in the POST's answer, replies on the stream.
      const body = await res.text()
      if (body.startsWith('{') || body.startsWith('[')) collect(received, body)
    },
    async close() {
      controller.abort()
    },
  }
}

function webSocketDriver(server: RunningServer): Driver {
  const received: unknown[] = []
  let ws: WebSocket
  return {
    received,
    async open(revision) {
      ws = new WebSocket(`${server.url.replace('http', 'ws')}/ws`, 'mcp')
      ws.on('message', (data) => collect(received, String(data)))
      await new Promise<void>((resolve, reject) => {
        ws.once('open', () => resolve())
        ws.once('error', reject)
      })
      ws.send(initialize(revision))
      await until(() => received.some((m) => isPlainObject(m) && m.id === 'init'), 5000)
      ws.send(INITIALIZED)
    },
    async send(text) {
      ws.send(text)
    },
    async close() {
      ws.close()
    },
  }
}

/** Why `reply` is not a clean JSON-RPC response; undefined when it is. */
function replyFault(reply: unknown): string | undefined {
  if (!isPlainObject(reply)) return 'not an object'
  if (reply.jsonrpc !== '2.0') return 'jsonrpc is not "2.0"'
  if ('method' in reply) return undefined // a notification or request of Barbican's own
  const id = reply.id
  if (!(id === null || typeof id === 'string' || Number.isSafeInteger(id))) return 'bad id'
  if ('result' in reply === 'error' in reply) return 'needs exactly one of result and error'
  if ('result' in reply) return isPlainObject(reply.result) ? undefined : 'result is not an object'
  const e = reply.error
  if (!isPlainObject(e) || !Number.isInteger(e.code) || typeof e.message !== 'string') {
    return 'malformed error'
  }
  return undefined
}

const TRANSPORTS: Record<string, { make: (s: RunningServer) => Driver; revision: string }> = {
  stdio: { make: stdioDriver, revision: '2025-03-26' },
  'Streamable HTTP': { make: streamableHttpDriver, revision: '2025-06-18' },
  'legacy HTTP+SSE': { make: sseDriver, revision: '2025-03-26' },
  WebSocket: { make: webSocketDriver, revision: '2025-11-25' },
}

describe(`fuzzing every inbound transport (seed ${SEED}, ${COUNT} messages each)`, () => {
  let server: RunningServer
  let record: string

  before(async () => {
    ;({ server, record } = await startRecordingGateway('barbican-fuzz-'))
  })

  after(async () => {
    await server.stop()
  })

  let index = 0
  for (const [name, { make, revision }] of Object.entries(TRANSPORTS)) {
    const transportSeed = SEED + index++
    test(`${name}: one reply per request id, clean replies, clean upstream traffic`, async () => {
      const driver = make(server)
      await driver.open(revision)
      const fuzzer = new MessageFuzzer(transportSeed)
      const owed = new Set<string>()
      const requestIds = new Set<string>()
      const sent: string[] = []
      for (let i = 0; i < COUNT; i++) {
        const message = fuzzer.next()
        sent.push(message.text)
        if (message.owed !== undefined) owed.add(JSON.stringify(message.owed))
        for (const id of message.requestIds) requestIds.add(JSON.stringify(id))
        await driver.send(message.text)
        if (i % 25 === 0) await new Promise((r) => setImmediate(r))
      }
      const replyCounts = () => {
        const counts = new Map<string, number>()
        for (const m of driver.received) {
          if (!isPlainObject(m) || 'method' in m || m.id === null || m.id === 'init') continue
          const key = JSON.stringify(m.id)
          counts.set(key, (counts.get(key) ?? 0) + 1)
        }
        return counts
      }
      await until(() => {
        const counts = replyCounts()
        return [...owed].every((id) => counts.has(id))
      }, 10_000)
      // Let late or duplicate replies arrive before counting them.
      await new Promise((r) => setTimeout(r, 300))
      const counts = replyCounts()
      const context = `${replay}; sent: ${sent.length} payloads`
      for (const m of driver.received) {
        const fault = replyFault(m)
        assert.equal(fault, undefined, `${fault}: ${JSON.stringify(m)} ${context}`)
      }
      for (const [id, n] of counts) {
        assert.ok(requestIds.has(id), `a reply carries ${id}, never a request id ${context}`)
        assert.equal(n, 1, `${n} replies carry id ${id} ${context}`)
      }
      const unanswered = [...owed].filter((id) => !counts.has(id))
      assert.deepEqual(unanswered, [], `requests without a reply ${context}`)

      // Still serving: a clean call goes through and comes back.
      const before = driver.received.length
      await driver.send(
        JSON.stringify({
          jsonrpc: '2.0',
          id: 'after',
          method: 'tools/call',
          params: { name: 'echo', arguments: { ok: 1 } },
        }),
      )
      await until(
        () => driver.received.slice(before).some((m) => isPlainObject(m) && m.id === 'after'),
        5000,
      )
      const after = driver.received.find((m) => isPlainObject(m) && m.id === 'after')
      assert.ok(
        isPlainObject(after) && isPlainObject(after.result),
        `clean call after fuzzing ${replay}`,
      )
      await driver.close()

      assert.deepEqual(
        upstreamFaults(record),
        [],
        `the upstream received unclean messages ${replay}`,
      )
    })
  }
})
