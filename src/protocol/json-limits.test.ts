import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { DEFAULT_JSON_LIMITS, type JsonLimits, scanJson } from './json-limits.ts'

const LIMITS: JsonLimits = {
  maxMessageBytes: 1 << 20,
  maxDepth: 4,
  maxStringLength: 8,
  maxArrayLength: 3,
  maxObjectKeys: 3,
}

const wide: JsonLimits = { ...DEFAULT_JSON_LIMITS }

function scan(text: string, limits: JsonLimits = LIMITS) {
  return scanJson(text, limits)
}

describe('scanJson limits', () => {
  test('accepts text exactly at every limit', () => {
    assert.equal(scan('{"a":{"b":{"c":[1]}}}'), undefined) // depth 4
    assert.equal(scan('{"k":"12345678"}'), undefined) // 8-character string
    assert.equal(scan('{"12345678":1}'), undefined) // 8-character key
    assert.equal(scan('[1,2,3]'), undefined)
    assert.equal(scan('{"a":1,"b":2,"c":3}'), undefined)
    assert.equal(scan('[]'), undefined)
    assert.equal(scan('{}'), undefined)
  })

  test('refuses nesting one level deeper than the limit', () => {
    assert.deepEqual(scan('{"a":{"b":{"c":[[1]]}}}'), { kind: 'depth', limit: 4 })
    assert.deepEqual(scan('[[[[[]]]]]'), { kind: 'depth', limit: 4 })
  })

  test('refuses a value or a key one character longer than the limit', () => {
    assert.deepEqual(scan('{"k":"123456789"}'), { kind: 'string-length', limit: 8 })
    assert.deepEqual(scan('{"123456789":1}'), { kind: 'string-length', limit: 8 })
    assert.deepEqual(scan('["123456789"]'), { kind: 'string-length', limit: 8 })
  })

  test('counts array elements of every kind, with or without whitespace', () => {
    assert.deepEqual(scan('[1,2,3,4]'), { kind: 'array-length', limit: 3 })
    assert.deepEqual(scan('[ "a" , "b" , "c" , "d" ]'), { kind: 'array-length', limit: 3 })
    assert.deepEqual(scan('[{},[],null,true]'), { kind: 'array-length', limit: 3 })
    assert.equal(scan('[ {} , [] , null ]'), undefined)
    assert.equal(scan('[\n"a",\n"b",\n"c"\n]'), undefined)
  })

  test('refuses an object with one key more than the limit', () => {
    assert.deepEqual(scan('{"a":1,"b":2,"c":3,"d":4}'), { kind: 'object-keys', limit: 3 })
    assert.deepEqual(scan('{"x":{"a":1,"b":2,"c":3,"d":4}}'), { kind: 'object-keys', limit: 3 })
  })

  test('is not confused by quotes, backslashes, brackets and commas inside strings', () => {
    const tricky = {
      a: 'x"}]{[,:"',
      b: '\\',
      c: '\\"',
    }
    const text = JSON.stringify({ p: { q: tricky } })
    // Strings may be long here, only the structure is limited.
    const limits = { ...LIMITS, maxStringLength: 100 }
    assert.equal(scan(text, limits), undefined)
    // A string full of brackets adds no depth and no array elements.
    assert.equal(scan('{"a":"[[[[[[,,,,,{{{{"}', limits), undefined)
    // After a string ending in an escaped backslash the scanner still sees the next key.
    assert.deepEqual(scan('{"a":"\\\\","a":1}', limits), {
      kind: 'duplicate-key',
      key: 'a',
      path: '',
    })
    // An escaped quote does not end the key: "a\"b" and "a" are different keys.
    assert.equal(scan('{"a\\"b":1,"a":2}', limits), undefined)
  })

  test('leaves syntax errors to JSON.parse', () => {
    assert.equal(scan('{"a":"unterminated'), undefined)
    assert.equal(scan('{"\\x":1,"\\x":2}'), undefined) // bad escape: JSON.parse rejects it
    assert.equal(scan(']]]}}'), undefined)
  })
})

describe('scanJson keys', () => {
  test('refuses duplicate keys in the envelope and reports them as such', () => {
    assert.deepEqual(scan('{"id":1,"id":2}', wide), { kind: 'duplicate-key', key: 'id', path: '' })
  })

  test('refuses duplicate keys at any depth', () => {
    const text = '{"params":{"arguments":{"cmd":"ls","cmd":"rm -rf /"}}}'
    assert.deepEqual(scan(text, wide), { kind: 'duplicate-key', key: 'cmd', path: '(nested)' })
  })

  test('allows the same key in sibling objects and at different depths', () => {
    assert.equal(scan('{"a":{"b":1},"b":{"a":{"b":2}},"c":[{"a":1},{"a":2}]}', wide), undefined)
  })

  test('decodes escapes before comparing keys', () => {
    assert.deepEqual(scan('{"method":"a","\\u006dethod":"b"}', wide), {
      kind: 'duplicate-key',
      key: 'method',
      path: '',
    })
    assert.deepEqual(scan('{"p":{"\\u006eame":1,"name":2}}', wide), {
      kind: 'duplicate-key',
      key: 'name',
      path: '(nested)',
    })
    assert.deepEqual(scan('{"p":{"a\\/b":1,"a/b":2}}', wide)?.kind, 'duplicate-key')
  })

  test('finds duplicates in objects too large for the linear check', () => {
    const keys = Array.from({ length: 40 }, (_, i) => `"k${i}":${i}`)
    assert.equal(scan(`{"p":{${keys.join(',')}}}`, wide), undefined)
    assert.deepEqual(scan(`{"p":{${keys.join(',')},"k0":0}}`, wide), {
      kind: 'duplicate-key',
      key: 'k0',
      path: '(nested)',
    })
    assert.deepEqual(scan(`{"p":{${keys.join(',')},"k\\u0033":0}}`, wide)?.kind, 'duplicate-key')
  })

  test('refuses keys differing only by case in the envelope', () => {
    assert.deepEqual(scan('{"method":"a","Method":"b"}', wide), {
      kind: 'case-variant-key',
      key: 'Method',
      other: 'method',
    })
    assert.deepEqual(scan('{"ID":1,"id":2}', wide), {
      kind: 'case-variant-key',
      key: 'id',
      other: 'ID',
    })
  })

  test('checks each element of a batch as an envelope', () => {
    assert.deepEqual(scan('[{"id":1},{"method":"a","METHOD":"b"}]', wide)?.kind, 'case-variant-key')
    assert.deepEqual(scan('[{"id":1,"id":2}]', wide), {
      kind: 'duplicate-key',
      key: 'id',
      path: '',
    })
    // Elements are separate envelopes: each may carry its own "id".
    assert.equal(scan('[{"id":1},{"id":2}]', wide), undefined)
  })

  test('allows keys differing only by case inside payloads', () => {
    assert.equal(scan('{"params":{"Name":1,"name":2,"arguments":{"A":1,"a":2}}}', wide), undefined)
  })

  test('quotes at most a short prefix of a huge duplicate key', () => {
    const key = 'k'.repeat(10_000)
    const violation = scan(`{"p":{"${key}":1,"${key}":2}}`, wide)
    assert.equal(violation?.kind, 'duplicate-key')
    assert.ok(violation?.kind === 'duplicate-key' && violation.key.length < 100)
  })

  test('keeps no state from one scan to the next', () => {
    assert.equal(scan('{"a":{"b":1,"b":2}}', wide)?.kind, 'duplicate-key')
    assert.equal(scan('{"b":1}', wide), undefined)
    assert.equal(scan('{"a":{"b":1,"c":{"d":[1,2,3]}}}', wide), undefined)
    const many = Array.from({ length: 5000 }, (_, i) => `"k${i}":1`).join(',')
    assert.equal(scan(`{"p":{${many}}}`, wide), undefined)
    assert.equal(scan('{"k1":1}', wide), undefined)
  })

  test('checks an envelope with thousands of keys in linear time', () => {
    const many = Array.from({ length: 10_000 }, (_, i) => `"key${i}":1`).join(',')
    const started = performance.now()
    assert.equal(scan(`{${many}}`, wide), undefined)
    // A quadratic case-variant check takes seconds here; linear takes a few milliseconds.
    assert.ok(performance.now() - started < 500, 'scan took too long')
  })
})
