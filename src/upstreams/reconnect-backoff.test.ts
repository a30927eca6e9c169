import assert from 'node:assert/strict'
import { test } from 'node:test'
import { RECONNECT_BASE_MS, RECONNECT_CAP_MS, reconnectDelay } from './reconnect-backoff.ts'

test('the first failure is retried at once, then the delay doubles from the base', () => {
  assert.deepEqual([1, 2, 3, 4].map(reconnectDelay), [
    0,
    RECONNECT_BASE_MS,
    RECONNECT_BASE_MS * 2,
    RECONNECT_BASE_MS * 4,
  ])
})

test('the delay never grows past the cap, however many failures', () => {
  assert.equal(reconnectDelay(50), RECONNECT_CAP_MS)
  assert.equal(reconnectDelay(10_000), RECONNECT_CAP_MS)
})
