import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { DEFAULT_BATCH_DELAY_MS, flushDelayOf, LineBatch } from './line-batch.ts'
import { jsonLogger } from './log.ts'

/** A batch whose writes are recorded. */
function recorded(options: { maxBytes?: number; maxDelayMs?: number } = {}) {
  const writes: string[] = []
  const batch = new LineBatch({ write: (text) => writes.push(text), ...options })
  return { writes, batch }
}

describe('LineBatch', () => {
  test('lines wait for the size threshold, then go out in one write', () => {
    const { writes, batch } = recorded({ maxBytes: 30, maxDelayMs: 60_000 })
    batch.add('a line of ten\n'.slice(0, 10))
    batch.add('0123456789')
    assert.deepEqual(writes, [])
    assert.equal(batch.pending, 20)
    batch.add('0123456789')
    assert.deepEqual(writes, ['a line of 01234567890123456789'])
    assert.equal(batch.pending, 0)
  })

  test('a batch below the size threshold goes out after the delay', async () => {
    const { writes, batch } = recorded({ maxBytes: 1_000_000, maxDelayMs: 20 })
    batch.add('one\n')
    batch.add('two\n')
    assert.deepEqual(writes, [])
    await sleep(80)
    assert.deepEqual(writes, ['one\ntwo\n'])
  })

  test('now() writes the pending lines and its own in order, in one write', () => {
    const { writes, batch } = recorded({ maxDelayMs: 60_000 })
    batch.add('info\n')
    batch.now('warn\n')
    assert.deepEqual(writes, ['info\nwarn\n'])
    batch.flush()
    assert.deepEqual(writes, ['info\nwarn\n'], 'nothing was left to flush')
  })

  test('flush() cancels the timer: a flushed batch is not written twice', async () => {
    const { writes, batch } = recorded({ maxDelayMs: 10 })
    batch.add('x\n')
    batch.flush()
    await sleep(40)
    assert.deepEqual(writes, ['x\n'])
  })

  test('maxBytes 0 writes every line at once', () => {
    const { writes, batch } = recorded({ maxBytes: 0 })
    batch.add('a\n')
    batch.add('b\n')
    assert.deepEqual(writes, ['a\n', 'b\n'])
  })
})

describe('BARBICAN_LOG_FLUSH_MS', () => {
  test('a number of milliseconds, capped at an hour; anything else the default', () => {
    assert.equal(flushDelayOf('250'), 250)
    assert.equal(flushDelayOf(' 0 '), 0)
    assert.equal(flushDelayOf('9999999'), 3_600_000)
    for (const odd of [undefined, '', '-1', '1.5', 'soon'])
      assert.equal(flushDelayOf(odd), DEFAULT_BATCH_DELAY_MS, String(odd))
  })
})

describe('a logger with its own sink', () => {
  test('writes each line at once, whatever its level (tests and adapters read them at once)', () => {
    const lines: string[] = []
    const log = jsonLogger({ level: 'debug', write: (line) => lines.push(line) })
    log.info('one')
    log.debug('two')
    assert.equal(lines.length, 2)
  })
})
