/**
 * The one test suite every store backend must pass, so a new backend (PostgreSQL) is done when
 * this suite runs green against it. Call it from the backend's own test file.
 */
import assert from 'node:assert/strict'
import { test } from 'node:test'
import type {
  ItemDefinition,
  PendingChange,
  PinKind,
  PinnedItem,
  Store,
} from '../../src/store/store.ts'

const AT = '2026-01-01T00:00:00.000Z'

/** The item `key` (`kind:name`) of `upstream`, with a definition that nests JSON of every kind. */
function item(upstream: string, key: string, hash: string): ItemDefinition {
  const [kind, name] = key.split(':') as [PinKind, string]
  return {
    upstream,
    key,
    kind,
    name,
    hash,
    definition: { name, description: `d-${hash}`, nested: { a: [1, 'two', null] } },
  }
}

function pinned(upstream: string, key: string, hash: string): PinnedItem {
  return { ...item(upstream, key, hash), approvedAt: AT, approvedBy: 'first-sight' }
}

function pending(upstream: string, key: string, hash: string): PendingChange {
  const base = item(upstream, key, hash)
  return {
    ...base,
    definition: { name: base.name },
    previousHash: 'old',
    reason: 'changed',
    findings: [{ rule: 'hidden-unicode', severity: 'high' }],
    status: 'pending',
    seenAt: AT,
  }
}

/** Runs the contract against fresh stores made by `open` (each test gets its own). */
export function storeContract(backend: string, open: () => Promise<Store>): void {
  const withStore = (name: string, body: (store: Store) => Promise<void>) =>
    test(`${backend}: ${name}`, async () => {
      const store = await open()
      try {
        await body(store)
      } finally {
        await store.close()
      }
    })

  withStore(
    'returns what was pinned, sorted by upstream then key, definitions intact',
    async (s) => {
      await s.pins.pin(pinned('b', 'tool:z', 'h1'))
      await s.pins.pin(pinned('a', 'tool:y', 'h2'))
      await s.pins.pin(pinned('a', 'prompt:x', 'h3'))
      const all = await s.pins.pinned()
      assert.deepEqual(
        all.map((p) => `${p.upstream}/${p.key}`),
        ['a/prompt:x', 'a/tool:y', 'b/tool:z'],
      )
      assert.deepEqual(all[1], pinned('a', 'tool:y', 'h2'))
      assert.deepEqual(
        (await s.pins.pinned('b')).map((p) => p.key),
        ['tool:z'],
      )
    },
  )

  withStore('replaces a pin of the same key and removes it on unpin', async (s) => {
    await s.pins.pin(pinned('a', 'tool:y', 'h1'))
    await s.pins.pin(pinned('a', 'tool:y', 'h2'))
    assert.deepEqual(
      (await s.pins.pinned('a')).map((p) => p.hash),
      ['h2'],
    )
    await s.pins.unpin('a', 'tool:y')
    assert.deepEqual(await s.pins.pinned('a'), [])
  })

  withStore('keeps one pending change per key, with findings, until dismissed', async (s) => {
    await s.pins.propose(pending('a', 'tool:y', 'h1'))
    await s.pins.propose({ ...pending('a', 'tool:y', 'h2'), status: 'rejected', decidedBy: 'op' })
    const [only, ...rest] = await s.pins.pending('a')
    assert.equal(rest.length, 0)
    assert.equal(only?.hash, 'h2')
    assert.equal(only?.status, 'rejected')
    assert.equal(only?.decidedBy, 'op')
    assert.deepEqual(only?.findings, [{ rule: 'hidden-unicode', severity: 'high' }])
    await s.pins.dismiss('a', 'tool:y')
    assert.deepEqual(await s.pins.pending(), [])
  })

  withStore('keeps the history in order and filters it by upstream and key', async (s) => {
    const event = (key: string, action: 'trusted' | 'changed', hash: string) => ({
      upstream: 'a',
      key,
      action,
      hash,
      previousHash: null,
      actor: 'first-sight',
      at: AT,
    })
    await s.pins.record(event('tool:y', 'trusted', 'h1'))
    await s.pins.record(event('tool:z', 'trusted', 'h2'))
    await s.pins.record(event('tool:y', 'changed', 'h3'))
    assert.deepEqual(
      (await s.pins.history({ upstream: 'a', key: 'tool:y' })).map((e) => e.hash),
      ['h1', 'h3'],
    )
    assert.equal((await s.pins.history()).length, 3)
    assert.deepEqual(await s.pins.history({ upstream: 'other' }), [])
  })

  withStore('changes its revision on every write to pins or pending changes', async (s) => {
    const r0 = await s.pins.revision()
    await s.pins.pin(pinned('a', 'tool:y', 'h1'))
    const r1 = await s.pins.revision()
    assert.notEqual(r1, r0)
    await s.pins.propose(pending('a', 'tool:y', 'h2'))
    const r2 = await s.pins.revision()
    assert.notEqual(r2, r1)
    await s.pins.dismiss('a', 'tool:y')
    assert.notEqual(await s.pins.revision(), r2)
  })

  withStore('counts the writes made through it, without reading the storage', async (s) => {
    const w0 = s.pins.localWrites()
    await s.pins.pin(pinned('a', 'tool:y', 'h1'))
    const w1 = s.pins.localWrites()
    assert.notEqual(w1, w0)
    await s.pins.propose(pending('a', 'tool:y', 'h2'))
    const w2 = s.pins.localWrites()
    assert.notEqual(w2, w1)
    await s.pins.dismiss('a', 'tool:y')
    const w3 = s.pins.localWrites()
    assert.notEqual(w3, w2)
    await s.pins.unpin('a', 'tool:y')
    assert.notEqual(s.pins.localWrites(), w3)
  })

  withStore('stores baselines by name and replaces them', async (s) => {
    assert.equal(await s.baselines.get('config'), undefined)
    const base = {
      name: 'config',
      hash: 'h',
      document: { upstreams: { a: { command: 'node' } } },
      approvedAt: AT,
      approvedBy: 'op',
    }
    await s.baselines.put(base)
    assert.deepEqual(await s.baselines.get('config'), base)
    await s.baselines.put({ ...base, hash: 'h2' })
    assert.equal((await s.baselines.get('config'))?.hash, 'h2')
  })
}
