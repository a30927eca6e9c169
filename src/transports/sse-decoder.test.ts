import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { SseDecoder } from './sse-decoder.ts'
import type { SseEvent } from './sse-stream.ts'

/** Decodes `chunks` and returns the events and `retry:` values seen. */
function decode(chunks: readonly Buffer[], maxEventBytes = 1 << 20) {
  const events: SseEvent[] = []
  const retries: number[] = []
  const decoder = new SseDecoder({
    maxEventBytes,
    onEvent: (event) => events.push({ ...event }),
    onRetry: (ms) => retries.push(ms),
  })
  for (const chunk of chunks) decoder.feed(chunk)
  decoder.end()
  return { events, retries }
}

const STREAM = Buffer.concat([
  Buffer.from([0xef, 0xbb, 0xbf]), // a byte order mark
  Buffer.from(
    ': a comment\r\n' +
      'retry: 250\r\n' +
      'id: ev-1\r\n' +
      'data: {"text":"café ☕ 😀"}\r\n\r\n' +
      'event: ping\rdata: x\r\r' +
      'data: line one\n' +
      'data: line two\n' +
      'id: ev-2\n\n' +
      'id: ev-3\ndata:\n\n' +
      'data: unterminated at the end',
    'utf8',
  ),
])

const EXPECTED: SseEvent[] = [
  { id: 'ev-1', event: undefined, data: '{"text":"café ☕ 😀"}' },
  { id: undefined, event: 'ping', data: 'x' },
  { id: 'ev-2', event: undefined, data: 'line one\nline two' },
  { id: 'ev-3', event: undefined, data: '' },
]

describe('SseDecoder', () => {
  test('decodes a whole stream: BOM, CRLF, CR and LF line ends, comments, retry, ids', () => {
    const { events, retries } = decode([STREAM])
    assert.deepEqual(events, EXPECTED)
    assert.deepEqual(retries, [250])
  })

  test('gives the same events however the bytes are split, inside characters and CRLF included', () => {
    for (let cut = 1; cut < STREAM.length; cut++) {
      const { events } = decode([STREAM.subarray(0, cut), STREAM.subarray(cut)])
      assert.deepEqual(events, EXPECTED, `split at byte ${cut}`)
    }
    const bytes = [...STREAM].map((byte) => Buffer.from([byte]))
    assert.deepEqual(decode(bytes).events, EXPECTED, 'one byte at a time')
  })

  test('refuses an event larger than maxEventBytes, whether or not its line has ended', () => {
    const long = Buffer.from(`data: ${'x'.repeat(2000)}`)
    const isOversized = (err: unknown) =>
      err instanceof BarbicanError && err.code === 'ERR_UPSTREAM_PROTOCOL'
    assert.throws(() => decode([long], 1000), isOversized)
    assert.throws(() => decode([Buffer.concat([long, Buffer.from('\n')])], 1000), isOversized)
    assert.throws(
      () => decode([long.subarray(0, 600), long.subarray(600, 1200), long.subarray(1200)], 1000),
      isOversized,
    )
  })
})
