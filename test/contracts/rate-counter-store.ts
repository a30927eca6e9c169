/**
 * The behaviour every RateCounterStore must show, as a suite to run against each implementation
 * (memory in src/policies/rate-counter-store.test.ts; a shared store adds its own run). Time is passed in, so
 * the suite never sleeps.
 */
import assert from 'node:assert/strict'
import { describe, it } from 'node:test'
import type { RateCounterStore, RateRule } from '../../src/policies/rate-counter-store.ts'

const T0 = 1_000_000

export function rateCounterStoreContract(name: string, make: () => RateCounterStore): void {
  describe(`RateCounterStore contract: ${name}`, () => {
    for (const algorithm of ['token-bucket', 'fixed-window'] as const) {
      const rule: RateRule = { algorithm, limit: 3, windowMs: 1000 }

      it(`${algorithm}: allows limit calls, then refuses with a retry-after`, async () => {
        const store = make()
        for (let i = 0; i < 3; i++) {
          const d = await store.take('k', rule, T0)
          assert.equal(d.allowed, true)
        }
        const refused = await store.take('k', rule, T0)
        assert.equal(refused.allowed, false)
        assert.ok(!refused.allowed && refused.retryAfterMs > 0 && refused.retryAfterMs <= 1000)
      })

      it(`${algorithm}: a refused call does not count; the limit resets with time`, async () => {
        const store = make()
        for (let i = 0; i < 4; i++) await store.take('k', rule, T0)
        const refused = await store.take('k', rule, T0 + 10)
        assert.ok(!refused.allowed)
        const later = await store.take('k', rule, T0 + 10 + refused.retryAfterMs)
        assert.equal(later.allowed, true)
        const full = make()
        for (let i = 0; i < 3; i++) await full.take('k', rule, T0)
        for (let i = 0; i < 3; i++) {
          assert.equal((await full.take('k', rule, T0 + 1000)).allowed, true)
        }
      })

      it(`${algorithm}: a changed limit keeps the calls counted (a reload)`, async () => {
        const store = make()
        const five: RateRule = { algorithm, limit: 5, windowMs: 60_000 }
        for (let i = 0; i < 3; i++) assert.equal((await store.take('k', five, T0)).allowed, true)
        // Lowered to 3: the 3 calls taken use it up.
        const three: RateRule = { algorithm, limit: 3, windowMs: 60_000 }
        assert.equal((await store.take('k', three, T0)).allowed, false)
        // Raised to 6: 3 more at once, then refused.
        const six: RateRule = { algorithm, limit: 6, windowMs: 60_000 }
        for (let i = 0; i < 3; i++) assert.equal((await store.take('k', six, T0)).allowed, true)
        assert.equal((await store.take('k', six, T0)).allowed, false)
      })

      it(`${algorithm}: keys count apart`, async () => {
        const store = make()
        for (let i = 0; i < 3; i++) await store.take('a', rule, T0)
        assert.equal((await store.take('a', rule, T0)).allowed, false)
        assert.equal((await store.take('b', rule, T0)).allowed, true)
      })
    }

    it('token-bucket refills evenly: one call back after windowMs/limit', async () => {
      const store = make()
      const rule: RateRule = { algorithm: 'token-bucket', limit: 10, windowMs: 1000 }
      for (let i = 0; i < 10; i++) await store.take('k', rule, T0)
      assert.equal((await store.take('k', rule, T0 + 50)).allowed, false)
      assert.equal((await store.take('k', rule, T0 + 100)).allowed, true)
      assert.equal((await store.take('k', rule, T0 + 100)).allowed, false)
    })

    it('takeAll takes in order and stops at the first refusal; later limits do not count', async () => {
      const store = make()
      const one: RateRule = { algorithm: 'fixed-window', limit: 1, windowMs: 1000 }
      const two: RateRule = { algorithm: 'token-bucket', limit: 2, windowMs: 1000 }
      const first = await store.takeAll(
        [
          { key: 'a', rule: two },
          { key: 'b', rule: one },
          { key: 'c', rule: two },
        ],
        T0,
      )
      assert.deepEqual(first, [
        { allowed: true, remaining: 1 },
        { allowed: true, remaining: 0 },
        { allowed: true, remaining: 1 },
      ])
      const second = await store.takeAll(
        [
          { key: 'a', rule: two },
          { key: 'b', rule: one },
          { key: 'c', rule: two },
        ],
        T0,
      )
      assert.deepEqual(second, [
        { allowed: true, remaining: 0 },
        { allowed: false, retryAfterMs: 1000 },
      ])
      assert.deepEqual(await store.take('c', two, T0), { allowed: true, remaining: 0 })
      assert.deepEqual(await store.takeAll([], T0), [])
    })

    it('fixed-window refuses until the window ends, then allows the full limit', async () => {
      const store = make()
      const rule: RateRule = { algorithm: 'fixed-window', limit: 2, windowMs: 1000 }
      await store.take('k', rule, T0)
      await store.take('k', rule, T0 + 500)
      const refused = await store.take('k', rule, T0 + 900)
      assert.deepEqual(refused, { allowed: false, retryAfterMs: 100 })
      assert.equal((await store.take('k', rule, T0 + 1000)).allowed, true)
      assert.equal((await store.take('k', rule, T0 + 1000)).allowed, true)
    })
  })
}
