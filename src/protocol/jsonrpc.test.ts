import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { assertValidMessage } from '../../test/support/schema.ts'
import { DEFAULT_JSON_LIMITS, type JsonLimits } from './json-limits.ts'
import {
  errorResponse,
  INVALID_PARAMS,
  INVALID_REQUEST,
  isErrorResponse,
  isNotification,
  isRequest,
  isResponse,
  type JsonRpcId,
  PARSE_ERROR,
  type ParseResult,
  parsePayload,
  resultResponse,
  serialize,
  validateEnvelope,
} from './jsonrpc.ts'
import { REVISIONS } from './revisions.ts'

const limits: JsonLimits = DEFAULT_JSON_LIMITS
const single = { limits, allowBatch: false }
const batching = { limits, allowBatch: true }

function parse(text: string, options = single): ParseResult {
  return parsePayload(text, options)
}

/** The error reply owed for `text`, checked against every revision's schema. */
function expectError(result: ParseResult, code: number, id: JsonRpcId | null) {
  assert.equal(result.ok, false, 'the payload is refused')
  if (result.ok) return assert.fail('unreachable')
  assert.equal(result.error.error.code, code, result.error.error.message)
  assert.equal(result.error.id, id)
  for (const revision of REVISIONS) assertValidMessage(revision, result.error)
  return result.error
}

/** The single item of a non-batch payload that parsed but is not a valid message. */
function expectItemError(text: string, code: number, id: JsonRpcId | null) {
  return expectError(parse(text), code, id)
}

describe('parsePayload accepts valid messages', () => {
  test('parses a request, a notification, a result and an error', () => {
    const texts = [
      '{"jsonrpc":"2.0","id":1,"method":"tools/list"}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":"a","result":{}}',
      '{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}',
    ]
    const kinds = texts.map((text) => {
      const r = parse(text)
      assert.ok(r.ok && !r.batch && r.items.length === 1, text)
      const item = r.items[0]
      assert.ok(item?.ok, text)
      const m = item.message
      return [isRequest(m), isNotification(m), isResponse(m), isErrorResponse(m)]
    })
    assert.deepEqual(kinds, [
      [true, false, false, false],
      [false, true, false, false],
      [false, false, true, false],
      [false, false, true, true],
    ])
  })

  test('keeps strings with quotes, backslashes and brackets intact', () => {
    const params = { name: 'x"}]{[,', arguments: { path: 'C:\\dir\\"q"', s: '\\\\' } }
    const r = parse(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params }))
    assert.ok(r.ok && r.items[0]?.ok)
    assert.deepEqual((r.items[0].message as { params: unknown }).params, params)
  })

  test('allows keys differing only by case inside params', () => {
    const r = parse('{"jsonrpc":"2.0","id":1,"method":"m","params":{"Name":1,"name":2}}')
    assert.ok(r.ok && r.items[0]?.ok)
  })

  test('reads an error response without an id as one with a null id', () => {
    const r = parse('{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}')
    assert.ok(r.ok && r.items[0]?.ok)
    assert.equal((r.items[0].message as { id: unknown }).id, null)
  })
})

describe('parsePayload refuses malformed text', () => {
  test('answers text that is not JSON with -32700 and a null id', () => {
    expectError(parse('{"jsonrpc":"2.0","id":1,'), PARSE_ERROR, null)
    expectError(parse('not json'), PARSE_ERROR, null)
    expectError(parse(''), PARSE_ERROR, null)
  })

  test('answers an oversize message with -32700 naming the limit', () => {
    const small = { limits: { ...limits, maxMessageBytes: 64 }, allowBatch: false }
    const text = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'x'.repeat(64) })
    const error = expectError(parse(text, small), PARSE_ERROR, null)
    assert.match(error.error.message, /\b64 bytes/)
  })

  test('counts the limit in UTF-8 bytes, not characters', () => {
    const small = { limits: { ...limits, maxMessageBytes: 64 }, allowBatch: false }
    // 59 characters, but each "é" is two bytes of UTF-8: 89 bytes in all.
    const text = `{"jsonrpc":"2.0","method":"${'é'.repeat(30)}"}`
    assert.ok(text.length <= 64 && Buffer.byteLength(text) > 64)
    expectError(parse(text, small), PARSE_ERROR, null)
    assert.ok(parse(`{"jsonrpc":"2.0","method":"${'é'.repeat(5)}"}`, small).ok)
  })

  const tight: JsonLimits = {
    ...limits,
    maxDepth: 3,
    maxStringLength: 16,
    maxArrayLength: 2,
    maxObjectKeys: 4,
  }
  const cases: [string, string, RegExp][] = [
    ['too deep', '{"jsonrpc":"2.0","method":"m","params":{"a":{"b":[1]}}}', /nesting .* 3 levels/],
    ['too long a string', '{"jsonrpc":"2.0","method":"0123456789abcdefg"}', /string .* 16/],
    ['too long an array', '{"jsonrpc":"2.0","method":"m","params":{"a":[1,2,3]}}', /array .* 2/],
    [
      'too many keys',
      '{"jsonrpc":"2.0","method":"m","params":{"a":1,"b":2,"c":3,"d":4,"e":5}}',
      /4 keys/,
    ],
    [
      'duplicate envelope keys',
      '{"jsonrpc":"2.0","id":1,"id":2,"method":"m"}',
      /Duplicate key "id"/,
    ],
    [
      'duplicate nested keys',
      '{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}',
      /Duplicate key "a"/,
    ],
    ['case-variant envelope keys', '{"jsonrpc":"2.0","id":1,"method":"a","Method":"b"}', /case/],
    [
      'an escaped duplicate of method',
      '{"jsonrpc":"2.0","method":"a","\\u006dethod":"b"}',
      /"method"/,
    ],
  ]
  for (const [what, text, message] of cases) {
    test(`answers ${what} with -32700 and a null id, before reading any member`, () => {
      const error = expectError(
        parse(text, { limits: tight, allowBatch: false }),
        PARSE_ERROR,
        null,
      )
      assert.match(error.error.message, message)
    })
  }
})

describe('parsePayload refuses invalid JSON-RPC messages', () => {
  test('answers a wrong or missing jsonrpc member with -32600 and the request id', () => {
    expectItemError('{"jsonrpc":"1.0","id":3,"method":"m"}', INVALID_REQUEST, 3)
    expectItemError('{"jsonrpc":2.0,"id":"x","method":"m"}', INVALID_REQUEST, 'x')
    expectItemError('{"id":4,"method":"m"}', INVALID_REQUEST, 4)
    expectItemError('{"jsonrpc":"2.0 ","method":"m"}', INVALID_REQUEST, null)
  })

  test('answers ids that are not a string or an integer with -32600 and a null id', () => {
    for (const id of ['null', '1.5', '{"a":1}', 'true', '[1]', '9007199254740993']) {
      expectItemError(`{"jsonrpc":"2.0","id":${id},"method":"m"}`, INVALID_REQUEST, null)
    }
  })

  test('answers params that are not an object with -32602 and the request id', () => {
    for (const params of ['[1,2]', '"s"', '3', 'null', 'true']) {
      expectItemError(`{"jsonrpc":"2.0","id":9,"method":"m","params":${params}}`, INVALID_PARAMS, 9)
    }
  })

  test('answers a notification with non-object params with -32600', () => {
    expectItemError('{"jsonrpc":"2.0","method":"m","params":[1]}', INVALID_REQUEST, null)
  })

  test('answers a message carrying both result and error with -32600 and a null id', () => {
    expectItemError(
      '{"jsonrpc":"2.0","id":5,"result":{},"error":{"code":1,"message":"m"}}',
      INVALID_REQUEST,
      null,
    )
  })

  test('never echoes the id of a malformed response, which names a request of the receiver', () => {
    // Without `method` the message is a response: its id is one of Barbican's own requests (or a
    // client's request still in flight), so the error about it must not carry it.
    expectItemError('{"id":7,"result":{}}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"1.0","id":7,"result":{}}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"2.0","id":"7","result":"x"}', INVALID_REQUEST, null)
    expectItemError(
      '{"jsonrpc":"2.0","id":7,"error":{"code":"x","message":"m"}}',
      INVALID_REQUEST,
      null,
    )
    // A request's id is still echoed: it is the sender's own.
    expectItemError('{"id":7,"method":"ping"}', INVALID_REQUEST, 7)
  })

  test('answers a message that mixes method with result or error with -32600', () => {
    expectItemError('{"jsonrpc":"2.0","id":6,"method":"m","result":{}}', INVALID_REQUEST, 6)
    expectItemError(
      '{"jsonrpc":"2.0","id":6,"method":"m","error":{"code":1,"message":"x"}}',
      INVALID_REQUEST,
      6,
    )
  })

  test('answers malformed responses (id null) and methods (their id) with -32600', () => {
    expectItemError('{"jsonrpc":"2.0","id":1}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"2.0","result":{}}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"2.0","id":null,"result":{}}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"2.0","id":2,"result":[]}', INVALID_REQUEST, null)
    expectItemError(
      '{"jsonrpc":"2.0","id":2,"error":{"code":1.5,"message":"x"}}',
      INVALID_REQUEST,
      null,
    )
    expectItemError('{"jsonrpc":"2.0","id":2,"error":{"code":1}}', INVALID_REQUEST, null)
    expectItemError('{"jsonrpc":"2.0","id":2,"method":""}', INVALID_REQUEST, 2)
    expectItemError('{"jsonrpc":"2.0","id":2,"method":7}', INVALID_REQUEST, 2)
  })

  test('answers a JSON value that is not an object with -32600 and a null id', () => {
    for (const text of ['null', '1', '"s"', 'true']) expectItemError(text, INVALID_REQUEST, null)
  })
})

describe('parsePayload and batches', () => {
  test('refuses a batch where the revision has no batching, with -32600 and a null id', () => {
    expectError(parse('[{"jsonrpc":"2.0","id":1,"method":"m"}]'), INVALID_REQUEST, null)
  })

  test('refuses an empty batch', () => {
    expectError(parse('[]', batching), INVALID_REQUEST, null)
  })

  test('answers each invalid element of a batch on its own', () => {
    const r = parse(
      '[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"1.0","id":2,"method":"b"},' +
        '{"jsonrpc":"2.0","id":3,"method":"c","params":[]},7,' +
        '{"jsonrpc":"2.0","method":"n"}]',
      batching,
    )
    assert.ok(r.ok && r.batch)
    const summary = r.items.map((item) => (item.ok ? 'ok' : [item.error.error.code, item.error.id]))
    assert.deepEqual(summary, [
      'ok',
      [INVALID_REQUEST, 2],
      [INVALID_PARAMS, 3],
      [INVALID_REQUEST, null],
      'ok',
    ])
    for (const item of r.items) {
      if (!item.ok) assertValidMessage('2025-03-26', item.error)
    }
  })

  test('refuses a whole batch in which one element breaks a limit', () => {
    expectError(
      parse('[{"jsonrpc":"2.0","id":1,"method":"a"},{"jsonrpc":"2.0","ID":2,"id":3}]', batching),
      PARSE_ERROR,
      null,
    )
  })
})

describe('validateEnvelope', () => {
  test('does not copy a valid message, so parsing costs one object graph', () => {
    const m = { jsonrpc: '2.0', id: 1, method: 'm', params: {} }
    const item = validateEnvelope(m)
    assert.ok(item.ok)
    assert.equal(item.message, m)
  })

  test('does not modify an error response that lacks an id', () => {
    const m = { jsonrpc: '2.0', error: { code: 1, message: 'x' } }
    const item = validateEnvelope(m)
    assert.ok(item.ok)
    assert.equal('id' in m, false)
  })
})

describe('building and serializing messages', () => {
  test('builds error responses with data only when given', () => {
    assert.deepEqual(errorResponse(1, -32601, 'nope'), {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32601, message: 'nope' },
    })
    const withData = errorResponse(null, -32602, 'bad', { why: 1 })
    assert.deepEqual(withData.error.data, { why: 1 })
    for (const revision of REVISIONS) assertValidMessage(revision, withData)
  })

  test('builds a result response that validates as an empty result in every revision', () => {
    const response = resultResponse('r1', {})
    assert.deepEqual(response, { jsonrpc: '2.0', id: 'r1', result: {} })
    for (const revision of REVISIONS.filter((r) => r !== '2026-07-28')) {
      assertValidMessage(revision, response, { method: 'ping' })
    }
  })

  test('serializes without raw newlines, even for strings that contain them', () => {
    const message = resultResponse(1, { text: 'a\nb\r\nc\u2028' })
    const text = serialize(message)
    assert.equal(/[\r\n]/.test(text), false)
    assert.deepEqual(JSON.parse(text), message)
    assert.equal(serialize([message, message]).startsWith('[{'), true)
  })
})
