import assert from 'node:assert/strict'
import { test } from 'node:test'
import { belowLevel, RequestLogs } from './request-logs.ts'

test('a level below the threshold is held back, one at or above it is not', () => {
  assert.equal(belowLevel('debug', 'info'), true)
  assert.equal(belowLevel('info', 'info'), false)
  assert.equal(belowLevel('error', 'warning'), false)
})

test('requests asking an upstream for logs are counted per upstream until they end', () => {
  const logs = new RequestLogs()
  logs.track(1, 'files', 'info')
  logs.track(2, 'files', 'debug')
  logs.track(3, 'memory', 'info')
  assert.equal(logs.countFor('files'), 2)
  logs.untrack(1)
  assert.equal(logs.countFor('files'), 1)
  assert.equal(logs.countFor('memory'), 1)
  assert.equal(logs.countFor('other'), 0)
})

test("a log line goes to the request that asked its upstream, at or above that request's level", () => {
  const logs = new RequestLogs()
  logs.track('a', 'files', 'warning')
  assert.deepEqual(logs.attribute('files', { level: 'error', data: 'disk' }), {
    id: 'a',
    params: { level: 'error', data: 'disk' },
  })
  assert.equal(logs.attribute('files', { level: 'info', data: 'chatty' }), undefined)
  assert.equal(logs.attribute('memory', { level: 'error' }), undefined)
})

test('a log line without a level counts as info', () => {
  const logs = new RequestLogs()
  logs.track(7, 'files', 'debug')
  assert.deepEqual(logs.attribute('files', { data: 'x' }), {
    id: 7,
    params: { data: 'x', level: 'info' },
  })
})
