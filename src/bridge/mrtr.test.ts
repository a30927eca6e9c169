import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import { describe, test } from 'node:test'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import type { JsonObject, JsonRpcRequest } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import { MemoryContinuationStore } from './continuation-store.ts'
import type { ClientRequester, HeldCall } from './held-call.ts'
import { type ModernCall, MrtrBridge } from './mrtr.ts'
import { RequestStateSealer } from './request-state.ts'

const alice: Identity = { subject: 'alice', scopes: [], method: 'jwt' }
const bob: Identity = { subject: 'bob', scopes: [], method: 'jwt' }
const complete = (result: JsonObject): Result => ({
  kind: 'result',
  id: 0,
  resultType: 'complete',
  result,
})

function bridge(store = new MemoryContinuationStore<HeldCall>()) {
  return new MrtrBridge({
    sealer: new RequestStateSealer(randomBytes(32)),
    store,
    holdMs: 60_000,
    settleMs: 5,
  })
}

/** A legacy upstream tool that elicits once, then answers with what it got. */
function legacyEliciting(): ModernCall['send'] {
  return async (_params, owner) => {
    const request: JsonRpcRequest = {
      jsonrpc: '2.0',
      id: 1,
      method: 'elicitation/create',
      params: { message: 'Name?' },
    }
    const answer = await (owner as ClientRequester).requestClient(request, 1)
    return complete({
      content: [
        { type: 'text', text: JSON.stringify(answer.kind === 'result' ? answer.result : null) },
      ],
    })
  }
}

function call(over: Partial<ModernCall>): ModernCall {
  return {
    identity: alice,
    method: 'tools/call',
    params: { name: 't', arguments: {} },
    clientCapabilities: { elicitation: {} },
    signal: new AbortController().signal,
    upstream: 'up',
    upstreamEra: 'legacy',
    send: legacyEliciting(),
    ...over,
  }
}

describe('MRTR bridge, 2026 client and legacy upstream', () => {
  test('an upstream elicitation becomes input_required, and the retry resumes the held call', async () => {
    const b = bridge()
    const send = legacyEliciting()
    let sends = 0
    const counting: ModernCall['send'] = (p, o, s) => {
      sends++
      return send(p, o, s)
    }
    const first = (await b.modernCall(call({ send: counting }))) as Result
    assert.equal(first.resultType, 'input_required')
    const [key] = Object.keys(first.result.inputRequests as JsonObject)
    const params = {
      name: 't',
      arguments: {},
      inputResponses: { [key as string]: { action: 'accept', content: { n: 'Ada' } } },
      requestState: first.result.requestState,
    }
    const done = (await b.modernCall(call({ params, send: counting }))) as Result
    assert.equal(done.resultType, 'complete')
    assert.match(JSON.stringify(done.result), /Ada/)
    assert.equal(sends, 1, 'the upstream call was made once and resumed, not repeated')
  })

  test('a requestState is single use and bound to the caller and the request', async () => {
    const b = bridge()
    const first = (await b.modernCall(call({}))) as Result
    const state = first.result.requestState
    const retry = (identity: Identity, args: JsonObject) =>
      b.modernCall(
        call({
          identity,
          params: { name: 't', arguments: args, inputResponses: {}, requestState: state },
        }),
      )
    await assert.rejects(retry(bob, {}), BarbicanError)
    await assert.rejects(retry(alice, { other: 1 }), BarbicanError)
    const again = (await retry(alice, {})) as Result
    assert.equal(again.resultType, 'input_required', 'a retry without the answer is asked again')
    await assert.rejects(retry(alice, {}), /no longer held/)
  })

  test('an upstream request for an undeclared capability answers -32021 and cancels the call', async () => {
    let signal: AbortSignal | undefined
    const send: ModernCall['send'] = (p, o, s) => {
      signal = s
      return legacyEliciting()(p, o, s)
    }
    const reply = (await bridge().modernCall(call({ clientCapabilities: {}, send }))) as ErrorReply
    assert.equal(reply.code, -32021)
    assert.deepEqual(reply.data, { requiredCapabilities: { elicitation: {} } })
    assert.equal(signal?.aborted, true)
  })
})

describe('MRTR bridge, URL elicitation from a 2025-11-25 upstream', () => {
  test('-32042 becomes a URL-mode round, and the retry re-issues the call', async () => {
    let sends = 0
    const send: ModernCall['send'] = async () =>
      ++sends === 1
        ? {
            kind: 'error',
            id: 0,
            code: -32042,
            message: 'Sign in first',
            data: {
              elicitations: [
                {
                  mode: 'url',
                  elicitationId: 'e1',
                  url: 'https://auth.test/x',
                  message: 'Sign in',
                },
              ],
            },
          }
        : complete({ content: [{ type: 'text', text: 'signed in' }] })
    const caps = { elicitation: { url: {} } }
    const b = bridge()
    const first = (await b.modernCall(call({ send, clientCapabilities: caps }))) as Result
    assert.equal(first.resultType, 'input_required')
    assert.deepEqual(first.result.inputRequests, {
      'url-1': {
        method: 'elicitation/create',
        params: { mode: 'url', url: 'https://auth.test/x', message: 'Sign in' },
      },
    })
    const params = {
      name: 't',
      arguments: {},
      inputResponses: { 'url-1': { action: 'accept' } },
      requestState: first.result.requestState,
    }
    const done = (await b.modernCall(call({ send, clientCapabilities: caps, params }))) as Result
    assert.equal(done.resultType, 'complete')
    assert.equal(sends, 2)
  })

  test('a client without URL elicitation gets the error itself', async () => {
    const send: ModernCall['send'] = async () => ({
      kind: 'error',
      id: 0,
      code: -32042,
      message: 'Sign in first',
      data: { elicitations: [{ mode: 'url', url: 'https://auth.test/x', message: 'm' }] },
    })
    const reply = await bridge().modernCall(call({ send }))
    assert.equal(reply.kind, 'error')
  })
})

describe('MRTR bridge, 2026 client and 2026 upstream', () => {
  test("the upstream's requestState is wrapped, then unwrapped for the upstream on retry", async () => {
    const seen: (JsonObject | undefined)[] = []
    const send: ModernCall['send'] = async (params) => {
      seen.push(params)
      return params?.requestState === 'up-1'
        ? complete({ content: [] })
        : {
            kind: 'result',
            id: 0,
            resultType: 'input_required',
            result: {
              inputRequests: { k: { method: 'roots/list', params: {} } },
              requestState: 'up-1',
            },
          }
    }
    const b = bridge()
    const first = (await b.modernCall(call({ upstreamEra: 'modern', send }))) as Result
    assert.notEqual(first.result.requestState, 'up-1')
    const params = {
      name: 't',
      arguments: {},
      inputResponses: { k: { roots: [] } },
      requestState: first.result.requestState,
    }
    const done = (await b.modernCall(call({ upstreamEra: 'modern', send, params }))) as Result
    assert.equal(done.resultType, 'complete')
    assert.deepEqual(seen[1], {
      name: 't',
      arguments: {},
      inputResponses: { k: { roots: [] } },
      requestState: 'up-1',
    })
    await assert.rejects(
      b.modernCall(call({ upstreamEra: 'modern', send, upstream: 'other', params })),
      /another server/,
    )
  })
})

describe('MRTR bridge, legacy client and 2026 upstream', () => {
  test('each input request becomes a real request to the client, then the upstream is retried', async () => {
    const asked: string[] = []
    const client: ClientRequester = {
      requestClient: async (request) => {
        asked.push(request.method)
        return complete({ action: 'accept', content: { n: 'Ada' } })
      },
    }
    const retries: JsonObject[] = []
    const first: Result = {
      kind: 'result',
      id: 0,
      resultType: 'input_required',
      result: {
        inputRequests: { a: { method: 'elicitation/create', params: { message: 'x' } } },
        requestState: 's1',
      },
    }
    const reply = await bridge().legacyShim(
      first,
      { name: 't' },
      async (p) => {
        retries.push(p)
        return complete({ content: [] })
      },
      client,
      9,
    )
    assert.equal(reply.kind, 'result')
    assert.deepEqual(asked, ['elicitation/create'])
    assert.deepEqual(retries, [
      {
        name: 't',
        inputResponses: { a: { action: 'accept', content: { n: 'Ada' } } },
        requestState: 's1',
      },
    ])
  })

  test('a URL-mode elicitation gets the elicitationId a 2025-11-25 client needs', async () => {
    const seen: JsonObject[] = []
    const client: ClientRequester = {
      requestClient: async (request) => {
        seen.push(request.params ?? {})
        return complete({ action: 'accept' })
      },
    }
    const first: Result = {
      kind: 'result',
      id: 0,
      resultType: 'input_required',
      result: {
        inputRequests: {
          u: {
            method: 'elicitation/create',
            params: { mode: 'url', url: 'https://x.test', message: 'm' },
          },
        },
      },
    }
    await bridge().legacyShim(first, {}, async () => complete({}), client, 1)
    assert.equal(typeof seen[0]?.elicitationId, 'string')
  })

  test('gives up after a bounded number of rounds', async () => {
    const again: Result = {
      kind: 'result',
      id: 0,
      resultType: 'input_required',
      result: { requestState: 's' },
    }
    const client: ClientRequester = { requestClient: async () => complete({}) }
    const reply = (await bridge().legacyShim(again, {}, async () => again, client, 1)) as ErrorReply
    assert.equal(reply.kind, 'error')
    assert.match(reply.message, /after 8 rounds/)
  })
})

describe('MRTR bridge, cancellation', () => {
  test('a 2026 client that goes away before the first round cancels the held upstream call', async () => {
    const controller = new AbortController()
    let upstreamSignal: AbortSignal | undefined
    const send: ModernCall['send'] = (_p, _o, s) => {
      upstreamSignal = s
      return new Promise<Result>(() => {})
    }
    const pending = bridge().modernCall(call({ send, signal: controller.signal }))
    controller.abort()
    await assert.rejects(
      pending,
      (e: unknown) => e instanceof BarbicanError && e.code === 'ERR_CANCELLED',
    )
    assert.equal(upstreamSignal?.aborted, true)
  })
})
