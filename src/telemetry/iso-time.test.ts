import assert from 'node:assert/strict'
import { test } from 'node:test'
import { isoNow, isoTime } from './iso-time.ts'

test('isoTime writes what toISOString writes, to the character', () => {
  const times = [
    0,
    1,
    999,
    1000,
    -1,
    -999,
    -1000,
    -1001,
    Date.UTC(2026, 11, 6, 2, 59, 59, 999),
    Date.UTC(2026, 11, 6, 3, 0, 0, 0),
    Date.UTC(2026, 11, 6, 3, 0, 0, 7),
    Date.UTC(2026, 11, 6, 3, 0, 0, 70),
    Date.UTC(9999, 11, 31, 23, 59, 59, 999),
    Date.UTC(10000, 0, 1, 0, 0, 0, 5),
    Date.UTC(-1, 0, 1, 0, 0, 0, 42),
    8.64e15,
    -8.64e15,
    1.5,
    1733450000123.75,
  ]
  // In order, backwards, and each twice: the caches of the second and the millisecond.
  for (const ms of [...times, ...times.toReversed(), ...times.flatMap((t) => [t, t])]) {
    assert.equal(isoTime(ms), new Date(ms).toISOString(), String(ms))
  }
  // Every millisecond of a few seconds, across their boundaries.
  const start = Date.UTC(2026, 0, 1, 0, 0, 58, 0)
  for (let ms = start; ms < start + 3000; ms++) {
    assert.equal(isoTime(ms), new Date(ms).toISOString())
  }
})

test('isoTime throws for a time no Date can hold, as toISOString does', () => {
  for (const ms of [Number.NaN, 8.64e15 + 1, Number.POSITIVE_INFINITY]) {
    assert.throws(() => isoTime(ms), RangeError)
  }
})

test('isoNow is the current time', () => {
  const before = Date.now()
  const now = Date.parse(isoNow())
  assert.ok(now >= before && now <= Date.now())
})
