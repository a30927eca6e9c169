/**
 * A tool call is routed at once on a catalog already at hand (VirtualServer.keptView), and the
 * same way as when it waits for the catalog: never on a catalog dropped since.
 */
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'
import { rules } from '../../test/support/plans.ts'
import { testUpstream } from '../../test/support/upstreams.ts'
import type { Request } from '../protocol/model.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import type { Upstream } from '../upstreams/upstream.ts'
import { resolveRoute } from './route.ts'
import { VirtualServer } from './virtual-server.ts'

function toolServer(names: string[]): Server {
  const sdk = new Server({ name: 'tools', version: '1' }, { capabilities: { tools: {} } })
  sdk.setRequestHandler(ListToolsRequestSchema, async () => ({
    tools: names.map((name) => ({ name, inputSchema: { type: 'object' as const } })),
  }))
  sdk.setRequestHandler(CallToolRequestSchema, async () => ({ content: [] }))
  return sdk
}

function upstreamOf(sdk: Server): Upstream {
  return testUpstream('up', () => {
    const [ours, theirs] = memoryPair()
    void sdk.connect(theirs as never)
    return ours
  })
}

const call = (name: string): Request => ({
  kind: 'request',
  id: 1,
  method: 'tools/call',
  params: { name, arguments: {} },
})

describe('routing a tool call on the kept catalog', () => {
  test('is immediate once the catalog is built, and the same route as waiting for it', async () => {
    const names = ['query']
    const sdk = toolServer(names)
    const upstream = upstreamOf(sdk)
    const server = new VirtualServer('main', [upstream], rules('never'), silentLogger)
    try {
      assert.equal(server.keptView(), undefined, 'nothing is built yet')
      const waited = await resolveRoute(server, call('query'), new Map())
      assert.equal(waited.kind, 'unicast')
      const view = server.keptView()
      assert.ok(view !== undefined)
      assert.equal(view, await server.catalog())
      const immediate = resolveRoute(server, call('query'), new Map())
      assert.ok(!(immediate instanceof Promise))
      assert.deepEqual(immediate, waited)
      // An unknown tool is an unresolved route, as when waiting: the relay refuses it after audit.
      const unknown = resolveRoute(server, call('nope'), new Map())
      assert.ok(!(unknown instanceof Promise))
      assert.equal(unknown.kind, 'unresolved')
      // The upstream's list changed: the kept catalog is dropped, and the route waits again.
      names.push('added')
      const changed = new Promise((resolve) => server.once('listChanged', resolve))
      await sdk.sendToolListChanged()
      await changed
      assert.equal(server.keptView(), undefined)
      const rebuilt = resolveRoute(server, call('added'), new Map())
      assert.ok(rebuilt instanceof Promise)
      assert.equal((await rebuilt).kind, 'unicast')
    } finally {
      server.stop()
      await upstream.stop()
    }
  })
})
