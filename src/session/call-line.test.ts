import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { jsonLogger } from '../telemetry/log.ts'
import { callLevel, callOutcome, logCall, traceIdOf } from './call-line.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'

describe('the line of a client request', () => {
  test("continues the caller's trace: the traceparent header first, then params._meta", () => {
    assert.equal(traceIdOf({ traceparent: `00-${TRACE}-00f067aa0ba902b7-01` }, undefined), TRACE)
    assert.equal(
      traceIdOf({}, { _meta: { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` } }),
      TRACE,
    )
  })

  test('starts a fresh trace id for a missing, malformed or all-zero traceparent', () => {
    for (const traceparent of [undefined, 'garbage', `00-${'0'.repeat(32)}-00f067aa0ba902b7-01`]) {
      const id = traceIdOf(traceparent ? { traceparent } : undefined, undefined)
      assert.match(id, /^[\da-f]{32}$/)
      assert.notEqual(id, '0'.repeat(32))
    }
    assert.notEqual(traceIdOf(undefined, undefined), traceIdOf(undefined, undefined))
  })

  test('a tool result with isError is an error, as /metrics counts it; others are ok', () => {
    assert.equal(callOutcome({ kind: 'result', result: { isError: true } }), 'error tool_error')
    assert.equal(callOutcome({ kind: 'result', result: { isError: false } }), 'ok')
    assert.equal(callOutcome({ kind: 'result', result: {} }), 'ok')
    assert.equal(callOutcome({ kind: 'error', code: -32602 }), 'error -32602')
  })

  test('calls at info, lists and handshakes at debug', () => {
    assert.equal(callLevel('tools/call'), 'info')
    assert.equal(callLevel('resources/read'), 'info')
    assert.equal(callLevel('tasks/get'), 'info')
    assert.equal(callLevel('tools/list'), 'debug')
    assert.equal(callLevel('initialize'), 'debug')
  })

  test('says method, target, upstream, outcome and time, under the call component', () => {
    const lines: Record<string, unknown>[] = []
    const log = jsonLogger({
      level: 'error',
      levels: { call: 'info' },
      write: (l) => lines.push(JSON.parse(l)),
    })
    const request = log.child({ requestId: 7, traceId: TRACE })
    logCall(request, {
      method: 'tools/call',
      params: { name: 'files__read', arguments: { path: '/x' } },
      upstream: 'files',
      outcome: 'ok',
      startedAt: performance.now(),
    })
    logCall(request, { method: 'tools/list', params: {}, outcome: 'ok', startedAt: 0 })
    assert.equal(lines.length, 1, 'the list is at debug')
    const line = lines[0]!
    assert.match(String(line.msg), /^tools\/call files__read ok in [\d.]+ ms$/)
    assert.equal(line.requestId, 7)
    assert.equal(line.traceId, TRACE)
    assert.equal(line.part, 'call')
    assert.equal(line.upstream, 'files')
    assert.ok(!JSON.stringify(line).includes('/x'), 'arguments are not logged')
  })
})
