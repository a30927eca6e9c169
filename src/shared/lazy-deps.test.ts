import { deepStrictEqual, strictEqual } from 'node:assert/strict'
import { describe, test } from 'node:test'
import { undici, wantsBaselineWasm } from './lazy-deps.ts'

describe('lazy dependencies', () => {
  test('WebAssembly is compiled by the baseline compiler unless the operator chose a tier', () => {
    strictEqual(wantsBaselineWasm([], undefined), true)
    strictEqual(wantsBaselineWasm(['--max-old-space-size=256'], '--enable-source-maps'), true)
    strictEqual(wantsBaselineWasm(['--no-liftoff'], undefined), false)
    strictEqual(wantsBaselineWasm([], '--enable-source-maps --wasm-tier-up'), false)
    strictEqual(wantsBaselineWasm(['--liftoff-only'], ''), false)
  })

  test('undici loads once and is the same module on every call', () => {
    const first = undici()
    strictEqual(undici(), first)
    deepStrictEqual(typeof first.request, 'function')
  })
})
