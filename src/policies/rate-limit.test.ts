import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { callOf, countingRelay } from '../../test/support/calls.ts'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError, jsonRpcCodeOf } from '../common/errors.ts'
import type { RateLimitConfig } from '../config/config.ts'
import { compose } from './chain.ts'
import type { Call } from './policy.ts'
import { MemoryRateCounterStore } from './rate-counter-store.ts'
import { rateLimit } from './rate-limit.ts'

const base = {
  algorithm: 'fixed-window',
  limit: 1,
  windowMs: 60_000,
  methods: ['tools/call'],
} as const

const who = (subject: string, tenant?: string): Identity =>
  ({ subject, scopes: [], ...(tenant ? { tenant } : {}) }) as unknown as Identity

function toolCall(tool: string, identity: Identity, upstream = 'files', server = 'default'): Call {
  return callOf(
    'tools/call',
    { name: tool },
    { identity, server, route: { kind: 'unicast', upstream, original: tool } },
  )
}

/** Runs `calls` through a chain with `limits`; true for each call that passed. */
async function outcomes(limits: RateLimitConfig[], calls: Call[]): Promise<boolean[]> {
  const { relay } = countingRelay()
  const chain = compose([rateLimit(limits, new MemoryRateCounterStore(), () => 0)], relay)
  const passed: boolean[] = []
  for (const call of calls) {
    try {
      await chain(call)
      passed.push(true)
    } catch (err) {
      assert.ok(err instanceof BarbicanError && err.code === 'ERR_RATE_LIMITED', String(err))
      passed.push(false)
    }
  }
  return passed
}

describe('rate-limit policy', () => {
  test('counts per subject: one subject over its quota does not stop another', async () => {
    const limits = [{ ...base, name: 'u', per: ['subject'] as const }]
    const a = who('alice')
    const b = who('bob')
    assert.deepEqual(
      await outcomes(limits, [toolCall('x', a), toolCall('y', a), toolCall('x', b)]),
      [true, false, true],
    )
  })

  test('counts per tenant, upstream and tool', async () => {
    const tenant = [{ ...base, name: 't', per: ['tenant'] as const }]
    assert.deepEqual(
      await outcomes(tenant, [
        toolCall('x', who('a', 'acme')),
        toolCall('x', who('b', 'acme')),
        toolCall('x', who('c', 'other')),
      ]),
      [true, false, true],
    )
    const upstream = [{ ...base, name: 'up', per: ['upstream'] as const }]
    assert.deepEqual(
      await outcomes(upstream, [
        toolCall('x', who('a'), 'files'),
        toolCall('y', who('b'), 'files'),
        toolCall('x', who('a'), 'mail'),
      ]),
      [true, false, true],
    )
    const tool = [{ ...base, name: 'tool', per: ['subject', 'tool'] as const }]
    assert.deepEqual(
      await outcomes(tool, [
        toolCall('x', who('a')),
        toolCall('y', who('a')),
        toolCall('x', who('a')),
      ]),
      [true, true, false],
    )
  })

  test('counts only the methods, servers, upstreams and tools it names', async () => {
    const limits = [
      { ...base, name: 'writes', per: [] as const, tools: ['write_*'], upstreams: ['files'] },
    ]
    const a = who('a')
    assert.deepEqual(
      await outcomes(limits, [
        toolCall('write_file', a),
        toolCall('read_file', a),
        toolCall('write_file', a, 'mail'),
        callOf('tools/list', {}, { identity: a }),
        toolCall('write_note', a),
      ]),
      [true, true, true, true, false],
    )
    const onServer = [{ ...base, name: 's', per: [] as const, servers: ['team-*'] }]
    assert.deepEqual(
      await outcomes(onServer, [
        toolCall('x', a, 'files', 'team-a'),
        toolCall('x', a, 'files', 'default'),
        toolCall('x', a, 'files', 'default'),
        toolCall('x', a, 'files', 'team-a'),
      ]),
      [true, true, true, false],
    )
  })

  test('a refusal carries the limit and the retry-after, and a JSON-RPC code of its own', async () => {
    let now = 0
    const policy = rateLimit(
      [{ ...base, name: 'slow', per: [], limit: 1, windowMs: 2500 }],
      new MemoryRateCounterStore(),
      () => now,
    )
    const chain = compose([policy], countingRelay().relay)
    await chain(toolCall('x', who('a')))
    now = 1000
    const refused = { ...toolCall('x', who('a')), decisions: [] }
    await assert.rejects(chain(refused), (err: BarbicanError) => {
      assert.equal(err.code, 'ERR_RATE_LIMITED')
      assert.deepEqual(err.data, { limit: 'slow', retryAfterMs: 1500, retryAfterSeconds: 2 })
      assert.match(err.message, /Rate limit "slow" exceeded; retry after 2s/)
      return true
    })
    assert.deepEqual(refused.decisions, [
      { policy: 'rate-limit', effect: 'deny', rule: 'rateLimits.slow' },
    ])
    assert.equal(jsonRpcCodeOf('ERR_RATE_LIMITED'), -32029)
    now = 2500
    await chain(toolCall('x', who('a')))
  })
})

describe('rate-limit policy and its store', () => {
  test('takes every quota of a call in one store request; calls no quota covers make none', async () => {
    const inner = new MemoryRateCounterStore()
    const requests: string[][] = []
    const store = {
      take: inner.take.bind(inner),
      takeAll: (entries: Parameters<typeof inner.takeAll>[0], now: number) => {
        requests.push(entries.map((e) => (e.rule as RateLimitConfig).name))
        return inner.takeAll(entries, now)
      },
    }
    const limits: RateLimitConfig[] = [
      { ...base, limit: 5, name: 'per-user', per: ['subject'] },
      { ...base, limit: 1, name: 'per-tool', per: ['tool'], tools: ['x'] },
    ]
    const { relay } = countingRelay()
    const chain = compose([rateLimit(limits, store, () => 0)], relay)
    await chain(toolCall('x', who('a')))
    await assert.rejects(chain(toolCall('x', who('a'))), /Rate limit "per-tool" exceeded/)
    await chain(callOf('tools/list', {}, { identity: who('a') }))
    assert.deepEqual(requests, [
      ['per-user', 'per-tool'],
      ['per-user', 'per-tool'],
    ])
  })
})
