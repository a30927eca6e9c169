import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { JsonRpcRequest } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import { MemoryContinuationStore } from './continuation-store.ts'
import { HeldCall } from './held-call.ts'

const elicit: JsonRpcRequest = {
  jsonrpc: '2.0',
  id: 7,
  method: 'elicitation/create',
  params: { message: 'hi' },
}
const roots: JsonRpcRequest = { jsonrpc: '2.0', id: 8, method: 'roots/list' }
const done: Result = { kind: 'result', id: 1, resultType: 'complete', result: { ok: true } }

describe('held call', () => {
  test('gathers requests sent together into one round, and resumes with the answers', async () => {
    const held = new HeldCall(10)
    let finish: (r: Result) => void = () => {}
    held.start(
      new Promise<Result>((resolve) => {
        finish = resolve
      }),
    )
    const answers: Promise<Result | ErrorReply>[] = [
      held.requestClient(elicit),
      held.requestClient(roots),
    ]
    const signal = new AbortController().signal
    const round = await held.next(signal)
    assert.equal(round.kind, 'input')
    assert.deepEqual(round.kind === 'input' ? [...round.requests.keys()] : [], [
      'elicitation-1',
      'roots-2',
    ])
    assert.equal(held.parked, true)
    held.answer({
      'elicitation-1': { action: 'accept', content: {} },
      'roots-2': { roots: [] },
      extra: {},
    })
    assert.deepEqual((await answers[0]) as Result, {
      kind: 'result',
      id: 7,
      resultType: 'complete',
      result: { action: 'accept', content: {} },
    })
    assert.ok(Array.isArray(((await answers[1]) as Result).result.roots))
    finish(done)
    assert.deepEqual(await held.next(signal), { kind: 'done', reply: done })
  })

  test('keeps a request whose answer is missing or invalid pending, and asks again', async () => {
    const held = new HeldCall(1)
    held.start(new Promise<Result>(() => {}))
    void held.requestClient(elicit)
    const signal = new AbortController().signal
    await held.next(signal)
    held.answer({ 'elicitation-1': 12345 })
    const again = await held.next(signal)
    assert.equal(again.kind === 'input' ? again.requests.size : 0, 1)
  })

  test('expiry cancels pending elicitations, errors other requests and aborts the upstream call', async () => {
    const held = new HeldCall(1)
    held.start(new Promise<Result>(() => {}))
    const e = held.requestClient(elicit)
    const r = held.requestClient(roots)
    held.expire()
    assert.deepEqual(((await e) as Result).result, { action: 'cancel' })
    assert.equal((await r).kind, 'error')
    assert.equal(held.controller.signal.aborted, true)
  })

  test('the memory store hands a continuation out once and expires the rest', async () => {
    const store = new MemoryContinuationStore<HeldCall>()
    const a = new HeldCall(1)
    const b = new HeldCall(1)
    await store.put('a', a, 60_000)
    await store.put('b', b, 5)
    assert.equal(await store.take('a'), a)
    assert.equal(await store.take('a'), undefined)
    // The store's timers are unref'd (they never hold a process open); this one keeps the test alive.
    const keepAlive = setTimeout(() => {}, 5_000)
    await new Promise<void>((resolve) =>
      b.controller.signal.addEventListener('abort', () => resolve()),
    )
    clearTimeout(keepAlive)
    assert.equal(await store.take('b'), undefined)
    assert.equal(store.size, 0)
  })
})
