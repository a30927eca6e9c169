import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import { rateCounterStoreContract } from '../../test/contracts/rate-counter-store.ts'
import { MemoryRateCounterStore } from './rate-counter-store.ts'

rateCounterStoreContract('memory', () => new MemoryRateCounterStore())

describe('MemoryRateCounterStore', () => {
  it('forgets keys that are back to full, so memory stays bounded', async () => {
    const store = new MemoryRateCounterStore()
    const rule = { algorithm: 'token-bucket', limit: 5, windowMs: 1000 } as const
    for (let i = 0; i < 100; i++) await store.take(`k${i}`, rule, 0)
    assert.equal(store.size, 100)
    await store.take('later', rule, 120_000)
    assert.equal(store.size, 1)
  })
})
