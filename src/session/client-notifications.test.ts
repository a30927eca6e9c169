import assert from 'node:assert/strict'
import { test } from 'node:test'
import type { JsonRpcId, JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'
import { ClientNotifications } from './client-notifications.ts'

function channel(revision: Revision | undefined, stateless = false) {
  const sent: { message: JsonRpcMessage; related: JsonRpcId | undefined }[] = []
  const notifications = new ClientNotifications({
    revision: () => revision,
    stateless,
    send: (message, related) => sent.push({ message, related }),
  })
  return { notifications, sent }
}

test('list changes reach the client only after it finished initializing, once per method', () => {
  const { notifications, sent } = channel('2025-11-25')
  notifications.listChanged(['tools'])
  assert.equal(sent.length, 0)
  notifications.markInitialized()
  notifications.listChanged(['tools', 'resources', 'resourceTemplates'])
  assert.deepEqual(
    sent.map((s) => 'method' in s.message && s.message.method),
    ['notifications/tools/list_changed', 'notifications/resources/list_changed'],
  )
})

test("log lines below the client's level are held back; upstream lines name their source", () => {
  const { notifications, sent } = channel('2025-11-25')
  notifications.markInitialized()
  notifications.setLogLevel('warning')
  notifications.upstreamLog('files', { level: 'info', data: 'quiet' })
  notifications.upstreamLog('files', { level: 'error', logger: 'fs', data: 'loud' })
  assert.deepEqual(sent, [
    {
      message: {
        jsonrpc: '2.0',
        method: 'notifications/message',
        params: { level: 'error', logger: 'files/fs', data: 'loud' },
      },
      related: undefined,
    },
  ])
})

test('a stateless 2026-07-28 connection only carries notifications related to a request', () => {
  const { notifications, sent } = channel(undefined, true)
  notifications.notify('notifications/tasks/status', { taskId: 't' })
  notifications.notify('notifications/progress', { progress: 1 }, 'req-1')
  assert.equal(sent.length, 1)
  assert.equal(sent[0]?.related, 'req-1')
})
