import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { LiveChain, LivePolicies } from './live-policies.ts'
import type { Call, Policy, Reply } from './policy.ts'

const OK: Reply = { kind: 'result', id: 1, resultType: 'complete', result: {} }

function policy(name: 'audit' | 'guards', closed: string[]): Policy {
  return { name, handle: (call, next) => next(call), close: () => void closed.push(name) }
}

describe('a policy generation', () => {
  test('a retired generation closes once the last call that entered it leaves', async () => {
    const closed: string[] = []
    const live = new LivePolicies([policy('audit', closed)])
    const generation = live.current
    generation.enter()
    generation.enter()
    live.swap([policy('guards', closed)])
    generation.leave()
    assert.equal(generation.closed, undefined, 'one call is still in flight')
    generation.leave()
    await generation.closed
    assert.deepEqual(closed, ['audit'])
    assert.equal(generation.calls, 0)
  })

  test('the chain is composed once per generation, and again after a swap', async () => {
    const live = new LivePolicies([policy('audit', [])])
    const chain = new LiveChain(live, async () => OK)
    const first = live.current
    const composed = chain.composedFor(first)
    assert.equal(chain.composedFor(first), composed)
    assert.equal(await chain.run({} as Call), OK)
    live.swap([policy('guards', [])])
    assert.notEqual(chain.composedFor(live.current), composed)
  })
})
