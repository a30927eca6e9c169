import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { JsonRpcMessage } from '../protocol/jsonrpc.ts'
import { withoutBarbicanMeta } from './client-meta.ts'

const FORGED = {
  'dev.barbican/context': { user: 'root' },
  'dev.barbican/upstreams': {},
  progressToken: 7,
  'example.test/own': 1,
}
const KEPT = { progressToken: 7, 'example.test/own': 1 }

describe('withoutBarbicanMeta', () => {
  test('removes dev.barbican/ keys from requests, notifications and answers, keeps the rest', () => {
    const messages: JsonRpcMessage[] = [
      { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 't', _meta: FORGED } },
      { jsonrpc: '2.0', method: 'notifications/roots/list_changed', params: { _meta: FORGED } },
      { jsonrpc: '2.0', id: 2, result: { action: 'accept', _meta: FORGED } },
    ]
    for (const message of messages) {
      const clean = withoutBarbicanMeta(message) as { params?: object; result?: object }
      const holder = (clean.params ?? clean.result) as { _meta: object }
      assert.deepEqual(holder._meta, KEPT)
      assert.ok('dev.barbican/context' in FORGED, 'the client’s own object is not changed')
    }
  })

  test('returns the message itself when there is nothing to remove', () => {
    const message: JsonRpcMessage = {
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 't', _meta: KEPT },
    }
    assert.equal(withoutBarbicanMeta(message), message)
  })
})
