import assert from 'node:assert/strict'
import { once } from 'node:events'
import { describe, test } from 'node:test'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { rules } from '../../test/support/plans.ts'
import { testUpstream } from '../../test/support/upstreams.ts'
import type { JsonRpcNotification } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import { memoryPair } from '../transports/memory.ts'
import type { ListKey, Upstream, UpstreamState } from '../upstreams/upstream.ts'
import { VirtualServer } from './virtual-server.ts'

/** An Upstream connected in-process to the official SDK server `sdk`. */
function upstreamOf(sdk: McpServer): Upstream {
  return testUpstream('files', () => {
    const [ours, theirs] = memoryPair()
    void sdk.connect(theirs as never)
    return ours
  })
}

describe('typed events of Upstream and VirtualServer', () => {
  test('a list change travels from the upstream to its virtual server with its keys', async () => {
    const sdk = new McpServer({ name: 'files', version: '1' })
    sdk.registerTool('read', { description: 'Reads' }, async () => ({ content: [] }))
    const upstream = upstreamOf(sdk)
    const server = new VirtualServer('main', [upstream], rules('always'), silentLogger)
    const states: UpstreamState[] = []
    const notifications: JsonRpcNotification[] = []
    upstream.on('state', (state) => states.push(state))
    upstream.on('notification', (notification) => notifications.push(notification))
    try {
      await upstream.list('tools')
      assert.deepEqual(states, ['connecting', 'ready'])
      const changed = once(server, 'listChanged') as Promise<[readonly ListKey[]]>
      sdk.registerTool('write', { description: 'Writes' }, async () => ({ content: [] }))
      assert.deepEqual(await changed, [['tools']])
      assert.deepEqual(
        notifications.map((n) => n.method),
        ['notifications/tools/list_changed'],
      )
    } finally {
      await upstream.stop()
    }
  })
})

/**
 * Never called: `tsc --noEmit` (part of `npm test`) checks that each line is a type error, and
 * fails on any that stops being one, as they all would on an untyped EventEmitter.
 */
export function eventTypeErrors(upstream: Upstream, server: VirtualServer): void {
  // @ts-expect-error: no such event
  upstream.on('listchanged', () => {})
  // @ts-expect-error: the keys are list keys, not a string
  upstream.emit('listChanged', 'tools')
  // @ts-expect-error: the state is an UpstreamState
  upstream.emit('state', 'gone')
  // @ts-expect-error: a notification listener gets the notification
  upstream.on('notification', (n: string) => n)
  // @ts-expect-error: a virtual server emits only listChanged
  server.on('notification', () => {})
  // @ts-expect-error: the keys are list keys
  server.emit('listChanged', ['everything'])
}
