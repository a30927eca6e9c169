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

  test('finds case variants however the envelope keys are written', () => {
    // Non-ASCII: the Kelvin sign lower-cases to an ASCII "k".
    assert.deepEqual(scan('{"key":1,"\u212Aey":2}', wide), {
      kind: 'case-variant-key',
      key: '\u212Aey',
      other: 'key',
    })
    assert.deepEqual(scan('{"\u212Aey":1,"KEY":2}', wide), {
      kind: 'case-variant-key',
      key: 'KEY',
      other: '\u212Aey',
    })
    // An escape after plain keys, and plain keys after an escape.
    assert.deepEqual(scan('{"jsonrpc":"2.0","method":"a","\\u004dethod":"b"}', wide), {
      kind: 'case-variant-key',
      key: 'Method',
      other: 'method',
    })
    assert.deepEqual(scan('{"\\u006dethod":"a","id":1,"METHOD":"b"}', wide), {
      kind: 'case-variant-key',
      key: 'METHOD',
      other: 'method',
    })
    // Past the in-place mode's key count.
    const keys = Array.from({ length: 20 }, (_, i) => `"k${i}":${i}`).join(',')
    assert.equal(scan(`{${keys}}`, wide), undefined)
    assert.deepEqual(scan(`{${keys},"K3":0}`, wide), {
      kind: 'case-variant-key',
      key: 'K3',
      other: 'k3',
    })
    assert.deepEqual(scan(`{"Id":0,${keys},"iD":0}`, wide), {
      kind: 'case-variant-key',
      key: 'iD',
      other: 'Id',
    })
    // A duplicate is reported as such, before any case variant.
    assert.deepEqual(scan('{"id":1,"method":"a","id":2}', wide), {
      kind: 'duplicate-key',
      key: 'id',
      path: '',
    })
  })

  test('reports what lower-casing every decoded key would (random envelopes)', () => {
    // Units whose case folding differs between ASCII and Unicode, written plain or escaped.
    const units = ['a', 'A', 'k', 'K', '\u212A', '\u00e9', '\u00c9', '@', '`', '\\u0041', '\\u006b']
    const decode = (raw: string) => JSON.parse(`"${raw}"`) as string
    let seed = 7
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed % n
    }
    for (let round = 0; round < 2000; round++) {
      const raws = Array.from({ length: 1 + next(20) }, () =>
        Array.from({ length: 1 + next(2) }, () => units[next(units.length)]).join(''),
      )
      let expected: string | undefined
      const seen: string[] = []
      for (const raw of raws) {
        const key = decode(raw)
        if (seen.includes(key)) expected = 'duplicate-key'
        else if (seen.some((k) => k.toLowerCase() === key.toLowerCase())) {
          expected = 'case-variant-key'
        }
        if (expected) break
        seen.push(key)
      }
      const text = `{${raws.map((raw, i) => `"${raw}":${i}`).join(',')}}`
      assert.equal(scan(text, wide)?.kind, expected, text)
    }
  })

  test('folds only letters: ASCII punctuation one case bit apart is different', () => {
    // "@" and "`", "[" and "{" differ by the bit that separates A–Z from a–z.
    assert.equal(scan('{"a@":1,"a`":2,"x[":3,"x{":4}', wide), undefined)
    assert.equal(scan('{"_":1,"\u007f":2}', wide), undefined)
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
    // Each element starts afresh, whichever way the one before it was checked.
    assert.equal(scan('[{"\u212A":1,"id":1},{"\u00e9":1,"k":2},{"k":3}]', wide), undefined)
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
