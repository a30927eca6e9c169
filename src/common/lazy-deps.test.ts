import { deepStrictEqual, strictEqual } from 'node:assert/strict'
import { describe, test } from 'node:test'
import { undici } from './lazy-deps.ts'

describe('lazy dependencies', () => {
  test('undici loads once and is the same module on every call', () => {
    const first = undici()
    strictEqual(undici(), first)
    deepStrictEqual(typeof first.request, 'function')
  })
})
