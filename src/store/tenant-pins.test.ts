import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { memoryStore } from './memory.ts'
import type { PinnedItem } from './store.ts'
import { tenantPins, tenantQualified } from './tenant-pins.ts'

const pin = (upstream: string, key: string): PinnedItem => ({
  upstream,
  key,
  kind: 'tool',
  name: key.slice(5),
  hash: 'h',
  definition: {},
  approvedAt: '2026-01-01T00:00:00Z',
  approvedBy: 'first-sight',
})

describe('tenantPins', () => {
  test("keeps each tenant's pins apart under qualified names", async () => {
    const store = memoryStore()
    const acme = tenantPins(store.pins, 'acme')
    const globex = tenantPins(store.pins, 'globex')
    await store.pins.pin(pin('main', 'tool:top'))
    await acme.pin(pin('main', 'tool:echo'))
    await globex.pin(pin('main', 'tool:sum'))
    assert.deepEqual(
      (await acme.pinned()).map((p) => [p.upstream, p.key]),
      [['main', 'tool:echo']],
    )
    assert.deepEqual(
      (await globex.pinned('main')).map((p) => p.key),
      ['tool:sum'],
    )
    assert.deepEqual((await store.pins.pinned()).map((p) => p.upstream).sort(), [
      'acme.main',
      'globex.main',
      'main',
    ])
    assert.equal(tenantQualified('acme', 'main'), 'acme.main')
    // Another tenant's qualified name means nothing inside a tenant.
    assert.deepEqual(await globex.pinned('acme.main'), [])
    await acme.unpin('main', 'tool:echo')
    assert.deepEqual(await acme.pinned(), [])
    assert.equal((await globex.pinned()).length, 1)
  })

  test('keeps pending changes and history per tenant too', async () => {
    const store = memoryStore()
    const acme = tenantPins(store.pins, 'acme')
    await acme.propose({
      ...pin('main', 'tool:echo'),
      previousHash: null,
      reason: 'new',
      findings: [],
      status: 'pending',
      seenAt: '2026-01-01T00:00:00Z',
    })
    await acme.record({
      upstream: 'main',
      key: 'tool:echo',
      action: 'new',
      hash: 'h',
      previousHash: null,
      actor: 'x',
      at: '2026-01-01T00:00:00Z',
    })
    assert.equal((await acme.pending()).length, 1)
    assert.deepEqual(await tenantPins(store.pins, 'globex').pending(), [])
    assert.equal((await acme.history({ upstream: 'main' }))[0]?.upstream, 'main')
    assert.equal((await store.pins.history())[0]?.upstream, 'acme.main')
    await acme.dismiss('main', 'tool:echo')
    assert.deepEqual(await acme.pending(), [])
  })
})
