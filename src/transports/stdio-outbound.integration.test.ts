import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { describe, test } from 'node:test'
import {
  capturingLogger,
  driveEverything,
  EVERYTHING,
  eventually,
  fixture,
  Inbox,
  processGone,
} from '../../test/fixtures/upstream-helpers.ts'
import { hasCode } from '../../test/support/errors.ts'
import { DEFAULT_JSON_LIMITS, type JsonLimits } from '../protocol/json-limits.ts'
import { isPassedThrough } from '../sandbox/pass-through-env.ts'
import { silentLogger } from '../telemetry/log.ts'
import { LostReplyFault } from './outbound-payload.ts'
import { type StdioOutboundOptions, StdioOutboundTransport } from './stdio-outbound.ts'

const LINE_SERVER = fixture('upstream-line-server.ts')

function lineServer(args: string[] = [], extra: Partial<StdioOutboundOptions> = {}) {
  return new StdioOutboundTransport({
    name: 'lines',
    command: process.execPath,
    args: [LINE_SERVER, ...args],
    log: silentLogger,
    limits: DEFAULT_JSON_LIMITS,
    ...extra,
  })
}

describe('stdio outbound transport', () => {
  test('carries a raw MCP exchange with the official everything server', async () => {
    const transport = new StdioOutboundTransport({
      name: 'everything',
      command: process.execPath,
      args: [EVERYTHING, 'stdio'],
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
    })
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      const drive = await driveEverything(transport, inbox)
      assert.equal(drive.protocolVersion, '2025-06-18')
      assert.ok(drive.toolNames.includes('echo'))
      assert.deepEqual(drive.echo, [{ type: 'text', text: 'Echo: through the gate' }])
    } finally {
      await transport.close()
    }
    assert.deepEqual(transport.exitStatus, { code: 0, signal: null })
    assert.equal(inbox.closed, true)
  })

  test('passes the argv exactly as configured, with no shell in between', async () => {
    const args = ['a b', '$HOME', '; echo hi', '*', '"quoted"', '`id`']
    const transport = lineServer(args)
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'argv' })
      const reply = await inbox.response(1)
      assert.ok('result' in reply)
      assert.deepEqual(reply.result.argv, args)
    } finally {
      await transport.close()
    }
  })

  test('gives the child its declared environment plus the pass-through list, nothing else', async () => {
    const set = {
      BARBICAN_TEST_SECRET: 'must not leak',
      HTTPS_PROXY: 'http://proxy.example:3128',
      no_proxy: 'localhost',
      NODE_EXTRA_CA_CERTS: '/etc/ssl/inspecting-proxy.pem',
      LC_TIME: 'C',
      TZ: 'Europe/Paris',
    }
    const saved = Object.fromEntries(Object.keys(set).map((k) => [k, process.env[k]]))
    Object.assign(process.env, set)
    const transport = lineServer([], { env: { UPSTREAM_TOKEN: 't0ken', TZ: 'UTC' } })
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'env' })
      const reply = await inbox.response(1)
      assert.ok('result' in reply)
      const env = reply.result.env as Record<string, string>
      const expected = Object.keys(process.env)
        .filter((k) => isPassedThrough(k))
        .concat('UPSTREAM_TOKEN')
        .sort()
      assert.deepEqual(Object.keys(env).sort(), expected)
      assert.equal(env.BARBICAN_TEST_SECRET, undefined)
      assert.equal(env.UPSTREAM_TOKEN, 't0ken')
      assert.equal(env.PATH, process.env.PATH)
      assert.equal(env.HTTPS_PROXY, 'http://proxy.example:3128')
      assert.equal(env.no_proxy, 'localhost')
      assert.equal(env.NODE_EXTRA_CA_CERTS, '/etc/ssl/inspecting-proxy.pem')
      assert.equal(env.LC_TIME, 'C')
      // What the config declares wins over what is passed through.
      assert.equal(env.TZ, 'UTC')
    } finally {
      for (const [k, v] of Object.entries(saved)) {
        if (v === undefined) delete process.env[k]
        else process.env[k] = v
      }
      await transport.close()
    }
  })

  test('counts stdout lines that are not JSON-RPC and still delivers the valid ones', async () => {
    const transport = lineServer(['garbage'])
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      await transport.send({ jsonrpc: '2.0', id: 7, method: 'echo', params: { n: 7 } })
      const reply = await inbox.response(7)
      assert.deepEqual(reply, { jsonrpc: '2.0', id: 7, result: { n: 7 } })
      await transport.send({ jsonrpc: '2.0', id: 8, method: 'echo', params: { n: 8 } })
      await inbox.response(8)
      assert.equal(transport.stats.invalidLines, 6)
      assert.equal(inbox.errors.length, 6)
      assert.ok(inbox.errors.every(hasCode('ERR_UPSTREAM_PROTOCOL')))
      assert.equal(transport.isOpen, true)
    } finally {
      await transport.close()
    }
  })

  test('skips a line longer than maxMessageBytes and keeps reading after it', async () => {
    const limits: JsonLimits = { ...DEFAULT_JSON_LIMITS, maxMessageBytes: 1024 }
    const transport = lineServer([], { limits })
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      await transport.send({
        jsonrpc: '2.0',
        id: 1,
        method: 'echo',
        params: { s: 'x'.repeat(4000) },
      })
      await transport.send({ jsonrpc: '2.0', id: 2, method: 'echo', params: { s: 'small' } })
      const reply = await inbox.response(2)
      assert.ok('result' in reply)
      assert.equal(reply.result.s, 'small')
      assert.equal(transport.stats.invalidLines, 1)
      assert.equal(
        inbox.messages.some((m) => 'id' in m && m.id === 1),
        false,
      )
      // The fault names the request the skipped line answered, and the limit it broke.
      const [fault] = inbox.errors
      assert.ok(fault instanceof LostReplyFault)
      assert.equal(fault.requestId, 1)
      assert.equal(fault.reason, 'message exceeds limits.maxMessageBytes (1024 bytes)')
    } finally {
      await transport.close()
    }
  })

  test("logs each stderr line with the upstream's name", async () => {
    const { log, next } = capturingLogger()
    const transport = lineServer([], { log })
    await transport.start()
    let record: unknown
    try {
      record = await next((r) => r.msg === 'upstream stderr')
    } finally {
      await transport.close()
    }
    assert.deepEqual(
      {
        upstream: (record as Record<string, unknown>).upstream,
        line: (record as Record<string, unknown>).line,
      },
      { upstream: 'lines', line: 'line server ready' },
    )
    assert.equal(transport.stats.stderrLines, 1)
  })

  test('fires onclose when the server crashes mid-request, and refuses later sends', async () => {
    const transport = lineServer()
    const inbox = new Inbox(transport)
    await transport.start()
    await transport.send({ jsonrpc: '2.0', id: 1, method: 'crash' })
    await inbox.closing()
    assert.deepEqual(await transport.exited, { code: 3, signal: null })
    await assert.rejects(
      transport.send({ jsonrpc: '2.0', id: 2, method: 'echo' }),
      hasCode('ERR_UPSTREAM_CLOSED'),
    )
    await transport.close()
  })

  test('waits for a slow reader and refuses writes beyond the queue bound', async () => {
    const { log, next } = capturingLogger()
    const transport = new StdioOutboundTransport({
      name: 'slow',
      command: process.execPath,
      args: [fixture('upstream-slow-reader.ts')],
      log,
      limits: DEFAULT_JSON_LIMITS,
      maxQueuedBytes: 512 * 1024,
    })
    const inbox = new Inbox(transport)
    await transport.start()
    try {
      await next((r) => r.msg === 'upstream stderr')
      const payload = 'y'.repeat(32 * 1024)
      const outcomes: Array<'pending' | 'written' | unknown> = []
      const sends = Array.from({ length: 64 }, (_, i) => {
        outcomes[i] = 'pending'
        const sent = transport.send({ jsonrpc: '2.0', method: 'fill', params: { payload } })
        sent.then(
          () => {
            outcomes[i] = 'written'
          },
          (err: unknown) => {
            outcomes[i] = err
          },
        )
        return sent
      })
      await new Promise((resolve) => setImmediate(resolve))
      const refused = outcomes.filter((o) => o !== 'pending' && o !== 'written')
      const accepted = sends.filter(
        (_, i) => outcomes[i] === 'pending' || outcomes[i] === 'written',
      )
      assert.ok(refused.length > 0, 'sends beyond the bound are refused')
      assert.ok(refused.every(hasCode('ERR_UPSTREAM_UNAVAILABLE')))
      assert.match(String(refused[0]), /limits\.upstreamMaxQueuedBytes \(524288\)/)
      assert.ok(outcomes.includes('pending'), 'writes wait while the child does not read')
      assert.ok(accepted.length * payload.length <= 512 * 1024)

      process.kill(transport.serverPid!, 'SIGUSR1')
      await Promise.all(accepted)
      await transport.send({ jsonrpc: '2.0', id: 1, method: 'count' })
      const reply = await inbox.response(1)
      assert.ok('result' in reply)
      assert.equal(reply.result.received, accepted.length)
    } finally {
      await transport.close()
    }
  })

  test('escalates to SIGTERM then SIGKILL for a tree that ignores stdin EOF and SIGTERM', async () => {
    const transport = new StdioOutboundTransport({
      name: 'stubborn',
      command: process.execPath,
      args: [fixture('upstream-stubborn-wrapper.ts')],
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
      closeGraceMs: 100,
      termGraceMs: 100,
    })
    const inbox = new Inbox(transport)
    await transport.start()
    const pids = await inbox.until(() => {
      const m = inbox.messages.find((x) => 'method' in x && x.method === 'pids')
      return m && 'params' in m ? (m.params as { wrapper: number; grandchild: number }) : undefined
    })
    const began = Date.now()
    await transport.close()
    assert.ok(Date.now() - began >= 200, 'both grace periods were waited')
    assert.equal(transport.exitStatus?.signal, 'SIGKILL')
    await eventually(
      () => processGone(pids.wrapper) && processGone(pids.grandchild),
      5000,
      'the whole tree to be gone',
    )
  })

  test('rejects start with ERR_UPSTREAM_UNAVAILABLE when the command does not exist', async () => {
    const transport = new StdioOutboundTransport({
      name: 'missing',
      command: '/nonexistent/barbican-test-command',
      log: silentLogger,
      limits: DEFAULT_JSON_LIMITS,
    })
    let closed = false
    transport.onclose = () => {
      closed = true
    }
    await assert.rejects(transport.start(), hasCode('ERR_UPSTREAM_UNAVAILABLE'))
    assert.equal(closed, false)
    assert.equal(transport.isOpen, false)
    await transport.close()
  })

  test('leaves no upstream process behind when its parent is SIGKILLed', async () => {
    const parent = spawn(process.execPath, [fixture('upstream-parent.ts')], {
      stdio: ['ignore', 'pipe', 'inherit'],
    })
    const exited = new Promise((resolve) => parent.once('exit', resolve))
    try {
      const pids = await new Promise<Record<string, number>>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('parent printed no pids')), 10_000)
        let text = ''
        parent.stdout?.on('data', (chunk: Buffer) => {
          text += chunk.toString()
          const newline = text.indexOf('\n')
          if (newline < 0) return
          clearTimeout(timer)
          resolve(JSON.parse(text.slice(0, newline)))
        })
      })
      const tree = [pids.launcher, pids.server, pids.wrapper, pids.grandchild]
      assert.equal(pids.server, pids.wrapper)
      for (const pid of tree) assert.equal(processGone(pid!), false, `pid ${pid} runs at first`)
      parent.kill('SIGKILL')
      await exited
      await eventually(() => tree.every((pid) => processGone(pid!)), 5000, 'orphans to be gone')
    } finally {
      parent.kill('SIGKILL')
      await exited
    }
  })
})
