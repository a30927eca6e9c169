import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import {
  CallToolRequestSchema,
  CreateTaskResultSchema,
  GetTaskRequestSchema,
  GetTaskResultSchema,
  ListTasksRequestSchema,
  ListTasksResultSchema,
  ListToolsRequestSchema,
  type McpError,
} from '@modelcontextprotocol/sdk/types.js'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { postStatelessToolCall } from '../../test/support/stateless.ts'
import { BarbicanError } from '../common/errors.ts'
import { Gateway } from '../gateway/gateway.ts'
import type { Policy } from '../policies/policy.ts'
import { jsonLogger, silentLogger } from '../telemetry/log.ts'
import { createHttpInbound, type HttpInbound } from '../transports/http-inbound.ts'
import { memoryPair } from '../transports/memory.ts'
import type { Transport } from '../transports/transport.ts'

/** A low-level SDK server whose tool runs as a 2025-11-25 task when the caller asks for one. */
function taskServer(name: string): Server {
  const server = new Server(
    { name, version: '1.0.0' },
    {
      capabilities: {
        tools: {},
        tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } },
      },
    },
  )
  const tasks = new Map<string, { taskId: string; status: string }>()
  let next = 1
  server.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'slow', inputSchema: { type: 'object' } }],
  }))
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (!request.params.task) return { content: [{ type: 'text', text: 'done at once' }] }
    const taskId = `${name}-task-${next++}`
    const task = {
      taskId,
      status: 'working',
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    }
    tasks.set(taskId, task)
    return { task }
  })
  server.setRequestHandler(GetTaskRequestSchema, async (request) => {
    const task = tasks.get(request.params.taskId)
    if (!task) throw new Error('no such task')
    return {
      ...task,
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    }
  })
  server.setRequestHandler(ListTasksRequestSchema, async () => ({
    tasks: [...tasks.values()].map((t) => ({
      ...t,
      createdAt: new Date().toISOString(),
      lastUpdatedAt: new Date().toISOString(),
      ttl: 60_000,
    })),
  }))
  return server
}

async function connectClient(gateway: Gateway): Promise<Client> {
  const [clientSide, gatewaySide] = memoryPair()
  gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
  await gatewaySide.start()
  const client = new Client({ name: 'tasks', version: '1.0.0' })
  await client.connect(clientSide as never)
  return client
}

describe('2025-11-25 tasks through a virtual server', () => {
  let gateway: Gateway
  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [
          inProcessUpstream('a', () => taskServer('a')),
          inProcessUpstream('b', () => taskServer('b')),
        ],
        servers: [serverPlan('default', ['a', 'b'], rules('always'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    await gateway.start()
  })
  after(async () => {
    await gateway.stop()
  })

  test('advertises tasks, routes task requests to the upstream that created the task, and lists only the caller’s tasks', async () => {
    const client = await connectClient(gateway)
    const other = await connectClient(gateway)
    try {
      assert.deepEqual(client.getServerCapabilities()?.tasks, {
        list: {},
        cancel: {},
        requests: { tools: { call: {} } },
      })
      const created = await client.request(
        { method: 'tools/call', params: { name: 'b__slow', arguments: {}, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
      assert.equal(created.task.taskId, 'b-task-1')
      const got = await client.request(
        { method: 'tasks/get', params: { taskId: created.task.taskId } },
        GetTaskResultSchema,
      )
      assert.equal(got.status, 'working')
      await other.request(
        { method: 'tools/call', params: { name: 'a__slow', arguments: {}, task: { ttl: 60_000 } } },
        CreateTaskResultSchema,
      )
      const listed = await client.request(
        { method: 'tasks/list', params: {} },
        ListTasksResultSchema,
      )
      assert.deepEqual(
        listed.tasks.map((t) => t.taskId),
        ['b-task-1'],
      )
      await assert.rejects(
        other.request({ method: 'tasks/get', params: { taskId: 'b-task-1' } }, GetTaskResultSchema),
        /Unknown task: b-task-1/,
      )
    } finally {
      await client.close()
      await other.close()
    }
  })
})

/**
 * An upstream transport that fails to send `tools/call` with whatever `failure()` gives, and
 * passes everything else (the handshake, the lists) to `inner`.
 */
function failingCalls(inner: Transport, failure: () => Error): Transport {
  const send = inner.send.bind(inner)
  inner.send = async (message, options) => {
    if ('method' in message && message.method === 'tools/call') throw failure()
    await send(message, options)
  }
  return inner
}

describe('a call whose upstream send fails names its cause', () => {
  let gateway: Gateway
  let failure: () => Error
  const lines: Record<string, unknown>[] = []
  const SECRET_URL = 'https://ops:hunter2@up.example/mcp?token=s3cr3t'

  before(async () => {
    const base = inProcessUpstream('up', () => {
      const server = new Server({ name: 'up', version: '1.0.0' }, { capabilities: { tools: {} } })
      server.setRequestHandler(ListToolsRequestSchema, async () => ({
        tools: [{ name: 'echo', inputSchema: { type: 'object' } }],
      }))
      return server
    })
    gateway = new Gateway(
      {
        upstreams: [
          { ...base, createTransport: () => failingCalls(base.createTransport(), () => failure()) },
        ],
        servers: [serverPlan('default', ['up'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      jsonLogger({ level: 'debug', write: (line) => lines.push(JSON.parse(line)) }),
    )
    await gateway.start()
  })
  after(async () => {
    await gateway.stop()
  })

  /** Calls `echo`, expecting a failure; returns the client's error and the log line of it. */
  async function failedCall() {
    const client = await connectClient(gateway)
    try {
      lines.length = 0
      const error = await client
        .callTool({ name: 'echo', arguments: {} })
        .then(() => assert.fail('the call succeeded'))
        .catch((e: unknown) => e as McpError)
      const line = lines.find((l) => l.msg === 'request failed')
      assert.ok(line, `no log line for the failed call in ${JSON.stringify(lines)}`)
      return { error, line }
    } finally {
      await client.close()
    }
  }

  test('a fault of Barbican: the log names the cause, redacted; the client gets a reference', async () => {
    failure = () => new TypeError(`cannot reach ${SECRET_URL} with Bearer abc.def-ghi`)
    const { error, line } = await failedCall()
    assert.equal(error.code, -32005)
    assert.match(error.message, /Cannot send to upstream "up": internal error/)
    const reference = (error.data as { reference?: string }).reference
    assert.match(String(reference), /^[0-9a-f]{12}-r\d+$/)
    assert.ok(error.message.includes(`reference ${reference}`), error.message)
    assert.ok(!error.message.includes('TypeError'), 'internals stay out of the client message')
    assert.equal(line.reference, reference)
    assert.equal(line.code, 'ERR_UPSTREAM_UNAVAILABLE')
    const logged = line.error as { cause?: { name: string; message: string } }
    assert.equal(logged.cause?.name, 'TypeError')
    assert.match(String(logged.cause?.message), /cannot reach https:\/\/\[redacted\]@up\.example/)
    const text = JSON.stringify(line)
    for (const secret of ['hunter2', 's3cr3t', 'abc.def-ghi']) {
      assert.ok(!text.includes(secret), `the log line leaks ${secret}: ${text}`)
    }
  })

  test("a failure Barbican explains: the client gets the cause's own message", async () => {
    failure = () =>
      new BarbicanError('ERR_UPSTREAM_CLOSED', 'Upstream "up" input closed', {
        cause: new Error('write EPIPE'),
      })
    const { error, line } = await failedCall()
    assert.match(error.message, /Cannot send to upstream "up": Upstream "up" input closed/)
    const logged = line.error as { cause?: { code?: string; cause?: { message: string } } }
    assert.equal(logged.cause?.code, 'ERR_UPSTREAM_CLOSED')
    assert.equal(logged.cause?.cause?.message, 'write EPIPE', 'the whole chain is logged')
  })
})

/** An upstream whose `echo` answers at once and whose `wait` runs until it is cancelled. */
function cancellableServer(seen: { cancelled: number }): McpServer {
  const server = new McpServer({ name: 'up', version: '1.0.0' })
  server.registerTool('echo', { description: 'Answers at once' }, async () => ({
    content: [{ type: 'text', text: 'done' }],
  }))
  server.registerTool('wait', { description: 'Waits until cancelled' }, async (extra) => {
    await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve()))
    seen.cancelled++
    return { content: [] }
  })
  return server
}

describe("a call's abort signal", () => {
  let gateway: Gateway
  let inbound: HttpInbound
  const upstream = { cancelled: 0 }
  /** The signal of every tools/call, as the policy chain got it. */
  const signals: AbortSignal[] = []
  const capture: Policy = {
    name: 'guards',
    async handle(call, next) {
      if (call.request.method === 'tools/call') signals.push(call.signal)
      return await next(call)
    },
  }
  let nextId = 1

  /** POSTs a 2026-07-28 tools/call of `name`: a stateless request, a session of its own. */
  const modernCall = (name: string, signal?: AbortSignal) =>
    postStatelessToolCall(`${inbound.url}/mcp`, { name, id: nextId++ }, signal)

  /** Waits until `condition()` holds, failing with `what` after 5 s. */
  async function until(condition: () => boolean, what: string): Promise<void> {
    const deadline = Date.now() + 5_000
    while (!condition()) {
      assert.ok(Date.now() < deadline, what)
      await new Promise((r) => setTimeout(r, 10))
    }
  }

  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [inProcessUpstream('up', () => cancellableServer(upstream))],
        servers: [serverPlan('default', ['up'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
        policies: [capture],
      },
      silentLogger,
    )
    await gateway.start()
    inbound = createHttpInbound(gateway, { port: 0 }, silentLogger)
    await inbound.listen()
  })
  after(async () => {
    await inbound.close({ deadlineMs: 500 })
    await gateway.stop()
  })

  test('an answered 2026-07-28 call is not aborted when its session closes with the reply', async () => {
    signals.length = 0
    const answered = await modernCall('echo')
    assert.equal(answered.status, 200)
    const { result } = answered.final as { result: { content: unknown } }
    assert.deepEqual(result.content, [{ type: 'text', text: 'done' }])
    // A call that fails (thrown at the relay) is answered too: nor must its error reply abort it.
    const refused = await modernCall('no-such-tool')
    assert.ok('error' in (refused.final ?? {}), 'the unknown tool is refused')
    await new Promise((r) => setImmediate(r))
    assert.equal(signals.length, 2)
    assert.deepEqual(
      signals.map((s) => s.aborted),
      [false, false],
      'an answered call was aborted as its session closed',
    )
  })

  test('a 2026-07-28 call in flight is aborted, and cancelled upstream, when its client leaves', async () => {
    signals.length = 0
    const before = upstream.cancelled
    const client = new AbortController()
    const pending = modernCall('wait', client.signal).catch(() => undefined)
    await until(() => signals.length === 1, 'the call never reached the chain')
    client.abort()
    await pending
    await until(() => upstream.cancelled > before, 'the upstream never saw the cancellation')
    assert.equal(signals[0]?.aborted, true)
  })

  test('a legacy call in flight is aborted, and cancelled upstream, when its session closes', async () => {
    signals.length = 0
    const before = upstream.cancelled
    const [clientSide, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
    await gatewaySide.start()
    const client = new Client({ name: 'leaves', version: '1.0.0' })
    await client.connect(clientSide as never)
    const call = client.callTool({ name: 'wait', arguments: {} }).catch(() => undefined)
    await until(() => signals.length === 1, 'the call never reached the chain')
    await client.close()
    await call
    await until(() => upstream.cancelled > before, 'the upstream never saw the cancellation')
    assert.equal(signals[0]?.aborted, true)
  })
})
