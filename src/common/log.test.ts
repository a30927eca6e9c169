import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { jsonLogger, redact } from './log.ts'

describe('log lines of errors', () => {
  test('name every cause of an error, a bounded number deep, even when the chain loops', () => {
    const lines: string[] = []
    const log = jsonLogger({ write: (line) => lines.push(line) })
    const root = new Error('socket closed')
    const middle = new Error('cannot send', { cause: root })
    root.cause = middle // a loop: the chain must still end
    log.warn('request failed', { error: new Error('call failed', { cause: middle }) })
    const { error } = JSON.parse(lines[0]!) as { error: Record<string, unknown> }
    assert.equal(error.message, 'call failed')
    let depth = 0
    for (let e = error; e.cause !== undefined; e = e.cause as Record<string, unknown>) depth++
    assert.equal((error.cause as Record<string, unknown>).message, 'cannot send')
    assert.ok(depth >= 2 && depth <= 6, `followed ${depth} causes`)
  })

  test('redact credentials an error message may quote', () => {
    const text = redact(
      'GET https://ops:hunter2@up.example/x?access_token=t0k&page=2 with Bearer abc.def ' +
        'and key bk_live_123 and eyJhbGciOiJFUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln',
    )
    for (const secret of ['hunter2', 't0k', 'abc.def', 'bk_live_123', 'eyJhbGciOiJFUzI1NiJ9']) {
      assert.ok(!text.includes(secret), `${secret} left in: ${text}`)
    }
    assert.match(text, /page=2/, 'what is not a credential stays')
  })
})
