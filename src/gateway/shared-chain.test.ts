/**
 * Every stateless 2026-07-28 request is a client of its own; the policy chain is composed once
 * per policy generation for the whole gateway, not per request (ADR 135), and a reload still
 * takes effect for the next request while a request in flight ends on the generation it took
 * (ADR 037).
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { rules, serverPlan } from '../../test/support/plans.ts'
import { MODERN_META, StatelessEnd } from '../../test/support/stateless-end.ts'
import type { Policy } from '../policies/policy.ts'
import type { Client } from '../session/client.ts'
import { silentLogger } from '../telemetry/log.ts'
import { Gateway } from './gateway.ts'

/** A policy that records the chain each call ran on, and can hold one call until released. */
function recording(label: string, seen: string[], chains: Set<unknown>, hold?: Promise<void>) {
  const policy: Policy = {
    name: 'guards',
    async handle(call, next) {
      seen.push(label)
      chains.add((call.sender as Client).chain)
      if (hold) await hold
      return await next(call)
    },
  }
  return policy
}

test('stateless requests share one chain per generation; a reload applies to the next one', async () => {
  const seen: string[] = []
  const chains = new Set<unknown>()
  let release = () => {}
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  const gateway = new Gateway(
    {
      upstreams: [],
      servers: [serverPlan('default', [], rules('never'))],
      clientRequestTimeoutMs: 5_000,
      policies: [recording('first', seen, chains, held)],
    },
    silentLogger,
  )
  await gateway.start()
  let id = 0
  const list = () => {
    const end = new StatelessEnd()
    gateway.connect(end, { kind: 'streamable-http-stateless', server: 'default' })
    return end.request({
      jsonrpc: '2.0',
      id: ++id,
      method: 'tools/list',
      params: { _meta: MODERN_META },
    })
  }
  try {
    const inFlight = [list(), list(), list()]
    while (seen.length < 3) await new Promise((r) => setImmediate(r))
    assert.equal(chains.size, 1, 'three stateless requests, one chain')
    gateway.setPolicies([recording('second', seen, chains)])
    const after = await list()
    assert.ok('result' in after, JSON.stringify(after))
    release()
    for (const reply of await Promise.all(inFlight)) assert.ok('result' in reply)
    // The calls in flight ended on the generation they took; the one after the swap took the new.
    assert.deepEqual(seen, ['first', 'first', 'first', 'second'])
    assert.equal(chains.size, 1, 'the gateway keeps one chain across generations')
  } finally {
    await gateway.stop()
  }
})
