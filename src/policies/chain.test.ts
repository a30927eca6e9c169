import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import { BarbicanError } from '../common/errors.ts'
import { auditPolicy } from './audit.ts'
import { authorize } from './authorize.ts'
import { cedarPolicy } from './cedar.ts'
import { CedarEngine } from './cedar-engine.ts'
import { compose, deniedBy, ORDER } from './chain.ts'
import { confirmPolicy } from './confirm.ts'
import { guards } from './guards.ts'
import type { Policy } from './policy.ts'
import { MemoryRateCounterStore } from './rate-counter-store.ts'
import { rateLimit } from './rate-limit.ts'

/** A policy named like an installed one that passes each call on twice. */
const twice: Policy = {
  name: 'authorize',
  async handle(call, next) {
    await next(call)
    return await next(call)
  },
}

describe('policy chain', () => {
  test('refuses a second next() from the same policy with ERR_POLICY_CHAIN', async () => {
    const { calls, relay } = countingRelay()
    const chain = compose([twice], relay)
    await assert.rejects(chain(callOf('tools/call', { name: 'read' })), {
      code: 'ERR_POLICY_CHAIN',
      message: 'Policy "authorize" called next() twice',
    })
    assert.equal(calls.length, 1, 'the relay ran once')
  })

  test('each call gets its own next(): a policy that passes on once works every time', async () => {
    const { calls, relay } = countingRelay()
    const chain = compose([authorize([{ servers: ['*'], tools: ['*'] }])], relay)
    await chain(callOf('tools/call', { name: 'read' }))
    await chain(callOf('tools/call', { name: 'read' }))
    assert.equal(calls.length, 2)
  })

  test('ORDER names exactly the policies that exist', () => {
    const quotas = rateLimit([], new MemoryRateCounterStore())
    const checks = guards({
      arguments: 'off',
      output: 'off',
      oversize: 'error',
      redact: false,
      redactPatterns: [],
    })
    // Quotas right after audit (a refused call costs nothing more but its record), guards innermost (they see only
    // authorized calls and the result as the upstream sent it).
    const sink = { record: async () => {} }
    assert.deepEqual(ORDER, [
      auditPolicy({ sink }).name,
      quotas.name,
      authorize([]).name,
      cedarPolicy(new CedarEngine([]), 'enforce').name,
      confirmPolicy({ answerMs: 1000 }).name,
      checks.name,
    ])
  })

  test('refuses a policy ORDER does not name with ERR_POLICY_CHAIN', () => {
    const { relay } = countingRelay()
    const stranger: Policy = { name: 'not-a-policy', handle: (call, next) => next(call) }
    assert.throws(() => compose([stranger], relay), {
      code: 'ERR_POLICY_CHAIN',
      message: `Unknown policy "not-a-policy"; known: ${ORDER.join(', ')}`,
    })
  })

  test('a denial names the policy that refused, not the policies it passed out through', async () => {
    const { relay } = countingRelay()
    const passing: Policy = { name: 'outer', handle: (call, next) => next(call) }
    const refusing: Policy = {
      name: 'gate',
      handle: async () => {
        throw new BarbicanError('ERR_POLICY_DENIED', 'no')
      },
    }
    const order = ['outer', 'gate', 'authorize']
    const chain = compose(
      [passing, refusing, authorize([{ servers: ['*'], tools: ['*'] }])],
      relay,
      order,
    )
    const err = await chain(callOf('tools/call', { name: 'read' })).catch((e: unknown) => e)
    assert.equal(deniedBy(err), 'gate')
    const strict = compose([passing, authorize([])], relay, order)
    const refused = await strict(callOf('tools/call', { name: 'read' })).catch((e: unknown) => e)
    assert.equal(deniedBy(refused), 'authorize')
    assert.equal(deniedBy(new BarbicanError('ERR_POLICY_DENIED', 'thrown elsewhere')), undefined)
  })
})
