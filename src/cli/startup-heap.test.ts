import assert from 'node:assert/strict'
import { test } from 'node:test'
import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8'
import { endStartup, operatorSetGrowth } from './startup-heap.ts'

const newSpaceBytes = () =>
  getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0

/** Allocates short-lived objects in bulk, as start-up does. */
function churn(): number {
  let kept: { i: number; s: string }[] = []
  let total = 0
  for (let i = 0; i < 2_000_000; i++) {
    kept.push({ i, s: `x${i}` })
    if (kept.length > 20_000) {
      total += kept.length
      kept = []
    }
  }
  return total + kept.length
}

test('the young generation stays small while held, and grows again after endStartup', () => {
  setFlagsFromString('--semi-space-growth-factor=1')
  assert.ok(churn() > 0)
  const held = newSpaceBytes()
  assert.ok(held <= 4 * 2 ** 20, `held at ${held} bytes`)
  endStartup()
  assert.ok(churn() > 0)
  assert.ok(newSpaceBytes() > held, `${newSpaceBytes()} after, ${held} while held`)
})

test("an operator's own growth factor is left alone", () => {
  assert.equal(operatorSetGrowth(['--semi-space-growth-factor=4'], undefined), true)
  assert.equal(operatorSetGrowth([], '--max-old-space-size=100 --semi-space-growth-factor=3'), true)
  assert.equal(operatorSetGrowth(['--enable-source-maps'], '--max-old-space-size=100'), false)
  assert.equal(operatorSetGrowth([], undefined), false)
})
