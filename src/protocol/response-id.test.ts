import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { ResponseIdScanner, responseIdOf } from './response-id.ts'

describe('responseIdOf', () => {
  test('finds the id first, last or between the other members', () => {
    assert.equal(responseIdOf('{"jsonrpc":"2.0","id":7,"result":{}}'), 7)
    assert.equal(responseIdOf('{"result":{"content":[{"id":1}]},"jsonrpc":"2.0","id":42}'), 42)
    assert.equal(
      responseIdOf(' { "error" : {"code":-1} , "id" : "a\\"b" , "jsonrpc":"2.0" } '),
      'a"b',
    )
  })

  test('ignores ids nested in the result and look-alikes inside strings', () => {
    assert.equal(responseIdOf('{"result":{"id":1,"x":"\\"id\\":2"},"id":3}'), 3)
    assert.equal(responseIdOf('{"result":{"id":1}}'), undefined)
  })

  test('gives no id for requests, notifications, doubled ids or broken text', () => {
    assert.equal(responseIdOf('{"id":1,"method":"sampling/createMessage"}'), undefined)
    assert.equal(responseIdOf('{"method":"x","id":1}'), undefined)
    assert.equal(responseIdOf('{"id":1,"id":2,"result":{}}'), undefined)
    assert.equal(responseIdOf('{"id":{"n":1},"result":{}}'), undefined)
    assert.equal(responseIdOf('{"id":true,"result":{}}'), undefined)
    assert.equal(responseIdOf('{"id":1,"result":{}'), undefined, 'never closed')
    assert.equal(responseIdOf('{"id":1}{"id":2}'), undefined)
    assert.equal(responseIdOf('[{"id":1}]'), undefined)
    assert.equal(responseIdOf(`{"id":"${'x'.repeat(500)}"}`), undefined)
  })

  test('reads a line fed in pieces, split anywhere', () => {
    const text = Buffer.from(`{"result":{"text":"${'A'.repeat(100_000)}"},"jsonrpc":"2.0","id":9}`)
    for (const size of [1, 7, 4096]) {
      const scanner = new ResponseIdScanner()
      for (let at = 0; at < text.length; at += size) scanner.push(text.subarray(at, at + size))
      assert.equal(scanner.responseId(), 9, `pieces of ${size} bytes`)
    }
  })
})
