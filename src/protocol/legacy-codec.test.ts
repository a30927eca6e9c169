import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { assertValidMessage } from '../../test/support/schema.ts'
import { UnrepresentableError } from './codec.ts'
import { codecFor } from './codecs.ts'
import type { JsonObject, JsonRpcMessage } from './jsonrpc.ts'
import { type ErrorReply, META, type Message, type Result } from './model.ts'
import { LEGACY_REVISIONS, type Revision } from './revisions.ts'

/** Frozen inputs make any mutation by the codec throw (modules run in strict mode). */
function frozen<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) frozen(child)
    Object.freeze(value)
  }
  return value
}

/** Encodes for `revision` and checks the output against that revision's schema. */
function encode(revision: Revision, message: Message, method?: string): JsonRpcMessage {
  const wire = codecFor(revision).encode(frozen(message), method === undefined ? {} : { method })
  assertValidMessage(revision, wire, method === undefined ? {} : { method })
  return wire
}

function decode(revision: Revision, wire: JsonObject): Message {
  return codecFor(revision).decode(frozen(wire) as unknown as JsonRpcMessage)
}

const modern = codecFor('2026-07-28')

describe('legacy codecs: round trips', () => {
  for (const revision of LEGACY_REVISIONS) {
    test(`${revision}: request, notification, result and error come back unchanged`, () => {
      const messages: [JsonObject, string?][] = [
        [
          {
            jsonrpc: '2.0',
            id: 1,
            method: 'tools/call',
            params: {
              _meta: { progressToken: 'p', 'com.example/x': { y: [1] } },
              name: 'echo',
              arguments: { text: 'hi', nested: { _meta: 'kept' } },
              'x-unknown': true,
            },
          },
        ],
        [{ jsonrpc: '2.0', id: 'a', method: 'ping' }],
        [{ jsonrpc: '2.0', method: 'notifications/initialized' }],
        [
          {
            jsonrpc: '2.0',
            method: 'notifications/progress',
            params: { progressToken: 'p', progress: 1, extra: { keep: 'me' } },
          },
        ],
        [
          {
            jsonrpc: '2.0',
            id: 1,
            result: {
              content: [{ type: 'text', text: 'hi', 'x-extra': 1 }],
              _meta: { 'com.example/trace': 't' },
              unknownTop: { deep: [null] },
            },
          },
          'tools/call',
        ],
        [
          {
            jsonrpc: '2.0',
            id: 'i',
            result: {
              protocolVersion: revision,
              capabilities: { tools: {} },
              serverInfo: { name: 's', version: '1' },
            },
          },
          'initialize',
        ],
        [{ jsonrpc: '2.0', id: 2, error: { code: -32601, message: 'nope', data: { why: 1 } } }],
      ]
      for (const [wire, method] of messages) {
        const before = structuredClone(wire)
        assert.deepEqual(encode(revision, decode(revision, wire), method), before)
      }
    })

    test(`${revision}: decodes every result as complete, with nothing lifted`, () => {
      const decoded = decode(revision, { jsonrpc: '2.0', id: 1, result: { tools: [] } })
      assert.deepEqual(decoded, {
        kind: 'result',
        id: 1,
        resultType: 'complete',
        result: { tools: [] },
      })
    })
  }
})

describe('legacy codecs: what 2026 adds is left out', () => {
  for (const revision of LEGACY_REVISIONS) {
    test(`${revision}: drops the request envelope and keeps the rest of _meta`, () => {
      const wire = encode(revision, {
        kind: 'request',
        id: 1,
        method: 'tools/call',
        params: { _meta: { progressToken: 7 }, name: 't', arguments: {} },
        envelope: { protocolVersion: '2026-07-28', clientCapabilities: {}, logLevel: 'debug' },
      })
      assert.deepEqual(wire, {
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { _meta: { progressToken: 7 }, name: 't', arguments: {} },
      })
    })

    test(`${revision}: drops resultType, cache hints and serverInfo from a result`, () => {
      const result: Result = {
        kind: 'result',
        id: 1,
        resultType: 'complete',
        result: { tools: [{ name: 't', inputSchema: { type: 'object' } }], _meta: { k: 1 } },
        cache: { ttlMs: 100, cacheScope: 'public' },
        serverInfo: { name: 's', version: '1' },
      }
      assert.deepEqual(encode(revision, result, 'tools/list'), {
        jsonrpc: '2.0',
        id: 1,
        result: { tools: [{ name: 't', inputSchema: { type: 'object' } }], _meta: { k: 1 } },
      })
    })

    test(`${revision}: drops the subscription id of a notification`, () => {
      const wire = encode(revision, {
        kind: 'notification',
        method: 'notifications/tools/list_changed',
        params: undefined,
        subscriptionId: 'listen-1',
      })
      assert.deepEqual(wire, { jsonrpc: '2.0', method: 'notifications/tools/list_changed' })
    })

    test(`${revision}: refuses to encode an input_required or extension result`, () => {
      for (const resultType of ['input_required', 'task']) {
        const result: Result = {
          kind: 'result',
          id: 1,
          resultType,
          result: { requestState: 's' },
        }
        assert.throws(
          () => codecFor(revision).encode(result, { method: 'tools/call' }),
          (err: unknown) =>
            err instanceof UnrepresentableError &&
            err.code === 'ERR_UNREPRESENTABLE' &&
            err.message.includes(revision),
        )
        assert.throws(() => codecFor(revision).encodeResult(result), UnrepresentableError)
      }
    })
  }

  test('turns a 2026 request and result into valid legacy messages of every revision', () => {
    const request = modern.decode(
      frozen({
        jsonrpc: '2.0',
        id: 'c1',
        method: 'tools/call',
        params: {
          _meta: {
            [META.protocolVersion]: '2026-07-28',
            [META.clientCapabilities]: {},
            [META.clientInfo]: { name: 'c', version: '1' },
            progressToken: 'p',
          },
          name: 'echo',
          arguments: { text: 'x' },
        },
      }),
    )
    const result = modern.decode(
      frozen({
        jsonrpc: '2.0',
        id: 'c1',
        result: {
          resultType: 'complete',
          tools: [{ name: 'echo', inputSchema: { type: 'object' } }],
          ttlMs: 10,
          cacheScope: 'private',
          _meta: { [META.serverInfo]: { name: 's', version: '1' } },
        },
      }),
    )
    for (const revision of LEGACY_REVISIONS) {
      assert.deepEqual(encode(revision, request), {
        jsonrpc: '2.0',
        id: 'c1',
        method: 'tools/call',
        params: { _meta: { progressToken: 'p' }, name: 'echo', arguments: { text: 'x' } },
      })
      assert.deepEqual(encode(revision, result, 'tools/list'), {
        jsonrpc: '2.0',
        id: 'c1',
        result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] },
      })
    }
  })

  test('turns a legacy result into a valid 2026 result with resultType and cache hints', () => {
    const decoded = decode('2025-06-18', {
      jsonrpc: '2.0',
      id: 1,
      result: { resources: [{ uri: 'file:///a', name: 'a' }] },
    })
    const wire = modern.encode(decoded, { method: 'resources/list' })
    assertValidMessage('2026-07-28', wire, { method: 'resources/list' })
    assert.deepEqual(wire, {
      jsonrpc: '2.0',
      id: 1,
      result: {
        resultType: 'complete',
        resources: [{ uri: 'file:///a', name: 'a' }],
        ttlMs: 0,
        cacheScope: 'private',
      },
    })
  })
})

describe('legacy codecs: error codes', () => {
  function error(code: number, extra: Partial<ErrorReply> = {}): ErrorReply {
    return { kind: 'error', id: 1, code, message: 'm', ...extra }
  }

  function code(revision: Revision, reply: ErrorReply): number {
    return (encode(revision, reply) as { error: { code: number } }).error.code
  }

  test('maps resource-not-found to -32002 in every legacy revision, and back', () => {
    const fromModern = modern.decode(
      frozen({ jsonrpc: '2.0', id: 1, error: { code: -32002, message: 'nf' } }),
    )
    for (const revision of LEGACY_REVISIONS) {
      assert.equal(code(revision, error(-32602, { meaning: 'resource-not-found' })), -32002)
      assert.ok(fromModern.kind === 'error')
      assert.equal(code(revision, fromModern), -32002)
      const decoded = decode(revision, {
        jsonrpc: '2.0',
        id: 1,
        error: { code: -32002, message: 'nf' },
      })
      assert.ok(decoded.kind === 'error')
      assert.equal(decoded.meaning, 'resource-not-found')
      // …and a 2026 peer gets -32602 for the same meaning.
      assert.equal((modern.encode(decoded) as { error: { code: number } }).error.code, -32602)
    }
  })

  test('never lets the 2026 codes -32020 … -32022 reach a legacy peer', () => {
    for (const revision of LEGACY_REVISIONS) {
      assert.equal(code(revision, error(-32020)), -32602)
      assert.equal(code(revision, error(-32021, { data: { requiredCapabilities: {} } })), -32602)
      assert.equal(
        code(revision, error(-32022, { data: { supported: [], requested: 'x' } })),
        -32603,
      )
    }
  })

  test('keeps -32042 for 2025-11-25 only, and turns it into -32602 before', () => {
    const data = {
      elicitations: [{ mode: 'url', elicitationId: 'e', url: 'https://x.test/', message: 'go' }],
    }
    for (const revision of LEGACY_REVISIONS) {
      const expected = revision === '2025-11-25' ? -32042 : -32602
      assert.equal(code(revision, error(-32042, { data })), expected, revision)
      assert.equal(
        code(revision, error(-32603, { meaning: 'url-elicitation-required', data })),
        expected,
        revision,
      )
    }
    const tagged = decode('2025-11-25', {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32042, message: 'u', data },
    })
    assert.ok(tagged.kind === 'error')
    assert.equal(tagged.meaning, 'url-elicitation-required')
    const untagged = decode('2025-06-18', {
      jsonrpc: '2.0',
      id: 1,
      error: { code: -32042, message: 'u' },
    })
    assert.equal('meaning' in untagged, false)
  })

  test('passes implementation-defined and standard codes unchanged', () => {
    for (const revision of LEGACY_REVISIONS) {
      for (const c of [-32000, -32001, -32019, -32050, -32099, -32601, -32602, -32700, 42]) {
        assert.equal(code(revision, error(c)), c, `${c} in ${revision}`)
      }
    }
  })

  test('keeps error data and a null id', () => {
    for (const revision of LEGACY_REVISIONS) {
      const wire = { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'p', data: [1] } }
      assert.deepEqual(encode(revision, decode(revision, wire)), wire)
    }
  })
})

describe('legacy codecs: params and result helpers', () => {
  test('pass params and results through as they are', () => {
    const codec = codecFor('2025-03-26')
    const params = frozen({ _meta: { [META.protocolVersion]: 'looks modern' }, a: 1 })
    assert.deepEqual(codec.decodeParams(params), { params })
    assert.equal(codec.encodeParams(params), params)
    assert.equal(codec.encodeParams(undefined), undefined)
    const result = frozen({ resultType: 'complete', content: [] })
    // A legacy peer's result is taken as it came, even if it carries a 2026 member.
    assert.deepEqual(codec.decodeResult(result), { result, resultType: 'complete' })
  })
})
