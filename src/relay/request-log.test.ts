import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { jsonLogger, type Logger, type LogLevel } from '../telemetry/log.ts'
import { callLineWritten, RequestLog } from './request-log.ts'

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736'

/** A gateway logger writing JSON lines into `lines`, as `barbican serve` derives the session's. */
function capture(level: LogLevel, levels: Record<string, LogLevel> = {}) {
  const lines: Record<string, unknown>[] = []
  const log = jsonLogger({ level, levels, write: (line) => lines.push(JSON.parse(line)) }).child({
    part: 'session',
  })
  return { lines, log }
}

describe("a request's logger", () => {
  test("writes its id and the caller's trace id on every line, as the derived child did", () => {
    const { lines, log } = capture('debug')
    const headers = { traceparent: `00-${TRACE}-00f067aa0ba902b7-01` }
    const request = new RequestLog(log, 7, headers, undefined)
    request.warn('refused', { code: 'ERR_X' })
    request.child({ part: 'call' }).info('tools/call echo ok')
    assert.equal(lines.length, 2)
    for (const line of lines) {
      assert.equal(line.requestId, 7)
      assert.equal(line.traceId, TRACE)
    }
    assert.equal(lines[0]!.part, 'session')
    assert.equal(lines[1]!.part, 'call')
  })

  test('draws one fresh trace id for all its lines when the caller sent none', () => {
    const { lines, log } = capture('debug')
    const request = new RequestLog(log, 'a', undefined, { name: 'echo' })
    request.info('one')
    request.child({ part: 'call' }).info('two')
    assert.match(String(lines[0]!.traceId), /^[\da-f]{32}$/)
    assert.equal(lines[1]!.traceId, lines[0]!.traceId)
  })

  test('derives nothing until a line is written', () => {
    let derived = 0
    const parent: Logger = {
      debug() {},
      info() {},
      warn() {},
      error() {},
      child: () => {
        derived++
        return parent
      },
      enabled: (level) => level !== 'debug',
    }
    const request = new RequestLog(parent, 1, undefined, undefined)
    assert.equal(request.enabled('info'), true)
    assert.equal(request.enabled('debug'), false)
    assert.equal(derived, 0)
    request.error('failed')
    request.error('failed again')
    assert.equal(derived, 1)
  })
})

describe('whether a call line is written', () => {
  test('follows the level of call lines (log.levels.call), else the gateway level', () => {
    assert.equal(callLineWritten(capture('info').log, 'tools/call'), true)
    assert.equal(callLineWritten(capture('info').log, 'tools/list'), false)
    assert.equal(callLineWritten(capture('warn').log, 'tools/call'), false)
    assert.equal(callLineWritten(capture('warn', { call: 'debug' }).log, 'tools/list'), true)
    assert.equal(callLineWritten(capture('info', { call: 'warn' }).log, 'tools/call'), false)
  })

  test('a logger that cannot tell gets its call lines built', () => {
    const unknowing: Logger = {
      debug() {},
      info() {},
      warn() {},
      error() {},
      child: () => unknowing,
    }
    assert.equal(callLineWritten(unknowing, 'tools/call'), true)
  })
})
