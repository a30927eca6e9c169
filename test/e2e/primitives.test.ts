/**
 * Every primitive through a virtual server over real servers from npm: server-everything,
 * server-memory and server-filesystem behind Barbican, driven by the official SDK client over
 * Streamable HTTP. Sampling and elicitation are triggered by server-everything's own tools and
 * answered by the client.
 */
import assert from 'node:assert/strict'
import { mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  ResourceUpdatedNotificationSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { textOf } from '../support/content.ts'
import { grantTo } from '../support/sandbox.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const pkg = (name: string) =>
  join(root, 'node_modules/@modelcontextprotocol', name, 'dist/index.js')

describe('every primitive through a virtual server over real MCP servers', () => {
  let server: RunningServer
  let client: Client
  let dataDir: string
  const logs: { level: string; logger?: string; data: unknown }[] = []

  before(async () => {
    dataDir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-files-')))
    writeFileSync(join(dataDir, 'hello.txt'), 'hello from the filesystem')
    // Every upstream runs in the default sandbox: files gets its root, memory its state folder.
    grantTo('files', dataDir, join(dataDir, 'hello.txt'))
    const memoryState = join(dataDir, 'memory-state')
    const text = JSON.stringify({
      listen: '127.0.0.1:0',
      upstreams: {
        everything: { command: process.execPath, args: [pkg('server-everything'), 'stdio'] },
        memory: {
          command: process.execPath,
          args: [pkg('server-memory')],
          env: { MEMORY_FILE_PATH: join(memoryState, 'memory.jsonl') },
          sandbox: { stateDir: memoryState },
        },
        files: { command: process.execPath, args: [pkg('server-filesystem'), dataDir] },
      },
      servers: {
        default: { upstreams: ['everything', 'memory', 'files'] },
        readonly: {
          upstreams: ['files'],
          tools: { include: ['read_*', 'list_*'], exclude: ['read_media_file'] },
        },
      },
    })
    const { config } = parseConfigText(text, { cwd: root })
    server = await startServer(config, silentLogger)
    client = new Client(
      { name: 'primitives', version: '1.0.0' },
      { capabilities: { sampling: {}, elicitation: {}, roots: { listChanged: true } } },
    )
    client.setRequestHandler(CreateMessageRequestSchema, async (request) => {
      const first = request.params.messages[0]?.content
      const prompt = first && 'text' in first ? first.text : ''
      return {
        role: 'assistant',
        model: 'test-model',
        content: { type: 'text', text: `sampled<${prompt}>` },
      }
    })
    client.setRequestHandler(ElicitRequestSchema, async () => ({
      action: 'accept',
      content: { name: 'Ada Lovelace', check: true, integer: 42 },
    }))
    client.setRequestHandler(ListRootsRequestSchema, async () => ({
      roots: [{ uri: `file://${dataDir}`, name: 'data' }],
    }))
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      logs.push(n.params as (typeof logs)[number])
    })
    await client.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`)))
  })

  after(async () => {
    await client?.close()
    await server?.stop()
  })

  test('merges the three servers tools under their namespaces', async () => {
    const { tools } = await client.listTools()
    const names = new Set(tools.map((t) => t.name))
    for (const expected of [
      'everything__echo',
      'memory__create_entities',
      'files__read_text_file',
    ]) {
      assert.ok(names.has(expected), `${expected} missing`)
    }
    assert.equal(names.size, tools.length, 'no duplicate names')
    const echo = tools.find((t) => t.name === 'everything__echo')
    assert.equal(typeof echo?.inputSchema, 'object', 'schemas pass through intact')
  })

  test('calls tools on each upstream: memory writes then reads, files reads', async () => {
    await client.callTool({
      name: 'memory__create_entities',
      arguments: {
        entities: [{ name: 'Barbican', entityType: 'gateway', observations: ['routes MCP'] }],
      },
    })
    const graph = textOf(await client.callTool({ name: 'memory__read_graph', arguments: {} }))
    assert.match(graph, /Barbican/)
    const file = await client.callTool({
      name: 'files__read_text_file',
      arguments: { path: join(dataDir, 'hello.txt') },
    })
    assert.match(textOf(file), /hello from the filesystem/)
  })

  test('relays a sampling request from server-everything to the client and back', async () => {
    const result = await client.callTool({
      name: 'everything__trigger-sampling-request',
      arguments: { prompt: 'capital of France', maxTokens: 10 },
    })
    assert.match(textOf(result), /sampled<.*capital of France>/)
  })

  test('relays an elicitation request from server-everything to the client and back', async () => {
    const result = await client.callTool({
      name: 'everything__trigger-elicitation-request',
      arguments: {},
    })
    assert.match(textOf(result), /Ada Lovelace/)
  })

  test('relays roots/list from an upstream to the client', async () => {
    const result = await client.callTool({ name: 'everything__get-roots-list', arguments: {} })
    assert.match(textOf(result), new RegExp(dataDir.replaceAll('/', '\\/')))
  })

  test('maps progress tokens both ways', async () => {
    const progress: number[] = []
    const result = await client.callTool(
      {
        name: 'everything__trigger-long-running-operation',
        arguments: { duration: 0.3, steps: 3 },
      },
      undefined,
      { onprogress: (p) => progress.push(p.progress) },
    )
    assert.ok(progress.length >= 2, `got ${progress.length} progress notifications`)
    assert.deepEqual(
      progress,
      [...progress].sort((a, b) => a - b),
    )
    assert.match(textOf(result), /completed/i)
  })

  test('lists and gets prompts, and completes a prompt argument', async () => {
    const { prompts } = await client.listPrompts()
    assert.ok(prompts.some((p) => p.name === 'everything__simple-prompt'))
    const got = await client.getPrompt({ name: 'everything__simple-prompt', arguments: {} })
    assert.ok(got.messages.length > 0)
    const completion = await client.complete({
      ref: { type: 'ref/prompt', name: 'everything__completable-prompt' },
      argument: { name: 'department', value: 'E' },
    })
    assert.ok(Array.isArray(completion.completion.values))
  })

  test('lists, templates and reads resources with namespaced URIs', async () => {
    const { resources } = await client.listResources()
    assert.ok(resources.length > 0)
    assert.ok(
      resources.every(
        (r) =>
          r.uri.startsWith('everything+') ||
          r.uri.startsWith('files+') ||
          r.uri.startsWith('memory+'),
      ),
    )
    const first = resources.find((r) => r.uri.startsWith('everything+'))!
    const read = await client.readResource({ uri: first.uri })
    assert.equal(read.contents[0]?.uri, first.uri, 'contents carry the namespaced URI')
    const { resourceTemplates } = await client.listResourceTemplates()
    assert.ok(resourceTemplates.some((t) => t.uriTemplate.startsWith('everything+demo://')))
  })

  test('sets the log level on upstreams and tags their messages with the source', async () => {
    await client.setLoggingLevel('debug')
    const before = logs.length
    const { resources } = await client.listResources()
    const uri = resources.find((r) => r.uri.startsWith('everything+'))!.uri
    await client.subscribeResource({ uri })
    const deadline = Date.now() + 5_000
    while (
      !logs.slice(before).some((l) => String(l.data).includes('Subscribe')) &&
      Date.now() < deadline
    ) {
      await new Promise((r) => setTimeout(r, 50))
    }
    const entry = logs.slice(before).find((l) => String(l.data).includes('Subscribe'))
    assert.ok(entry, 'the upstream log message reached the client')
    assert.match(String(entry.logger), /^everything/)
    await client.unsubscribeResource({ uri })
  })

  test('delivers resources/updated for a subscribed resource under its namespaced URI', async () => {
    const { resources } = await client.listResources()
    const uri = resources.find((r) => r.uri.startsWith('everything+'))!.uri
    const updated = new Promise<string>((resolve) =>
      client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) =>
        resolve(n.params.uri),
      ),
    )
    await client.subscribeResource({ uri })
    await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} })
    const got = await Promise.race([
      updated,
      new Promise<string>((_, reject) =>
        setTimeout(() => reject(new Error('no update within 12 s')), 12_000),
      ),
    ])
    assert.equal(got, uri)
    await client.callTool({ name: 'everything__toggle-subscriber-updates', arguments: {} })
    await client.unsubscribeResource({ uri })
  })

  test('answers ping', async () => {
    assert.deepEqual(await client.ping(), {})
  })

  test('a virtual server with filters neither lists nor calls an excluded tool', async () => {
    const other = new Client({ name: 'readonly', version: '1.0.0' })
    await other.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp/readonly`)))
    try {
      const { tools } = await other.listTools()
      const names = tools.map((t) => t.name)
      assert.ok(names.includes('read_text_file'), 'one upstream: names unchanged')
      assert.ok(names.includes('list_directory'))
      assert.ok(!names.includes('write_file'))
      assert.ok(!names.includes('read_media_file'), 'exclude wins over include')
      await assert.rejects(
        other.callTool({
          name: 'write_file',
          arguments: { path: join(dataDir, 'x.txt'), content: 'no' },
        }),
        /Unknown tool: write_file/,
      )
    } finally {
      await other.close()
    }
  })
})
