import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import { ANONYMOUS } from '../auth/identity.ts'
import { RequestStateSealer } from '../bridge/request-state.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { silentLogger } from '../telemetry/log.ts'
import { CONFIRM_INPUT, confirmPolicy } from './confirm.ts'
import type { Call, CallPeer, PolicyDecision, Reply } from './policy.ts'
import { SecureContexts } from './secure-contexts.ts'

const route = { kind: 'unicast', upstream: 'mail', original: 'delete' } as const

function modernPeer(capabilities: JsonObject = { elicitation: {} }): CallPeer {
  return {
    era: 'modern',
    capabilities,
    sessionId: undefined,
    ask: () => Promise.reject(new Error('a modern client is never sent requests')),
  }
}

function deleteCall(params: JsonObject = {}, peer: CallPeer = modernPeer()): Call {
  return {
    ...callOf('tools/call', { name: 'mail__delete', arguments: { id: 7 }, ...params }),
    route,
    peer,
    decisions: [] as PolicyDecision[],
    log: silentLogger,
  }
}

describe('confirm policy', () => {
  const sealer = new RequestStateSealer(Buffer.alloc(32, 1))
  const policy = () => confirmPolicy({ rule: { tools: ['*__delete'] }, answerMs: 5000, sealer })

  test('a confirmed call whose upstream asks again goes on without a second question', async () => {
    const p = policy()
    const seen: Call[] = []
    // The upstream asks something itself on the first pass, then completes.
    const relay = async (call: Call): Promise<Reply> => {
      seen.push(call)
      return seen.length === 1
        ? {
            kind: 'result',
            id: 1,
            resultType: 'input_required',
            result: { inputRequests: {}, requestState: 'upstream-state' },
          }
        : { kind: 'result', id: 1, resultType: 'complete', result: {} }
    }
    const question = await p.handle(deleteCall(), relay)
    assert.equal(question.kind === 'result' && question.resultType, 'input_required')
    const state = question.kind === 'result' ? question.result.requestState : undefined
    const round = await p.handle(
      deleteCall({
        requestState: state,
        inputResponses: { [CONFIRM_INPUT]: { action: 'accept', content: {} } },
      }),
      relay,
    )
    assert.equal(seen.length, 1)
    assert.equal(seen[0]!.request.params?.requestState, undefined, 'our state never goes upstream')
    const wrapped = round.kind === 'result' ? round.result.requestState : undefined
    assert.notEqual(wrapped, 'upstream-state', "the upstream's state is wrapped in ours")
    const done = await p.handle(
      deleteCall({ requestState: wrapped, inputResponses: { x: 1 } }),
      relay,
    )
    assert.equal(done.kind === 'result' && done.resultType, 'complete')
    assert.equal(seen[1]!.request.params?.requestState, 'upstream-state')
    assert.deepEqual(seen[1]!.request.params?.inputResponses, { x: 1 })
  })

  test('a foreign or forged state is never taken for an answer: the human is asked', async () => {
    const { relay, calls } = countingRelay()
    const reply = await policy().handle(
      deleteCall({
        requestState: 'b1.forged',
        inputResponses: { [CONFIRM_INPUT]: { action: 'accept' } },
      }),
      relay,
    )
    assert.equal(reply.kind === 'result' && reply.resultType, 'input_required')
    assert.equal(calls.length, 0)
  })

  test('a call with no peer at all is refused, never approved', async () => {
    const { relay, calls } = countingRelay()
    const call = { ...deleteCall(), peer: undefined }
    await assert.rejects(policy().handle(call, relay), { code: 'ERR_POLICY_DENIED' })
    assert.deepEqual(call.decisions, [{ policy: 'confirm', effect: 'deny', answer: 'unavailable' }])
    assert.equal(calls.length, 0)
  })
})

describe('secure contexts', () => {
  const options = { labels: { private: { upstreams: ['mail'] } }, windowMs: 1000, maxContexts: 1 }

  test('a label leaves the context when the window has passed', () => {
    const contexts = new SecureContexts(options)
    contexts.enter('a', new Set(['private']), 0)
    assert.equal(contexts.holds('a', 'private', 999), true)
    assert.equal(contexts.holds('a', 'private', 1000), false)
  })

  test('beyond maxContexts a new context is refused until an old one expires', () => {
    const contexts = new SecureContexts(options)
    contexts.enter('a', new Set(['private']), 0)
    assert.throws(() => contexts.assertRoom('b', 500), { code: 'ERR_POLICY_DENIED' })
    contexts.assertRoom('a', 500)
    contexts.assertRoom('b', 1500)
  })
})

describe('secure contexts over every primitive (ADR 104)', () => {
  const options = {
    labels: {
      private: { upstreams: ['mail'] },
      untrusted: { upstreams: ['web'], tools: ['jobs__scrape'] },
      egress: { upstreams: ['out'] },
    },
    windowMs: 60_000,
    maxContexts: 100,
  }
  const sealer = new RequestStateSealer(Buffer.alloc(32, 2))
  const policyOf = (onTrifecta: 'deny' | 'confirm') => {
    const tracker = new SecureContexts(options)
    const policy = confirmPolicy({
      contexts: { ...options, onTrifecta },
      tracker,
      answerMs: 5000,
      sealer,
    })
    return { tracker, policy }
  }
  const on = (upstream: string, method: string, params: JsonObject, createdBy?: string): Call => ({
    ...callOf(method, params),
    route: {
      kind: 'unicast',
      upstream,
      original: 'x',
      ...(createdBy === undefined ? {} : { createdBy }),
    },
    peer: modernPeer(),
    decisions: [],
  })
  const KEY = 'identity:anonymous|client:'

  test('each primitive adds the labels of the table', async () => {
    const { tracker, policy } = policyOf('deny')
    const { relay } = countingRelay()
    const cases: [Call, string[]][] = [
      [on('web', 'resources/read', { uri: 'web://a' }), ['untrusted']],
      [on('web', 'prompts/get', { name: 'web__p' }), ['untrusted']],
      [
        on('web', 'completion/complete', { ref: { type: 'ref/prompt', name: 'web__p' } }),
        ['untrusted'],
      ],
      // A task's result is the tool's result: it carries the creating tool's labels.
      [on('jobs', 'tasks/result', { taskId: 't1' }, 'jobs__scrape'), ['untrusted']],
      [on('jobs', 'tasks/result', { taskId: 't2' }, 'jobs__other'), []],
      [on('web', 'resources/subscribe', { uri: 'web://a' }), []],
    ]
    for (const [call, labels] of cases) {
      const fresh = new SecureContexts(options)
      const p = confirmPolicy({
        contexts: { ...options, onTrifecta: 'deny' },
        tracker: fresh,
        answerMs: 1,
        sealer,
      })
      await p.handle(call, relay)
      assert.deepEqual(fresh.held(KEY), labels, call.request.method)
    }
    // An upstream's request to the client enters that upstream's labels.
    policy.upstreamAsked?.({
      upstream: 'web',
      method: 'sampling/createMessage',
      sessionId: 's1',
      identity: ANONYMOUS,
    })
    assert.deepEqual(tracker.held('session:s1'), ['untrusted'])
  })

  test('a resource read or prompt of an egress upstream is refused in a trifecta', async () => {
    const { tracker, policy } = policyOf('deny')
    tracker.enter(KEY, new Set(['private', 'untrusted']))
    const { relay, calls } = countingRelay()
    for (const call of [
      on('out', 'resources/read', { uri: 'out://send?body=secret' }),
      on('out', 'prompts/get', { name: 'out__p', arguments: { body: 'secret' } }),
    ]) {
      await assert.rejects(policy.handle(call, relay), (err: Error) => {
        assert.match(err.message, /can send data out/)
        return true
      })
    }
    assert.equal(calls.length, 0)
  })

  test('with onTrifecta: confirm, a resource read is asked about; a completion is refused', async () => {
    const { tracker, policy } = policyOf('confirm')
    tracker.enter(KEY, new Set(['private', 'untrusted']))
    const { relay, calls } = countingRelay()
    const asked = await policy.handle(on('out', 'resources/read', { uri: 'out://x' }), relay)
    assert.equal(asked.kind === 'result' && asked.resultType, 'input_required')
    const completion = on('out', 'completion/complete', { ref: { type: 'ref/prompt', name: 'p' } })
    await assert.rejects(policy.handle(completion, relay), /cannot be confirmed/)
    assert.equal(calls.length, 0)
  })
})
