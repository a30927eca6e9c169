import assert from 'node:assert/strict'
import { after, before, describe, it } from 'node:test'
import { freshRedisPrefix, REDIS_URL } from '../../test/support/backends.ts'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import { RequestStateSealer } from '../bridge/request-state.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { openRedis, type RedisClient } from '../store/redis.ts'
import { silentLogger } from '../telemetry/log.ts'
import { type AnswerLedger, MemoryAnswerLedger, RedisAnswerLedger } from './answer-ledger.ts'
import { CONFIRM_INPUT, confirmPolicy } from './confirm.ts'
import type { Call, PolicyDecision } from './policy.ts'

const clients: RedisClient[] = []
const prefixes: string[] = []
before(async () => {
  // Two connections: two replicas of one fleet.
  clients.push(await openRedis(REDIS_URL), await openRedis(REDIS_URL))
})
after(async () => {
  for (const prefix of prefixes) {
    const keys = await clients[0]!.keys(`${prefix}*`)
    if (keys.length > 0) await clients[0]!.del(keys)
  }
  for (const c of clients) c.destroy()
})

function replicas(): [AnswerLedger, AnswerLedger] {
  const prefix = freshRedisPrefix()
  prefixes.push(prefix)
  return [new RedisAnswerLedger(clients[0]!, prefix), new RedisAnswerLedger(clients[1]!, prefix)]
}

function deleteCall(params: JsonObject = {}): Call {
  return {
    ...callOf('tools/call', { name: 'mail__delete', arguments: { id: 7 }, ...params }),
    route: { kind: 'unicast', upstream: 'mail', original: 'delete' },
    peer: {
      era: 'modern',
      capabilities: { elicitation: {} },
      sessionId: undefined,
      ask: () => Promise.reject(new Error('never asked')),
    },
    decisions: [] as PolicyDecision[],
    log: silentLogger,
  }
}

describe('answer ledger', () => {
  it('memory: a nonce is claimed once, and forgotten once expired', async () => {
    const ledger = new MemoryAnswerLedger()
    assert.equal(await ledger.claim('a', Date.now() + 1000), true)
    assert.equal(await ledger.claim('a', Date.now() + 1000), false)
    assert.equal(await ledger.claim('b', Date.now() - 1), true)
    assert.equal(await ledger.claim('b', Date.now() + 1000), true, 'an expired claim is gone')
  })

  it('redis: a nonce claimed on one replica is refused on the other', async () => {
    const [a, b] = replicas()
    const exp = Date.now() + 5000
    assert.equal(await a.claim('n1', exp), true)
    assert.equal(await b.claim('n1', exp), false)
    assert.equal(await a.claim('n1', exp), false)
    assert.equal(await b.claim('n2', exp), true)
  })

  it('redis: concurrent claims of one nonce on several replicas: exactly one wins', async () => {
    const [a, b] = replicas()
    const exp = Date.now() + 5000
    const wins = await Promise.all([a, b, a, b].map((l) => l.claim('race', exp)))
    assert.equal(wins.filter(Boolean).length, 1)
  })

  it('a confirmation answer accepted on replica A is refused when replayed to replica B', async () => {
    const [ledgerA, ledgerB] = replicas()
    // Every replica seals with the fleet's one key (ADR 059).
    const sealer = new RequestStateSealer(Buffer.alloc(32, 7))
    const rule = { tools: ['*__delete'] }
    const a = confirmPolicy({ rule, answerMs: 5000, sealer, ledger: ledgerA })
    const b = confirmPolicy({ rule, answerMs: 5000, sealer, ledger: ledgerB })
    const { relay, calls } = countingRelay()
    const question = await a.handle(deleteCall(), relay)
    const requestState = question.kind === 'result' ? question.result.requestState : undefined
    assert.equal(typeof requestState, 'string')
    const answer = { requestState, inputResponses: { [CONFIRM_INPUT]: { action: 'accept' } } }
    const done = await a.handle(deleteCall(answer), relay)
    assert.equal(done.kind, 'result')
    assert.equal(calls.length, 1)
    await assert.rejects(b.handle(deleteCall(answer), relay), {
      code: 'ERR_INVALID_PARAMS',
      message: /already answered/,
    })
    assert.equal(calls.length, 1, 'the replayed accept never reaches the upstream')
  })

  it('redis unreachable: the answer is refused, never taken (fail closed)', async () => {
    const dead = await openRedis(REDIS_URL)
    dead.destroy()
    const ledger = new RedisAnswerLedger(dead, freshRedisPrefix())
    await assert.rejects(ledger.claim('n', Date.now() + 1000), { code: 'ERR_STORE_UNAVAILABLE' })
  })
})
