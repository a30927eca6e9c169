import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { canonicalHash, canonicalJson } from './canonical.ts'
import { diffDefinitions, formatChanges, summarizeChanges } from './diff.ts'

describe('canonical JSON', () => {
  test('sorts keys at every depth and drops undefined members, so key order never changes a hash', () => {
    const a = { b: 1, a: { y: [1, { d: 2, c: 3 }], x: 'é' }, u: undefined }
    const b = { a: { x: 'é', y: [1, { c: 3, d: 2 }] }, b: 1 }
    assert.equal(canonicalJson(a), '{"a":{"x":"é","y":[1,{"c":3,"d":2}]},"b":1}')
    assert.equal(canonicalHash(a), canonicalHash(b))
  })

  test('sorts keys by UTF-16 code units (a surrogate pair before U+FB01) and writes numbers as ECMAScript does', () => {
    assert.equal(
      canonicalJson({ '\u{1f600}': 1, '\ufb01': 2, a: 1e21, b: -0 }),
      '{"a":1e+21,"b":0,"😀":1,"ﬁ":2}',
    )
  })

  test('any change of meaning changes the hash', () => {
    const tool = { name: 't', annotations: { destructiveHint: false } }
    assert.notEqual(
      canonicalHash(tool),
      canonicalHash({ name: 't', annotations: { destructiveHint: true } }),
    )
    assert.match(canonicalHash(tool), /^[0-9a-f]{64}$/)
  })
})

describe('readable diffs', () => {
  test('names each changed field with its old and new value, absent fields included', () => {
    const changes = diffDefinitions(
      { name: 't', description: 'old', inputSchema: { properties: { a: { type: 'string' } } } },
      {
        name: 't',
        description: 'new',
        inputSchema: { properties: { a: { type: 'number' } } },
        icons: [{ src: 'x' }],
      },
    )
    assert.deepEqual(formatChanges(changes), [
      'description: "old" → "new"',
      'icons: (absent) → [{"src":"x"}]',
      'inputSchema.properties.a.type: "string" → "number"',
    ])
    assert.equal(
      summarizeChanges(changes),
      'description, icons, inputSchema.properties.a.type changed',
    )
  })

  test('shows invisible characters escaped', () => {
    const [line] = formatChanges(diffDefinitions({ d: 'a' }, { d: 'a\u200b\u{e0041}' }))
    assert.equal(line, 'd: "a" → "a\\u{200b}\\u{e0041}"')
  })
})

test('a definition never approved is listed field by field as additions', () => {
  assert.deepEqual(formatChanges(diffDefinitions(undefined, { name: 'n', description: 'd' })), [
    'description: (absent) → "d"',
    'name: (absent) → "n"',
  ])
})
