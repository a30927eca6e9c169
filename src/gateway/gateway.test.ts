import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js'
import {
  ElicitRequestSchema,
  RootsListChangedNotificationSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { z } from 'zod'
import { type EmittedLog, validateEmitted } from '../../test/support/emitted.ts'
import { inProcessUpstream, rules, serverPlan } from '../../test/support/plans.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { Gateway } from './gateway.ts'

let cancelledCalls = 0
let rootsChanged = 0

function alphaServer(): McpServer {
  const server = new McpServer(
    { name: 'alpha', version: '1.0.0' },
    { instructions: 'Alpha tools.' },
  )
  server.registerTool(
    'echo',
    { description: 'Echo from alpha', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: `alpha:${text}` }] }),
  )
  server.registerTool('secret', { description: 'Never exposed' }, async () => ({
    content: [{ type: 'text', text: 'leaked' }],
  }))
  server.registerTool('ask', { description: 'Asks the user' }, async () => {
    const answer = await server.server.elicitInput({
      message: 'Your name?',
      requestedSchema: {
        type: 'object',
        properties: { name: { type: 'string' } },
        required: ['name'],
      },
    })
    return { content: [{ type: 'text', text: `${answer.action}:${String(answer.content?.name)}` }] }
  })
  server.server.setNotificationHandler(RootsListChangedNotificationSchema, async () => {
    rootsChanged++
  })
  server.registerTool('wait', { description: 'Waits until cancelled' }, async (extra) => {
    await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve()))
    cancelledCalls++
    return { content: [] }
  })
  server.registerTool(
    'ask-then-withdraw',
    { description: 'Asks, then cancels the question' },
    async () => {
      const controller = new AbortController()
      const asked = server.server.elicitInput(
        { message: 'Never mind?', requestedSchema: { type: 'object', properties: {} } },
        { signal: controller.signal },
      )
      setTimeout(() => controller.abort('withdrawn'), 50)
      const outcome = await asked.then(
        () => 'answered',
        () => 'withdrawn',
      )
      return { content: [{ type: 'text', text: outcome }] }
    },
  )
  server.registerPrompt(
    'greet',
    { description: 'Greets', argsSchema: { who: z.string() } },
    ({ who }) => ({
      messages: [{ role: 'user', content: { type: 'text', text: `Hello ${who}` } }],
    }),
  )
  server.registerResource(
    'note',
    new ResourceTemplate('note://{id}', { list: undefined }),
    { description: 'Notes' },
    async (uri, { id }) => ({ contents: [{ uri: uri.href, text: `note ${String(id)}` }] }),
  )
  return server
}

function betaServer(): McpServer {
  const server = new McpServer({ name: 'beta', version: '1.0.0' })
  server.registerTool(
    'echo',
    { description: 'Echo from beta', inputSchema: { text: z.string() } },
    async ({ text }) => ({ content: [{ type: 'text', text: `beta:${text}` }] }),
  )
  return server
}

/** Every message the gateway sent to any client in these tests, checked against the schema. */
const emitted: EmittedLog[] = []

async function connectClient(gateway: Gateway, capabilities = {}): Promise<Client> {
  const [clientSide, gatewaySide] = memoryPair()
  gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
  emitted.push(validateEmitted(gatewaySide))
  await gatewaySide.start()
  const client = new Client({ name: 'test-client', version: '1.0.0' }, { capabilities })
  await client.connect(clientSide as never)
  return client
}

function text(result: unknown): string {
  const content = (result as { content: { type: string; text: string }[] }).content
  return content.map((c) => c.text).join('')
}

describe('a virtual server over two in-process upstreams', () => {
  const alphas: McpServer[] = []
  let gateway: Gateway
  before(async () => {
    gateway = new Gateway(
      {
        upstreams: [
          inProcessUpstream('alpha', alphaServer, alphas),
          inProcessUpstream('beta', betaServer),
        ],
        servers: [
          serverPlan(
            'default',
            ['alpha', 'beta'],
            rules('always', { filter: (n) => n !== 'secret' }),
          ),
        ],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    await gateway.start()
  })
  after(async () => {
    await gateway.stop()
  })

  after(() => {
    // Runs after every test of the suite: nothing the gateway sent broke its revision's schema.
    const failures = emitted.filter((e) => e.failure).map((e) => e.failure!.message)
    assert.deepEqual(failures, [])
    assert.ok(emitted.reduce((n, e) => n + e.count, 0) > 50, 'messages were checked')
  })

  test('lists namespaced tools from both upstreams and hides excluded ones', async () => {
    const client = await connectClient(gateway)
    const { tools } = await client.listTools()
    assert.deepEqual(
      tools.map((t) => t.name),
      ['alpha__echo', 'alpha__ask', 'alpha__wait', 'alpha__ask-then-withdraw', 'beta__echo'],
    )
    await client.close()
  })

  test('routes a call to the upstream its name names, and refuses an excluded tool', async () => {
    const client = await connectClient(gateway)
    assert.equal(
      text(await client.callTool({ name: 'beta__echo', arguments: { text: 'hi' } })),
      'beta:hi',
    )
    assert.equal(
      text(await client.callTool({ name: 'alpha__echo', arguments: { text: 'yo' } })),
      'alpha:yo',
    )
    await assert.rejects(
      client.callTool({ name: 'alpha__secret', arguments: {} }),
      /Unknown tool: alpha__secret/,
    )
    await client.close()
  })

  test('gives two clients using the same request ids only their own answers', async () => {
    const [a, b] = await Promise.all([connectClient(gateway), connectClient(gateway)])
    const calls = []
    for (let i = 0; i < 20; i++) {
      calls.push(a.callTool({ name: 'alpha__echo', arguments: { text: `a${i}` } }).then(text))
      calls.push(b.callTool({ name: 'alpha__echo', arguments: { text: `b${i}` } }).then(text))
    }
    const answers = await Promise.all(calls)
    for (let i = 0; i < 20; i++) {
      assert.equal(answers[2 * i], `alpha:a${i}`)
      assert.equal(answers[2 * i + 1], `alpha:b${i}`)
    }
    await Promise.all([a.close(), b.close()])
  })

  test('relays an elicitation from the upstream to the calling client and back', async () => {
    const client = await connectClient(gateway, { elicitation: {} })
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      assert.equal(request.params.message, 'Your name?')
      return { action: 'accept', content: { name: 'Ada' } }
    })
    assert.equal(text(await client.callTool({ name: 'alpha__ask', arguments: {} })), 'accept:Ada')
    await client.close()
  })

  test('refuses an elicitation for a client that did not declare the capability', async () => {
    const client = await connectClient(gateway)
    const result = await client.callTool({ name: 'alpha__ask', arguments: {} })
    assert.equal(result.isError, true)
    assert.match(text(result), /elicitation/)
    await client.close()
  })

  test('gets a namespaced prompt and reads a namespaced resource through templates', async () => {
    const client = await connectClient(gateway)
    const prompt = await client.getPrompt({ name: 'alpha__greet', arguments: { who: 'Bob' } })
    assert.deepEqual(prompt.messages[0]?.content, { type: 'text', text: 'Hello Bob' })
    const { resourceTemplates } = await client.listResourceTemplates()
    assert.deepEqual(
      resourceTemplates.map((t) => t.uriTemplate),
      ['alpha+note://{id}'],
    )
    const read = await client.readResource({ uri: 'alpha+note://7' })
    assert.deepEqual(read.contents, [{ uri: 'alpha+note://7', text: 'note 7' }])
    await client.close()
  })

  test('merges instructions with attribution and answers ping', async () => {
    const client = await connectClient(gateway)
    assert.equal(client.getInstructions(), '[alpha] Alpha tools.')
    // The SDK keeps no initialize _meta, so read the attribution from a raw initialize.
    const [raw, gatewaySide] = memoryPair()
    gateway.connect(gatewaySide, { kind: 'stdio', server: 'default' })
    await gatewaySide.start()
    const answered = new Promise<Record<string, unknown>>((resolve) => {
      raw.onmessage = (m) => resolve((m as { result: Record<string, unknown> }).result)
    })
    await raw.start()
    await raw.send({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: {
        protocolVersion: '2025-06-18',
        capabilities: {},
        clientInfo: { name: 'raw', version: '1' },
      },
    })
    const result = await answered
    const upstreams = (
      result._meta as Record<string, { name: string; serverInfo: { name: string } }[]>
    )['dev.barbican/upstreams']
    assert.deepEqual(
      upstreams?.map((u) => [u.name, u.serverInfo.name]),
      [
        ['alpha', 'alpha'],
        ['beta', 'beta'],
      ],
    )
    await raw.close()
    assert.deepEqual(await client.ping(), {})
    await client.close()
  })

  test('tells clients when an upstream changes its tools, and lists the new tool', async () => {
    const client = await connectClient(gateway)
    await client.listTools()
    const changed = new Promise<void>((resolve) =>
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => resolve()),
    )
    const alpha = alphas.at(-1)!
    alpha.registerTool('late', { description: 'Added later' }, async () => ({ content: [] }))
    await changed
    const { tools } = await client.listTools()
    assert.ok(tools.some((t) => t.name === 'alpha__late'))
    await client.close()
  })

  test('pages merged lists with opaque cursors and refuses a forged cursor', async () => {
    const paged = new Gateway(
      {
        upstreams: [inProcessUpstream('alpha', alphaServer), inProcessUpstream('beta', betaServer)],
        servers: [serverPlan('default', ['alpha', 'beta'], rules('always'))],
        clientRequestTimeoutMs: 5_000,
        listPageSize: 2,
      },
      silentLogger,
    )
    await paged.start()
    const client = await connectClient(paged)
    try {
      const names: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor })
        assert.ok(page.tools.length <= 2)
        names.push(...page.tools.map((t) => t.name))
        cursor = page.nextCursor
        pages++
      } while (cursor !== undefined)
      assert.equal(pages, 3)
      assert.deepEqual(names, [
        'alpha__echo',
        'alpha__secret',
        'alpha__ask',
        'alpha__wait',
        'alpha__ask-then-withdraw',
        'beta__echo',
      ])
      await assert.rejects(client.listTools({ cursor: 'not-a-cursor' }), /Invalid cursor/)
    } finally {
      await client.close()
      await paged.stop()
    }
  })

  test('stops an idle upstream and restarts it on the next call, without restarting to list', async () => {
    const made: McpServer[] = []
    const idle = new Gateway(
      {
        upstreams: [{ ...inProcessUpstream('beta', betaServer, made), idleTimeoutMs: 50 }],
        servers: [serverPlan('default', ['beta'], rules('never'))],
        clientRequestTimeoutMs: 5_000,
      },
      silentLogger,
    )
    await idle.start()
    const client = await connectClient(idle)
    try {
      assert.equal(
        text(await client.callTool({ name: 'echo', arguments: { text: '1' } })),
        'beta:1',
      )
      const beta = idle.upstreams.get('beta')!
      const deadline = Date.now() + 5_000
      while (beta.state !== 'idle') {
        assert.ok(Date.now() < deadline, `still ${beta.state}`)
        await new Promise((r) => setTimeout(r, 10))
      }
      assert.equal(made.length, 1)
      await client.listTools()
      assert.equal(made.length, 1, 'listing is served from the cache')
      assert.equal(
        text(await client.callTool({ name: 'echo', arguments: { text: '2' } })),
        'beta:2',
      )
      assert.equal(made.length, 2, 'the call started a new connection')
    } finally {
      await client.close()
      await idle.stop()
    }
  })

  test('a client cancelling a call cancels it in the upstream', async () => {
    const client = await connectClient(gateway)
    const before = cancelledCalls
    const controller = new AbortController()
    const call = client.callTool({ name: 'alpha__wait', arguments: {} }, undefined, {
      signal: controller.signal,
    })
    setTimeout(() => controller.abort('changed my mind'), 50)
    await assert.rejects(call)
    const deadline = Date.now() + 5_000
    while (cancelledCalls === before) {
      assert.ok(Date.now() < deadline, 'the upstream handler never saw the cancellation')
      await new Promise((r) => setTimeout(r, 10))
    }
    await client.close()
  })

  test('an upstream withdrawing its request to the client cancels it at the client', async () => {
    const client = await connectClient(gateway, { elicitation: {} })
    let clientSawCancel = false
    client.setRequestHandler(ElicitRequestSchema, async (_request, extra) => {
      await new Promise<void>((resolve) => extra.signal.addEventListener('abort', () => resolve()))
      clientSawCancel = true
      return { action: 'cancel' }
    })
    const result = await client.callTool({ name: 'alpha__ask-then-withdraw', arguments: {} })
    assert.equal(text(result), 'withdrawn')
    const deadline = Date.now() + 5_000
    while (!clientSawCancel) {
      assert.ok(Date.now() < deadline, 'the client never saw the cancellation')
      await new Promise((r) => setTimeout(r, 10))
    }
    await client.close()
  })

  test('forwards a client roots list_changed to the upstreams', async () => {
    const client = await connectClient(gateway, { roots: { listChanged: true } })
    const before = rootsChanged
    await client.sendRootsListChanged()
    const deadline = Date.now() + 5_000
    while (rootsChanged === before) {
      assert.ok(Date.now() < deadline, 'the upstream never heard of the change')
      await new Promise((r) => setTimeout(r, 10))
    }
    await client.close()
  })
})
