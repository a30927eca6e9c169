/**
 * The bridge matrix: {legacy 2025-11-25 client, 2026-07-28 client} × {legacy upstream,
 * 2026-07-28 upstream}, through Barbican over HTTP. Every cell runs the same four things: a tool
 * call with an elicitation round trip, a resource read, a prompt get, and a tool-list change
 * reaching the client. The legacy client is the official SDK v1 client (real server→client
 * elicitation, list changes on its standalone stream); the 2026 client speaks raw 2026-07-28
 * HTTP (per-request `_meta`, routing headers, `input_required` retries, `subscriptions/listen`)
 * so every byte the cell depends on is visible here. The upstream is our fixture
 * (test/fixtures/bridge-upstream.ts) pinned to one era.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  ElicitRequestSchema,
  ToolListChangedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js'
import type { RunningServer } from '../../src/app/server.ts'
import {
  startFixtureGateway,
  startGatewayFor,
  startGatewayForUrl,
} from '../conformance/serve-fixture.ts'
import { textOf } from '../support/content.ts'
import { assertValidMessage } from '../support/schema.ts'
import { finalReply } from '../support/stateless.ts'

type Json = Record<string, unknown>

const WAIT_MS = 10_000
const ANSWER = { action: 'accept', content: { username: 'ada', email: 'ada@example.test' } }

/** Resolves with the first value `take` accepts, or rejects after WAIT_MS. */
function waitFor<T>(what: string, subscribe: (done: (value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`timed out waiting for ${what}`)), WAIT_MS)
    subscribe((value) => {
      clearTimeout(timer)
      resolve(value)
    })
  })
}

/** One cell's client: the same four operations, in the client's own era. */
interface CellClient {
  callElicitingTool(): Promise<Json>
  readResource(uri: string): Promise<Json>
  getPrompt(name: string, args: Record<string, string>): Promise<Json>
  /** Resolves once a tools list_changed has reached the client after `trigger`. */
  seeToolListChange(trigger: () => Promise<unknown>): Promise<void>
  /** Calls a tool without an elicitation (used as the list-change trigger). */
  callTool(name: string): Promise<Json>
  close(): Promise<void>
}

async function legacyClient(url: string): Promise<CellClient> {
  const client = new Client(
    { name: 'bridge-matrix', version: '1.0.0' },
    { capabilities: { elicitation: {} } },
  )
  let elicitations = 0
  client.setRequestHandler(ElicitRequestSchema, async () => {
    elicitations++
    return ANSWER
  })
  const changes: (() => void)[] = []
  client.setNotificationHandler(ToolListChangedNotificationSchema, async () => {
    for (const notify of changes.splice(0)) notify()
  })
  await client.connect(new StreamableHTTPClientTransport(new URL(url)))
  return {
    async callElicitingTool() {
      const result = (await client.callTool({
        name: 'test_elicitation',
        arguments: { message: 'Who are you?' },
      })) as Json
      assert.equal(elicitations, 1, 'the client answered exactly one real elicitation request')
      return result
    },
    readResource: async (uri) => (await client.readResource({ uri })) as Json,
    getPrompt: async (name, args) => (await client.getPrompt({ name, arguments: args })) as Json,
    async seeToolListChange(trigger) {
      const seen = waitFor<void>('tools/list_changed', (done) => changes.push(() => done()))
      await trigger()
      await seen
    },
    callTool: async (name) => (await client.callTool({ name, arguments: {} })) as Json,
    close: () => client.close(),
  }
}

/** A raw 2026-07-28 HTTP client: one stateless POST per request. */
function modernClient(url: string): CellClient {
  const capabilities = { elicitation: {} }
  let nextId = 1
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientCapabilities': capabilities,
    'io.modelcontextprotocol/clientInfo': { name: 'bridge-matrix', version: '1.0.0' },
  }
  const headersFor = (method: string, params: Json): Record<string, string> => {
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': method,
    }
    const name = method === 'resources/read' ? params.uri : params.name
    if (typeof name === 'string') headers['mcp-name'] = name
    return headers
  }
  /** Posts one request; returns the final response and any frames before it. */
  const post = async (method: string, params: Json, signal?: AbortSignal) => {
    const body = { jsonrpc: '2.0', id: nextId++, method, params: { ...params, _meta: meta } }
    const res = await fetch(url, {
      method: 'POST',
      headers: headersFor(method, params),
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    })
    return { res, id: body.id }
  }
  const request = async (method: string, params: Json): Promise<Json> => {
    const { res } = await post(method, params)
    const { final } = await finalReply(res)
    assert.ok(final, `no response to ${method}`)
    assert.equal(final.error, undefined, `${method} failed: ${JSON.stringify(final.error)}`)
    assertValidMessage('2026-07-28', final, { method })
    return final.result as Json
  }
  return {
    async callElicitingTool() {
      const params = { name: 'test_elicitation', arguments: { message: 'Who are you?' } }
      const first = await request('tools/call', params)
      assert.equal(first.resultType, 'input_required')
      const inputRequests = first.inputRequests as Record<string, Json>
      const keys = Object.keys(inputRequests)
      assert.equal(keys.length, 1)
      assert.equal(inputRequests[keys[0] as string]?.method, 'elicitation/create')
      assert.equal(typeof first.requestState, 'string')
      const retry = {
        ...params,
        inputResponses: { [keys[0] as string]: ANSWER },
        requestState: first.requestState,
      }
      const done = await request('tools/call', retry)
      assert.equal(done.resultType, 'complete')
      return done
    },
    readResource: (uri) => request('resources/read', { uri }),
    getPrompt: (name, args) => request('prompts/get', { name, arguments: args }),
    async seeToolListChange(trigger) {
      const controller = new AbortController()
      const { res, id } = await post(
        'subscriptions/listen',
        { notifications: { toolsListChanged: true } },
        controller.signal,
      )
      assert.ok(res.body, 'the listen stream has a body')
      const reader = res.body.getReader()
      const decoder = new TextDecoder()
      let buffer = ''
      const frames: Json[] = []
      const nextFrame = async (): Promise<Json> => {
        for (;;) {
          const line = buffer.split('\n').find((l) => l.startsWith('data:'))
          if (line) {
            buffer = buffer.slice(buffer.indexOf(line) + line.length + 1)
            const frame = JSON.parse(line.slice(5)) as Json
            frames.push(frame)
            return frame
          }
          const { value, done } = await reader.read()
          if (done) throw new Error('the listen stream ended')
          buffer += decoder.decode(value, { stream: true })
        }
      }
      const timer = setTimeout(() => controller.abort(), WAIT_MS)
      try {
        const ack = await nextFrame()
        assert.equal(ack.method, 'notifications/subscriptions/acknowledged')
        await trigger()
        const change = await nextFrame()
        assert.equal(change.method, 'notifications/tools/list_changed')
        const tag = ((change.params as Json)._meta as Json)[
          'io.modelcontextprotocol/subscriptionId'
        ]
        assert.equal(tag, id, 'the change is tagged with the listen request id')
        for (const frame of frames) assertValidMessage('2026-07-28', frame)
      } finally {
        clearTimeout(timer)
        controller.abort()
        await reader.cancel().catch(() => {})
      }
    },
    callTool: (name) => request('tools/call', { name, arguments: {} }),
    close: async () => {},
  }
}

const CLIENTS: Record<string, (url: string) => Promise<CellClient>> = {
  'a 2025-11-25 client (SDK v1)': legacyClient,
  'a 2026-07-28 client': async (url) => modernClient(url),
}

const UPSTREAMS: Record<string, string> = {
  'a 2025-11-25 upstream': 'legacy',
  'a 2026-07-28 upstream': 'modern',
}

for (const [upstreamName, era] of Object.entries(UPSTREAMS)) {
  for (const [clientName, connect] of Object.entries(CLIENTS)) {
    describe(`bridge: ${clientName} through Barbican to ${upstreamName}`, () => {
      let gateway: RunningServer
      let client: CellClient
      before(async () => {
        gateway = await startFixtureGateway(era)
        client = await connect(`${gateway.url}/mcp`)
      })
      after(async () => {
        await client?.close()
        await gateway?.stop()
      })

      test('a tool call completes after an elicitation round trip', async () => {
        const result = await client.callElicitingTool()
        assert.match(textOf(result), /User response: .*"action":"accept".*ada@example\.test/)
      })

      test('a resource read returns the resource', async () => {
        const result = await client.readResource('test://static-text')
        const contents = result.contents as Json[]
        assert.equal(contents[0]?.uri, 'test://static-text')
        assert.equal(contents[0]?.text, 'This is the content of the static text resource.')
      })

      test('a prompt get returns the prompt with its arguments', async () => {
        const result = await client.getPrompt('test_prompt_with_arguments', {
          arg1: 'hello',
          arg2: 'world',
        })
        assert.equal(textOf(result), "Prompt with arguments: arg1='hello', arg2='world'")
      })

      test('a change of the upstream tool list reaches the client', async () => {
        await client.seeToolListChange(() => client.callTool('test_trigger_tool_change'))
      })
    })
  }
}

/** Posts one raw 2026-07-28 request and collects every SSE frame until `stop` says enough. */
async function modernFrames(
  url: string,
  method: string,
  params: Json,
  meta: Json,
  stop: (frame: Json) => boolean,
): Promise<Json[]> {
  const controller = new AbortController()
  const timer = setTimeout(() => controller.abort(), WAIT_MS)
  try {
    const res = await fetch(url, {
      method: 'POST',
      signal: controller.signal,
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': '2026-07-28',
        'mcp-method': method,
        ...(typeof params.name === 'string' ? { 'mcp-name': params.name } : {}),
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method,
        params: {
          ...params,
          _meta: {
            'io.modelcontextprotocol/protocolVersion': '2026-07-28',
            'io.modelcontextprotocol/clientCapabilities': {},
            ...meta,
          },
        },
      }),
    })
    if (!res.headers.get('content-type')?.includes('text/event-stream')) {
      return [(await res.json()) as Json]
    }
    const frames: Json[] = []
    const reader = res.body!.getReader()
    const decoder = new TextDecoder()
    let buffer = ''
    for (;;) {
      const { value, done } = await reader.read()
      if (done) return frames
      buffer += decoder.decode(value, { stream: true })
      const lines = buffer.split('\n')
      buffer = lines.pop() ?? ''
      for (const line of lines) {
        if (!line.startsWith('data:')) continue
        const frame = JSON.parse(line.slice(5)) as Json
        frames.push(frame)
        if (stop(frame)) {
          await reader.cancel().catch(() => {})
          return frames
        }
      }
    }
  } finally {
    clearTimeout(timer)
    controller.abort()
  }
}

for (const [upstreamName, era] of Object.entries(UPSTREAMS)) {
  describe(`bridge: 2026-07-28 request-scoped features through Barbican to ${upstreamName}`, () => {
    let gateway: RunningServer
    let url: string
    before(async () => {
      gateway = await startFixtureGateway(era)
      url = `${gateway.url}/mcp`
    })
    after(async () => {
      await gateway?.stop()
    })

    const isResponse = (f: Json) => 'result' in f || 'error' in f
    const logsOf = (frames: Json[]) => frames.filter((f) => f.method === 'notifications/message')

    test('a request with _meta logLevel gets the upstream logs of that request on its stream', async () => {
      const frames = await modernFrames(
        url,
        'tools/call',
        { name: 'test_tool_with_logging', arguments: {} },
        { 'io.modelcontextprotocol/logLevel': 'info' },
        isResponse,
      )
      assert.equal(logsOf(frames).length, 3)
      assert.ok(isResponse(frames.at(-1) ?? {}))
    })

    test('a request without logLevel gets no log notifications', async () => {
      const frames = await modernFrames(
        url,
        'tools/call',
        { name: 'test_tool_with_logging', arguments: {} },
        {},
        isResponse,
      )
      assert.equal(logsOf(frames).length, 0)
      assert.ok(isResponse(frames.at(-1) ?? {}))
    })

    test('progress after an input round reaches the retry, with the token the retry chose', async () => {
      const caps = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } }
      const call = { name: 'test_progress_after_input', arguments: {} }
      const first = await modernFrames(
        url,
        'tools/call',
        call,
        { ...caps, progressToken: 'first' },
        isResponse,
      )
      const round = first.at(-1)?.result as Json
      assert.equal(round.resultType, 'input_required')
      const [key] = Object.keys(round.inputRequests as Json)
      const retry = {
        ...call,
        inputResponses: { [key as string]: { action: 'accept', content: { ok: true } } },
        requestState: round.requestState,
      }
      const frames = await modernFrames(
        url,
        'tools/call',
        retry,
        { ...caps, progressToken: 'second' },
        isResponse,
      )
      const progress = frames.filter((f) => f.method === 'notifications/progress')
      assert.deepEqual(
        progress.map((f) => [(f.params as Json).progressToken, (f.params as Json).progress]),
        [
          ['second', 50],
          ['second', 100],
        ],
      )
      assert.equal(textOf(frames.at(-1)?.result as Json), 'finished')
    })

    test('a listen stream asking for a resource gets its updates, tagged', async () => {
      const frames = await modernFrames(
        url,
        'subscriptions/listen',
        { notifications: { resourceSubscriptions: ['test://watched-resource'] } },
        {},
        (f) => f.method === 'notifications/resources/updated',
      )
      const [ack, update] = frames as [Json, Json]
      assert.equal(ack.method, 'notifications/subscriptions/acknowledged')
      assert.deepEqual((ack.params as Json).notifications, {
        resourceSubscriptions: ['test://watched-resource'],
      })
      const params = update.params as Json
      assert.equal(params.uri, 'test://watched-resource')
      assert.equal((params._meta as Json)['io.modelcontextprotocol/subscriptionId'], 1)
    })
  })
}

describe('bridge: the official SDK v2 server (2026-07-28 over stdio) behind Barbican', () => {
  const official = fileURLToPath(
    new URL('../fixtures/bridge-official-v2-server.ts', import.meta.url),
  )
  let gateway: RunningServer
  let url: string
  before(async () => {
    gateway = await startGatewayFor([official])
    url = `${gateway.url}/mcp`
  })
  after(async () => {
    await gateway?.stop()
  })

  test('is probed as 2026-07-28 and its input_required reaches a legacy client as a real elicitation', async () => {
    const client = new Client(
      { name: 'bridge-matrix', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    )
    const asked: string[] = []
    client.setRequestHandler(ElicitRequestSchema, async (request) => {
      asked.push(request.params.message)
      return { action: 'accept', content: { yes: true } }
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(url)))
    try {
      const result = (await client.callTool({
        name: 'confirm',
        arguments: { what: 'deploy' },
      })) as Json
      assert.deepEqual(asked, ['Confirm deploy?'])
      assert.equal(textOf(result), 'deploy: {"action":"accept","content":{"yes":true}}')
      assert.equal(gateway.gateway.upstreams.get('fixture')?.era, 'modern')
    } finally {
      await client.close()
    }
  })

  test('hands a 2026 client its input_required with a Barbican-sealed state, and completes the retry', async () => {
    const call = { name: 'confirm', arguments: { what: 'ship' } }
    const frames = await modernFrames(
      url,
      'tools/call',
      call,
      { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } },
      () => false,
    )
    const first = frames.at(-1)?.result as Json
    assert.equal(first.resultType, 'input_required')
    assert.match(String(first.requestState), /^b1\./)
    const retry = await modernFrames(
      url,
      'tools/call',
      {
        ...call,
        inputResponses: { ok: { action: 'accept', content: { yes: true } } },
        requestState: first.requestState,
      },
      { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } },
      () => false,
    )
    const done = retry.at(-1)?.result as Json
    assert.equal(textOf(done), 'ship: {"action":"accept","content":{"yes":true}}')
  })
})

describe('bridge: a legacy upstream that exits on any request before initialize', () => {
  const fixture = fileURLToPath(new URL('../fixtures/bridge-upstream.ts', import.meta.url))
  let gateway: RunningServer
  before(async () => {
    gateway = await startGatewayFor([fixture, '--era', 'legacy', '--exit-before-initialize'])
  })
  after(async () => {
    await gateway?.stop()
  })

  test('is found legacy when the probe kills it, and serves calls from a fresh process', async () => {
    const client = await legacyClient(`${gateway.url}/mcp`)
    try {
      const result = await client.callTool('test_simple_text')
      assert.equal(textOf(result), 'This is a simple text response for testing.')
      assert.equal(gateway.gateway.upstreams.get('fixture')?.era, 'legacy')
    } finally {
      await client.close()
    }
  })
})

describe('bridge: the official SDK v2 server over Streamable HTTP behind Barbican', () => {
  const official = fileURLToPath(new URL('../fixtures/bridge-official-v2-http.ts', import.meta.url))
  let child: ChildProcess
  let gateway: RunningServer
  before(async () => {
    child = spawn(process.execPath, [official], { stdio: ['pipe', 'pipe', 'ignore'] })
    const upstreamUrl = await waitFor<string>('the v2 server URL', (done) =>
      child.stdout?.once('data', (chunk: Buffer) => done(chunk.toString().trim())),
    )
    gateway = await startGatewayForUrl(upstreamUrl)
  })
  after(async () => {
    await gateway?.stop()
    child?.kill()
  })

  test('a legacy client completes a tool call whose 2026 upstream asks for input over HTTP', async () => {
    const client = new Client(
      { name: 'bridge-matrix', version: '1.0.0' },
      { capabilities: { elicitation: {} } },
    )
    client.setRequestHandler(ElicitRequestSchema, async () => ({
      action: 'accept',
      content: { yes: true },
    }))
    await client.connect(new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`)))
    try {
      const result = (await client.callTool({
        name: 'confirm',
        arguments: { what: 'deploy' },
      })) as Json
      assert.equal(textOf(result), 'deploy: {"action":"accept","content":{"yes":true}}')
      assert.equal(gateway.gateway.upstreams.get('fixture')?.era, 'modern')
    } finally {
      await client.close()
    }
  })
})
