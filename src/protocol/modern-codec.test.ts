import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { assertValidMessage } from '../../test/support/schema.ts'
import { codecFor } from './codecs.ts'
import type { JsonObject, JsonRpcMessage } from './jsonrpc.ts'
import { type ErrorReply, META, type Message, type Result } from './model.ts'

const REVISION = '2026-07-28'
const codec = codecFor(REVISION)

/** Frozen inputs make any mutation by the codec throw (modules run in strict mode). */
function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) frozen(child)
    Object.freeze(value)
  }
  return value
}

/** Encodes and checks the output against the 2026 schema. */
function encode(message: Message, method?: string): JsonRpcMessage {
  const wire = codec.encode(frozen(message), method === undefined ? {} : { method })
  assertValidMessage(REVISION, wire, method === undefined ? {} : { method })
  return wire
}

function decode(wire: JsonObject): Message {
  return codec.decode(frozen(wire) as unknown as JsonRpcMessage)
}

const envelopeMeta = {
  [META.protocolVersion]: REVISION,
  [META.clientCapabilities]: { elicitation: { form: {} } },
  [META.clientInfo]: { name: 'client', version: '1.2.3' },
  [META.logLevel]: 'info',
}

const serverInfo = { name: 'server', version: '9.9.9' }

describe('2026-07-28 codec: requests', () => {
  test('lifts the envelope out of _meta and keeps every other _meta key and param', () => {
    const wire = {
      jsonrpc: '2.0',
      id: 'r1',
      method: 'tools/call',
      params: {
        _meta: {
          ...envelopeMeta,
          progressToken: 'p1',
          traceparent: '00-abc-def-01',
          'com.example/custom': { nested: [1, { deep: true }] },
        },
        name: 'get_weather',
        arguments: { city: 'Paris', _meta: { inside: 'arguments' } },
        'x-unknown': { a: [1, 2] },
      },
    }
    const decoded = decode(wire)
    assert.equal(decoded.kind, 'request')
    assert.ok(decoded.kind === 'request')
    assert.deepEqual(decoded.envelope, {
      protocolVersion: REVISION,
      clientCapabilities: { elicitation: { form: {} } },
      clientInfo: { name: 'client', version: '1.2.3' },
      logLevel: 'info',
    })
    assert.deepEqual(decoded.params, {
      _meta: {
        progressToken: 'p1',
        traceparent: '00-abc-def-01',
        'com.example/custom': { nested: [1, { deep: true }] },
      },
      name: 'get_weather',
      arguments: { city: 'Paris', _meta: { inside: 'arguments' } },
      'x-unknown': { a: [1, 2] },
    })
    assert.deepEqual(encode(decoded), wire)
  })

  test('drops an emptied _meta and restores it on encode', () => {
    const wire = {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/list',
      params: { _meta: { ...envelopeMeta }, cursor: 'c' },
    }
    const decoded = decode(wire)
    assert.ok(decoded.kind === 'request')
    assert.deepEqual(decoded.params, { cursor: 'c' })
    assert.deepEqual(encode(decoded), wire)
  })

  test('builds the envelope into params for a request that had none', () => {
    const wire = encode({
      kind: 'request',
      id: 3,
      method: 'server/discover',
      params: undefined,
      envelope: { protocolVersion: REVISION, clientCapabilities: {} },
    })
    assert.deepEqual(wire, {
      jsonrpc: '2.0',
      id: 3,
      method: 'server/discover',
      params: { _meta: { [META.protocolVersion]: REVISION, [META.clientCapabilities]: {} } },
    })
  })

  test('leaves an incomplete or ill-typed envelope in _meta for the session to refuse', () => {
    const cases = [
      { [META.clientCapabilities]: {} },
      { [META.protocolVersion]: REVISION },
      { [META.protocolVersion]: 20260728, [META.clientCapabilities]: {} },
      { [META.protocolVersion]: REVISION, [META.clientCapabilities]: 'all' },
    ]
    for (const meta of cases) {
      const params = { _meta: meta, name: 't' }
      const decoded = decode({ jsonrpc: '2.0', id: 1, method: 'tools/call', params })
      assert.ok(decoded.kind === 'request')
      assert.equal(decoded.envelope, undefined)
      assert.deepEqual(decoded.params, params)
    }
  })

  test('keeps an ill-typed clientInfo or logLevel in _meta rather than lifting it', () => {
    const meta = {
      [META.protocolVersion]: REVISION,
      [META.clientCapabilities]: {},
      [META.clientInfo]: 'not an object',
      [META.logLevel]: 7,
    }
    const { params, envelope } = codec.decodeParams(frozen({ _meta: meta }))
    assert.deepEqual(envelope, { protocolVersion: REVISION, clientCapabilities: {} })
    assert.deepEqual(params, { _meta: { [META.clientInfo]: 'not an object', [META.logLevel]: 7 } })
  })

  test('keeps a "__proto__" member as plain data while lifting the envelope', () => {
    const text =
      '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"__proto__":{"polluted":true},' +
      `"_meta":{"__proto__":{"x":1},"${META.protocolVersion}":"${REVISION}",` +
      `"${META.clientCapabilities}":{}},"name":"t"}}`
    const decoded = decode(JSON.parse(text) as JsonObject)
    assert.ok(decoded.kind === 'request' && decoded.params)
    assert.equal(Object.getPrototypeOf(decoded.params), Object.prototype)
    assert.ok(Object.hasOwn(decoded.params, '__proto__'))
    assert.equal((decoded.params as { polluted?: unknown }).polluted, undefined)
    const meta = decoded.params._meta as JsonObject
    assert.ok(Object.hasOwn(meta, '__proto__') && Object.getPrototypeOf(meta) === Object.prototype)
    assert.equal(JSON.stringify(codec.encode(decoded)), text)
  })

  test('decodes a request without params to undefined params', () => {
    const decoded = decode({ jsonrpc: '2.0', id: 1, method: 'tools/list' })
    assert.deepEqual(decoded, { kind: 'request', id: 1, method: 'tools/list', params: undefined })
  })
})

describe('2026-07-28 codec: results', () => {
  const listResult = {
    resultType: 'complete',
    tools: [{ name: 't', inputSchema: { type: 'object' }, 'x-vendor': { keep: true } }],
    nextCursor: 'n',
    ttlMs: 5000,
    cacheScope: 'public',
    _meta: { [META.serverInfo]: serverInfo, 'com.example/trace': 'id-1' },
    'x-unknown': 1,
  }

  test('lifts resultType, cache hints and serverInfo, and keeps everything else', () => {
    const decoded = decode({ jsonrpc: '2.0', id: 1, result: listResult })
    assert.ok(decoded.kind === 'result')
    assert.equal(decoded.resultType, 'complete')
    assert.deepEqual(decoded.cache, { ttlMs: 5000, cacheScope: 'public' })
    assert.deepEqual(decoded.serverInfo, serverInfo)
    assert.deepEqual(decoded.result, {
      tools: listResult.tools,
      nextCursor: 'n',
      _meta: { 'com.example/trace': 'id-1' },
      'x-unknown': 1,
    })
    assert.deepEqual(encode(decoded, 'tools/list'), { jsonrpc: '2.0', id: 1, result: listResult })
  })

  test('reads a result without resultType, from an older peer, as complete', () => {
    const decoded = decode({ jsonrpc: '2.0', id: 1, result: { content: [] } })
    assert.ok(decoded.kind === 'result')
    assert.equal(decoded.resultType, 'complete')
    assert.deepEqual(encode(decoded, 'tools/call'), {
      jsonrpc: '2.0',
      id: 1,
      result: { resultType: 'complete', content: [] },
    })
  })

  test('adds safe cache hints to a complete result of a cacheable method, and only there', () => {
    const bare: Result = { kind: 'result', id: 1, resultType: 'complete', result: { tools: [] } }
    const listed = encode(bare, 'tools/list') as { result: JsonObject }
    assert.equal(listed.result.ttlMs, 0)
    assert.equal(listed.result.cacheScope, 'private')
    const called = encode({ ...bare, result: { content: [] } }, 'tools/call') as {
      result: JsonObject
    }
    assert.equal('ttlMs' in called.result, false)
    assert.equal('cacheScope' in called.result, false)
  })

  test('keeps malformed cache hints as data, and replaces them with safe ones when emitting', () => {
    for (const hints of [
      { ttlMs: -1, cacheScope: 'public' },
      { ttlMs: 1.5, cacheScope: 'public' },
      { ttlMs: 10, cacheScope: 'everyone' },
      { ttlMs: 10 },
    ]) {
      const decoded = decode({
        jsonrpc: '2.0',
        id: 1,
        result: { resultType: 'complete', tools: [], ...hints },
      })
      assert.ok(decoded.kind === 'result')
      assert.equal(decoded.cache, undefined)
      assert.deepEqual(decoded.result, { tools: [], ...hints })
      const wire = encode(decoded, 'tools/list') as { result: JsonObject }
      assert.deepEqual([wire.result.ttlMs, wire.result.cacheScope], [0, 'private'])
    }
  })

  test('carries an input_required result untouched and never adds cache hints to it', () => {
    const result = {
      resultType: 'input_required',
      inputRequests: {
        login: {
          method: 'elicitation/create',
          params: {
            mode: 'form',
            message: 'Name?',
            requestedSchema: { type: 'object', properties: { n: { type: 'string' } } },
          },
        },
      },
      requestState: 'opaque-state',
    }
    const decoded = decode({ jsonrpc: '2.0', id: 'x', result })
    assert.ok(decoded.kind === 'result')
    assert.equal(decoded.resultType, 'input_required')
    assert.deepEqual(decoded.result, {
      inputRequests: result.inputRequests,
      requestState: 'opaque-state',
    })
    // resources/read is both cacheable and MRTR-capable: its input_required result has no hints.
    for (const method of ['tools/call', 'resources/read', 'prompts/get']) {
      assert.deepEqual(encode(decoded, method), { jsonrpc: '2.0', id: 'x', result })
    }
  })

  test('passes an extension resultType through', () => {
    const result = { resultType: 'task', task: { taskId: 't1', status: 'working' } }
    const decoded = decode({ jsonrpc: '2.0', id: 1, result })
    assert.ok(decoded.kind === 'result')
    assert.equal(decoded.resultType, 'task')
    // The tasks extension's result has its own schema, so the core one is not checked here.
    assert.deepEqual(codec.encode(decoded, { method: 'tools/call' }), {
      jsonrpc: '2.0',
      id: 1,
      result,
    })
  })

  test('keeps a serverInfo that is not an object where it was', () => {
    const result = { resultType: 'complete', content: [], _meta: { [META.serverInfo]: 'odd' } }
    const decoded = decode({ jsonrpc: '2.0', id: 1, result })
    assert.ok(decoded.kind === 'result')
    assert.equal(decoded.serverInfo, undefined)
    assert.deepEqual(decoded.result._meta, { [META.serverInfo]: 'odd' })
  })

  test('decodeResult and encodeResult leave their inputs untouched', () => {
    const wire = frozen(structuredClone(listResult))
    const decoded = codec.decodeResult(wire)
    assert.deepEqual(codec.encodeResult(frozen(decoded), { method: 'tools/list' }), listResult)
  })
})

describe('2026-07-28 codec: notifications', () => {
  test('lifts the subscription id of a listen-stream notification and restores it', () => {
    const wire = {
      jsonrpc: '2.0',
      method: 'notifications/tools/list_changed',
      params: { _meta: { [META.subscriptionId]: 'listen-1', 'com.example/x': 1 } },
    }
    const decoded = decode(wire)
    assert.deepEqual(decoded, {
      kind: 'notification',
      method: 'notifications/tools/list_changed',
      params: { _meta: { 'com.example/x': 1 } },
      subscriptionId: 'listen-1',
    })
    assert.deepEqual(encode(decoded), wire)
  })

  test('adds a subscription id to a notification that had no params', () => {
    const wire = encode({
      kind: 'notification',
      method: 'notifications/resources/list_changed',
      params: undefined,
      subscriptionId: 7,
    })
    assert.deepEqual(wire, {
      jsonrpc: '2.0',
      method: 'notifications/resources/list_changed',
      params: { _meta: { [META.subscriptionId]: 7 } },
    })
  })

  test('leaves a subscription id that is not a request id in _meta', () => {
    const params = { _meta: { [META.subscriptionId]: { bad: true } } }
    const decoded = decode({ jsonrpc: '2.0', method: 'notifications/tools/list_changed', params })
    assert.ok(decoded.kind === 'notification')
    assert.equal(decoded.subscriptionId, undefined)
    assert.deepEqual(decoded.params, params)
  })

  test('passes progress notifications through unchanged', () => {
    const wire = {
      jsonrpc: '2.0',
      method: 'notifications/progress',
      params: { progressToken: 'p', progress: 1, total: 2, message: 'half', extra: [true] },
    }
    assert.deepEqual(encode(decode(wire)), wire)
  })
})

describe('2026-07-28 codec: errors', () => {
  function error(code: number, extra: Partial<ErrorReply> = {}): ErrorReply {
    return { kind: 'error', id: 1, code, message: 'm', ...extra }
  }

  function code(reply: ErrorReply): number {
    return (encode(reply) as { error: { code: number } }).error.code
  }

  test('reads -32002 from an old server as resource-not-found and emits it as -32602', () => {
    const decoded = decode({ jsonrpc: '2.0', id: 1, error: { code: -32002, message: 'nf' } })
    assert.ok(decoded.kind === 'error')
    assert.equal(decoded.meaning, 'resource-not-found')
    assert.equal(code(decoded), -32602)
    assert.equal(code(error(-32002)), -32602)
    assert.equal(code(error(-32603, { meaning: 'resource-not-found' })), -32602)
  })

  test('never emits -32042, which 2026 forbids', () => {
    assert.equal(code(error(-32042)), -32602)
    assert.equal(code(error(-32042, { meaning: 'url-elicitation-required' })), -32602)
  })

  test('emits the 2026 codes and other codes unchanged', () => {
    assert.equal(code(error(-32021, { data: { requiredCapabilities: { sampling: {} } } })), -32021)
    assert.equal(
      code(error(-32022, { data: { supported: [REVISION], requested: '1999' } })),
      -32022,
    )
    for (const c of [-32020, -32601, -32600, -32700, -32603, -32001, 1]) {
      assert.equal(code(error(c)), c)
    }
  })

  test('keeps error data of any JSON type, and the id even when null', () => {
    for (const data of [null, false, 0, '', { supported: [REVISION], requested: 'x' }]) {
      const wire = { jsonrpc: '2.0', id: null, error: { code: -32602, message: 'm', data } }
      assert.deepEqual(encode(decode(wire)), wire)
    }
    const without = { jsonrpc: '2.0', id: 5, error: { code: -32601, message: 'm' } }
    const decoded = decode(without)
    assert.equal('data' in decoded, false)
    assert.deepEqual(encode(decoded), without)
  })
})
