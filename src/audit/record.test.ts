import assert from 'node:assert/strict'
import { createHmac, randomBytes } from 'node:crypto'
import { test } from 'node:test'
import { ephemeralAuditKey } from './audit-key.ts'
import { chainBody, GENESIS_HASH, RecordKey, recordMac } from './record.ts'

/** The MAC as ADR 102 defines it, with node's own HMAC: what verify.ts checks against. */
function reference(key: Buffer, seq: number, at: string, prev: string, body: string): string {
  return createHmac('sha256', key)
    .update(`barbican-audit v2\n${seq}\n${at}\n${prev}\n${body}`)
    .digest('hex')
}

const AT = '2026-12-06T03:00:00.123Z'

test("RecordKey's MAC is createHmac's, byte for byte, whatever the body", () => {
  const keys = [
    ephemeralAuditKey().macKey!,
    Buffer.alloc(0),
    randomBytes(1),
    randomBytes(63),
    randomBytes(64),
    randomBytes(65),
    randomBytes(200),
  ]
  const bodies = [
    '',
    '{"type":"call","callId":"29a0be665f3c-801","subject":"anonymous","outcome":"ok"}',
    'é ü 漢字 🙂', // two, three and four bytes of UTF-8
    'lone \ud800 and \udfff surrogates', // replaced by U+FFFD, as createHmac does
    '\u0000\n"\\',
    'x'.repeat(4096 - 120), // near the first room
    '漢'.repeat(1500), // past it: three bytes each
    'y'.repeat(300_000), // the room grows more than once
    'z'.repeat(10), // and a short one after a long one
  ]
  for (const key of keys) {
    const rk = new RecordKey(key)
    let prev = GENESIS_HASH
    for (const [i, body] of bodies.entries()) {
      const expected = reference(key, i + 1, AT, prev, body)
      assert.equal(recordMac(rk, i + 1, AT, prev, body), expected, `key ${key.length}, body ${i}`)
      assert.equal(recordMac(key, i + 1, AT, prev, body), expected)
      prev = expected
    }
  }
})

test('a RecordKey keeps its own copy of the key', () => {
  const key = randomBytes(32)
  const original = Buffer.from(key)
  const rk = new RecordKey(key)
  key.fill(0)
  assert.equal(
    recordMac(rk, 1, AT, GENESIS_HASH, '{}'),
    reference(original, 1, AT, GENESIS_HASH, '{}'),
  )
})

test('chainBody gives the same record with the key or its RecordKey', () => {
  const key = ephemeralAuditKey().macKey!
  const head = { seq: 41, hash: 'a'.repeat(64) }
  const searchable = { type: 'call', subject: 's', target: null, outcome: 'ok' }
  assert.deepEqual(
    chainBody(new RecordKey(key), head, AT, '{"type":"call"}', searchable),
    chainBody(key, head, AT, '{"type":"call"}', searchable),
  )
})
