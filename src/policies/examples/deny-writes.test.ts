import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf, countingRelay } from '../../../test/support/calls.ts'
import { compose, ORDER } from '../chain.ts'
import { denyWrites } from './deny-writes.ts'

describe('the deny-writes example policy', () => {
  const { calls, relay } = countingRelay()
  const chain = compose([denyWrites], relay, [...ORDER, denyWrites.name])
  const toTool = (original: string) =>
    callOf(
      'tools/call',
      { name: `files__${original}` },
      {
        route: { kind: 'unicast', upstream: 'files', original },
      },
    )

  test('refuses a write_ tool with ERR_POLICY_DENIED before the relay', async () => {
    await assert.rejects(chain(toTool('write_file')), { code: 'ERR_POLICY_DENIED' })
    assert.equal(calls.length, 0)
  })

  test('passes other calls on to the relay', async () => {
    const reply = await chain(toTool('read_file'))
    assert.equal(reply.kind, 'result')
    assert.equal(calls.length, 1)
  })
})
