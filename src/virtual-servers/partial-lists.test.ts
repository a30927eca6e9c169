/**
 * A partial server is still a server (issue 29 point 5, ADR 099): an optional list the server
 * advertises but answers with an error is held back alone, with the reason, and the server's
 * tools stay in the virtual server. The official SDK's low-level Server answers a method it has
 * no handler for with "Method not found", as server-postgres does for resources/templates/list.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import {
  CallToolRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js'
import { rules } from '../../test/support/plans.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import { Upstream } from '../upstreams/upstream.ts'
import { VirtualServer } from './virtual-server.ts'

/** Advertises tools, resources and prompts; lists tools and resources, fails prompts, has no templates. */
function partialServer(failResources = false): Server {
  const sdk = new Server(
    { name: 'partial', version: '1' },
    { capabilities: { tools: {}, resources: {}, prompts: {} } },
  )
  sdk.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: [{ name: 'query', inputSchema: { type: 'object' } }],
  }))
  sdk.setRequestHandler(CallToolRequestSchema, async () => ({
    content: [{ type: 'text', text: 'answered' }],
  }))
  sdk.setRequestHandler(ListResourcesRequestSchema, async () => {
    if (failResources) throw new Error('the database is not reachable')
    return { resources: [{ uri: 'pg://t/schema', name: 't' }] }
  })
  sdk.setRequestHandler(ListPromptsRequestSchema, async () => {
    throw new Error('prompts are broken today')
  })
  return sdk
}

function upstreamOf(sdk: Server, lines: string[]): Upstream {
  return new Upstream({
    name: 'pg',
    log: jsonLogger({ write: (line) => lines.push(line) }, { upstream: 'pg' }),
    requestTimeoutMs: 5_000,
    createTransport: () => {
      const [ours, theirs] = memoryPair()
      void sdk.connect(theirs as never)
      return ours
    },
    clientInfo: { name: 'barbican', version: '0' },
    clientCapabilities: {},
    onRequest: async (_u, request) => ({
      kind: 'error',
      id: request.id,
      code: -32601,
      message: 'no',
    }),
  })
}

describe('a partial server is still a server', () => {
  test('a failing optional list is held back alone; the tools stay in the virtual server', async () => {
    const lines: string[] = []
    const upstream = upstreamOf(partialServer(), lines)
    const server = new VirtualServer(
      'main',
      [upstream],
      rules('never'),
      jsonLogger({ write: () => {} }),
    )
    try {
      const { catalog, degraded } = await server.catalog()
      assert.deepEqual(
        catalog.tools.map((t) => t.name),
        ['query'],
      )
      assert.deepEqual(
        catalog.resources.map((r) => r.uri),
        ['pg://t/schema'],
      )
      assert.deepEqual(catalog.resourceTemplates, [])
      assert.deepEqual(catalog.prompts, [])
      assert.deepEqual(degraded, [], 'the server is not left out')
      const held = new Map(upstream.heldLists.map((h) => [h.list, h.reason]))
      assert.deepEqual([...held.keys()].sort(), ['prompts/list', 'resources/templates/list'])
      assert.match(held.get('resources/templates/list')!, /Method not found.*-32601/)
      assert.match(held.get('prompts/list')!, /prompts are broken today/)
      const warned = lines.map((l) => JSON.parse(l) as Record<string, unknown>)
      assert.ok(
        warned.some(
          (l) =>
            l.level === 'warn' &&
            l.msg === 'list held back' &&
            l.upstream === 'pg' &&
            l.list === 'resources/templates/list',
        ),
        lines.join(''),
      )
      // A call still reaches it.
      const { upstream: routed } = await server.resolveTool('query')
      assert.equal(routed, upstream)
    } finally {
      server.stop()
      await upstream.stop()
    }
  })

  test('a held-back list is asked again when the server says it changed', async () => {
    const sdk = partialServer(true)
    const upstream = upstreamOf(sdk, [])
    try {
      assert.deepEqual(await upstream.list('resources'), [])
      assert.deepEqual(
        upstream.heldLists.map((h) => h.list),
        ['resources/list'],
      )
      assert.match(upstream.heldLists[0]!.reason, /the database is not reachable/)
      // The server answers again: a list_changed makes Barbican ask, and the hold is lifted.
      sdk.setRequestHandler(ListResourcesRequestSchema, async () => ({
        resources: [{ uri: 'pg://t/schema', name: 't' }],
      }))
      const changed = new Promise((resolve) => upstream.once('listChanged', resolve))
      await sdk.sendResourceListChanged()
      await changed
      assert.equal((await upstream.list('resources')).length, 1)
      assert.deepEqual(upstream.heldLists, [])
    } finally {
      await upstream.stop()
    }
  })

  test('a server that cannot be reached is not mistaken for a partial one', async () => {
    const upstream = upstreamOf(partialServer(), [])
    try {
      await upstream.list('tools')
      await upstream.stop()
      await assert.rejects(upstream.list('prompts'))
      assert.deepEqual(upstream.heldLists, [])
    } finally {
      await upstream.stop()
    }
  })
})
