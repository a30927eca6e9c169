/**
 * Every official 2026-07-28 example decodes with the 2026 codec and re-encodes to the same JSON.
 * Whole messages go through decode/encode; params, results and error objects through their own
 * codec entry points or an enclosing message; every other type (tools, content blocks,
 * capabilities, form schemas…) inside the message that carries it on the wire. A folder no rule
 * handles fails the run, so a new example type cannot be skipped silently.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import {
  assertValidMessage,
  methodConst,
  resultDefFor,
  schemaDef,
  specSchemaDir,
  validateDef,
} from '../../test/support/schema.ts'
import { codecFor } from './codecs.ts'
import type { JsonObject, JsonRpcMessage } from './jsonrpc.ts'
import { methodSpec } from './methods.ts'
import { META, type Message } from './model.ts'

const REVISION = '2026-07-28'
const codec = codecFor(REVISION)
const EXAMPLES = join(specSchemaDir(), REVISION, 'examples')

interface Example {
  readonly type: string
  readonly file: string
  readonly value: JsonObject
}

function loadExamples(): Map<string, Example[]> {
  const byType = new Map<string, Example[]>()
  for (const type of readdirSync(EXAMPLES).sort()) {
    const files = readdirSync(join(EXAMPLES, type)).filter((f) => f.endsWith('.json'))
    byType.set(
      type,
      files.sort().map((file) => ({
        type,
        file,
        value: JSON.parse(readFileSync(join(EXAMPLES, type, file), 'utf8')) as JsonObject,
      })),
    )
  }
  return byType
}

const EXAMPLE_TYPES = loadExamples()

const ENVELOPE_META: JsonObject = {
  [META.protocolVersion]: REVISION,
  [META.clientCapabilities]: {},
  [META.clientInfo]: { name: 'corpus', version: '1.0.0' },
}

/** The method named by the `*Request` def of the same stem (`CallToolResult` → tools/call). */
function methodOfStem(type: string, suffix: RegExp): string {
  const request = type.replace(suffix, 'Request')
  const method = methodConst(schemaDef(REVISION, request))
  assert.ok(method, `${type} has a matching ${request} def naming its method`)
  return method
}

/** The neutral form never shows the 2026 framing the codec exists to lift. */
function assertNeutral(message: Message): void {
  if (message.kind === 'request') {
    const meta = message.params?._meta as JsonObject | undefined
    for (const key of [META.protocolVersion, META.clientCapabilities, META.clientInfo]) {
      assert.equal(meta !== undefined && key in meta, false, `${key} is lifted out of params`)
    }
  }
  if (message.kind === 'result') {
    for (const key of ['resultType', 'ttlMs', 'cacheScope']) {
      assert.equal(key in message.result, false, `${key} is lifted out of the result`)
    }
    const meta = message.result._meta as JsonObject | undefined
    assert.equal(meta !== undefined && META.serverInfo in meta, false, 'serverInfo is lifted')
  }
  if (message.kind === 'notification') {
    const meta = message.params?._meta as JsonObject | undefined
    assert.equal(meta !== undefined && META.subscriptionId in meta, false, 'subscriptionId lifted')
  }
}

/**
 * Decodes a whole wire message, checks the neutral form, re-encodes it and expects the same JSON;
 * the input is never modified and the output is a valid 2026 message.
 */
function roundTrip(wire: JsonObject, method?: string, expected: JsonObject = wire): JsonRpcMessage {
  const before = structuredClone(wire)
  const decoded = codec.decode(wire as unknown as JsonRpcMessage)
  assertNeutral(decoded)
  const encoded = codec.encode(decoded, method === undefined ? {} : { method })
  assert.deepEqual(encoded, expected)
  assert.deepEqual(wire, before, 'decoding and encoding leave the input untouched')
  assertValidMessage(REVISION, encoded, method === undefined ? {} : { method })
  return encoded
}

function request(method: string, params: JsonObject, meta: JsonObject = ENVELOPE_META): JsonObject {
  return { jsonrpc: '2.0', id: 'corpus-1', method, params: { _meta: { ...meta }, ...params } }
}

function response(result: JsonObject): JsonObject {
  return { jsonrpc: '2.0', id: 'corpus-1', result }
}

const CACHE = { ttlMs: 60_000, cacheScope: 'public' }

/** A tools/call answer asking for input: the carrier of embedded requests. */
function inputRequired(inputRequest: JsonObject): JsonObject {
  return response({ resultType: 'input_required', inputRequests: { ask: inputRequest } })
}

/** A retried tools/call carrying answers: the carrier of embedded results. */
function retried(inputResponse: JsonObject): JsonObject {
  return request('tools/call', {
    name: 'tool',
    arguments: {},
    inputResponses: { ask: inputResponse },
  })
}

function formRequest(field: JsonObject): JsonObject {
  return {
    method: 'elicitation/create',
    params: {
      mode: 'form',
      message: 'Fill in the form',
      requestedSchema: { type: 'object', properties: { field } },
    },
  }
}

function samplingRequest(params: JsonObject): JsonObject {
  return { method: 'sampling/createMessage', params }
}

type Dig = (wire: JsonRpcMessage) => unknown

interface Embedding {
  readonly message: JsonObject
  /** Method of the request a result answers. */
  readonly method?: string
  /** Finds the example again in the re-encoded message. */
  readonly dig: Dig
}

const result = (w: JsonRpcMessage) => (w as unknown as { result: JsonObject }).result
const params = (w: JsonRpcMessage) => (w as unknown as { params: JsonObject }).params
const asked = (w: JsonRpcMessage) => (result(w).inputRequests as JsonObject).ask as JsonObject
const answered = (w: JsonRpcMessage) => (params(w).inputResponses as JsonObject).ask as JsonObject
const formField = (w: JsonRpcMessage) =>
  (((asked(w).params as JsonObject).requestedSchema as JsonObject).properties as JsonObject).field

const contentBlock = (value: JsonObject): Embedding => ({
  message: response({ resultType: 'complete', content: [value] }),
  method: 'tools/call',
  dig: (w) => (result(w).content as unknown[])[0],
})

/** Where each type that is not a message, params, result or error object travels on the wire. */
const EMBEDDINGS: Readonly<Record<string, (value: JsonObject) => Embedding>> = {
  TextContent: contentBlock,
  ImageContent: contentBlock,
  AudioContent: contentBlock,
  EmbeddedResource: contentBlock,
  ResourceLink: contentBlock,
  ToolUseContent: (value) => ({
    message: retried({ role: 'assistant', content: value, model: 'm', stopReason: 'toolUse' }),
    dig: (w) => answered(w).content,
  }),
  ToolResultContent: (value) => ({
    message: inputRequired(
      samplingRequest({ messages: [{ role: 'user', content: value }], maxTokens: 10 }),
    ),
    method: 'tools/call',
    dig: (w) =>
      (((asked(w).params as JsonObject).messages as JsonObject[])[0] as JsonObject).content,
  }),
  SamplingMessage: (value) => ({
    message: inputRequired(samplingRequest({ messages: [value], maxTokens: 10 })),
    method: 'tools/call',
    dig: (w) => ((asked(w).params as JsonObject).messages as unknown[])[0],
  }),
  ModelPreferences: (value) => ({
    message: inputRequired(
      samplingRequest({ messages: [], maxTokens: 10, modelPreferences: value }),
    ),
    method: 'tools/call',
    dig: (w) => (asked(w).params as JsonObject).modelPreferences,
  }),
  TextResourceContents: (value) => ({
    message: response({ resultType: 'complete', contents: [value], ...CACHE }),
    method: 'resources/read',
    dig: (w) => (result(w).contents as unknown[])[0],
  }),
  BlobResourceContents: (value) => ({
    message: response({ resultType: 'complete', contents: [value], ...CACHE }),
    method: 'resources/read',
    dig: (w) => (result(w).contents as unknown[])[0],
  }),
  Resource: (value) => ({
    message: response({ resultType: 'complete', resources: [value], ...CACHE }),
    method: 'resources/list',
    dig: (w) => (result(w).resources as unknown[])[0],
  }),
  Tool: (value) => ({
    message: response({ resultType: 'complete', tools: [value], ...CACHE }),
    method: 'tools/list',
    dig: (w) => (result(w).tools as unknown[])[0],
  }),
  Root: (value) => ({
    message: retried({ roots: [value] }),
    dig: (w) => (answered(w).roots as unknown[])[0],
  }),
  ClientCapabilities: (value) => ({
    message: request('tools/list', {}, { ...ENVELOPE_META, [META.clientCapabilities]: value }),
    dig: (w) => (params(w)._meta as JsonObject)[META.clientCapabilities],
  }),
  ServerCapabilities: (value) => ({
    message: response({
      resultType: 'complete',
      supportedVersions: [REVISION],
      capabilities: value,
      ...CACHE,
    }),
    method: 'server/discover',
    dig: (w) => result(w).capabilities,
  }),
  BooleanSchema: (value) => formEmbedding(value),
  NumberSchema: (value) => formEmbedding(value),
  StringSchema: (value) => formEmbedding(value),
  TitledMultiSelectEnumSchema: (value) => formEmbedding(value),
  TitledSingleSelectEnumSchema: (value) => formEmbedding(value),
  UntitledMultiSelectEnumSchema: (value) => formEmbedding(value),
  UntitledSingleSelectEnumSchema: (value) => formEmbedding(value),
  InputRequests: (value) => ({
    message: response({ resultType: 'input_required', inputRequests: value }),
    method: 'tools/call',
    dig: (w) => result(w).inputRequests,
  }),
  InputResponses: (value) => ({
    message: request('tools/call', { name: 'tool', inputResponses: value }),
    dig: (w) => params(w).inputResponses,
  }),
}

function formEmbedding(value: JsonObject): Embedding {
  return { message: inputRequired(formRequest(value)), method: 'tools/call', dig: formField }
}

/** Embedded (2026 input-request) params: where they ride inside an InputRequiredResult. */
const EMBEDDED_PARAMS: Readonly<Record<string, string>> = {
  CreateMessageRequestParams: 'sampling/createMessage',
  ElicitRequestFormParams: 'elicitation/create',
  ElicitRequestURLParams: 'elicitation/create',
}

/** Notification params: the notification that carries them. */
const NOTIFICATION_PARAMS: Readonly<Record<string, string>> = {
  CancelledNotificationParams: 'notifications/cancelled',
  LoggingMessageNotificationParams: 'notifications/message',
  ProgressNotificationParams: 'notifications/progress',
  ResourceUpdatedNotificationParams: 'notifications/resources/updated',
}

/** Standalone request params: a request that carries them (for the validity check). */
const REQUEST_PARAMS: Readonly<Record<string, string>> = {
  CallToolRequestParams: 'tools/call',
  CompleteRequestParams: 'completion/complete',
  GetPromptRequestParams: 'prompts/get',
  PaginatedRequestParams: 'tools/list',
}

function checkEmbedding(embedding: Embedding, example: JsonObject): void {
  const encoded = roundTrip(embedding.message, embedding.method)
  assert.deepEqual(embedding.dig(encoded), example, 'the example comes out intact')
}

function isWholeMessageDef(type: string): boolean {
  const properties = schemaDef(REVISION, type)?.properties as JsonObject | undefined
  return properties !== undefined && 'jsonrpc' in properties
}

function isErrorObjectDef(type: string): boolean {
  const properties = schemaDef(REVISION, type)?.properties as JsonObject | undefined
  return typeof (properties?.code as JsonObject | undefined)?.const === 'number'
}

/** Picks the check for one example type; undefined when no rule knows the type. */
function handlerFor(type: string): ((value: JsonObject) => void) | undefined {
  if (isWholeMessageDef(type)) {
    return (value) => {
      const method = type.endsWith('ResultResponse')
        ? methodOfStem(type, /ResultResponse$/)
        : undefined
      roundTrip(value, method, method === undefined ? value : withCacheHints(value, method))
    }
  }
  // 2026 input requests: method and params, no jsonrpc; they ride in inputRequests.
  if (methodConst(schemaDef(REVISION, type)) !== undefined) {
    return (value) =>
      checkEmbedding({ message: inputRequired(value), method: 'tools/call', dig: asked }, value)
  }
  if (type in REQUEST_PARAMS) {
    return (value) => {
      const before = structuredClone(value)
      const { params: lifted, envelope } = codec.decodeParams(value)
      assert.ok(envelope, 'the example carries the 2026 envelope')
      assert.equal(envelope.protocolVersion, REVISION)
      assert.deepEqual(codec.encodeParams(lifted, envelope), before)
      assert.deepEqual(value, before, 'decodeParams leaves its input untouched')
      const method = REQUEST_PARAMS[type] as string
      roundTrip({ jsonrpc: '2.0', id: 1, method, params: value })
    }
  }
  if (type in NOTIFICATION_PARAMS) {
    return (value) => {
      assert.deepEqual(codec.encodeParams(codec.decodeParams(value).params), value)
      const method = NOTIFICATION_PARAMS[type] as string
      roundTrip({ jsonrpc: '2.0', method, params: value })
    }
  }
  if (type in EMBEDDED_PARAMS) {
    return (value) => {
      assert.deepEqual(codec.decodeParams(value), { params: value }, 'no envelope to lift')
      const method = EMBEDDED_PARAMS[type] as string
      checkEmbedding(
        {
          message: inputRequired({ method, params: value }),
          method: 'tools/call',
          dig: (w) => asked(w).params,
        },
        value,
      )
    }
  }
  if (type === 'InputRequiredResult' || (type.endsWith('Result') && isJsonRpcResult(type))) {
    return (value) => {
      const method = type === 'InputRequiredResult' ? 'tools/call' : methodOfStem(type, /Result$/)
      const before = structuredClone(value)
      const decoded = codec.decodeResult(value)
      assertNeutral({ kind: 'result', id: 0, ...decoded })
      assert.deepEqual(codec.encodeResult(decoded, { method }), before)
      assert.deepEqual(value, before, 'decodeResult leaves its input untouched')
      roundTrip(response(value), method)
    }
  }
  if (type.endsWith('Result')) {
    // 2026 embedded results (ElicitResult, CreateMessageResult, ListRootsResult) carry no
    // resultType: they are never JSON-RPC results, only answers inside a retried request.
    return (value) => checkEmbedding({ message: retried(value), dig: answered }, value)
  }
  if (isErrorObjectDef(type)) {
    return (value) =>
      checkEmbedding(
        {
          message: { jsonrpc: '2.0', id: 'corpus-1', error: value },
          dig: (w) => (w as unknown as { error: unknown }).error,
        },
        value,
      )
  }
  const embed = EMBEDDINGS[type]
  if (embed) return (value) => checkEmbedding(embed(value), value)
  return undefined
}

/**
 * What the codec must emit for an example response. One official example
 * (ReadResourceResultResponse/read-resource-result-response.json) answers a cacheable method
 * without `ttlMs`/`cacheScope`: it validates only through the `InputRequiredResult` branch of the
 * response's anyOf, not as a ReadResourceResult, which requires both. A 2026 server MUST send
 * them, so the codec adds the safe default (stale at once, never shared) and the expected JSON
 * is the example plus exactly those two members.
 */
function withCacheHints(message: JsonObject, method: string): JsonObject {
  const result = message.result as JsonObject
  if (result.resultType !== 'complete' || 'ttlMs' in result || !methodSpec(method)?.cacheable) {
    return message
  }
  const resultDef = resultTypeName(method)
  assert.notDeepEqual(validateDef(REVISION, resultDef, result), [], 'the example lacks hints')
  return { ...message, result: { ...result, ttlMs: 0, cacheScope: 'private' } }
}

function resultTypeName(method: string): string {
  const name = resultDefFor(REVISION, method)
  assert.ok(name, `${method} has a result def`)
  return name
}

/** True when the result def requires `resultType`, i.e. it is a JSON-RPC result in 2026. */
function isJsonRpcResult(type: string): boolean {
  const required = schemaDef(REVISION, type)?.required as string[] | undefined
  return required?.includes('resultType') === true
}

describe(`official ${REVISION} examples`, () => {
  test('has a check for every example type, and only for types that exist', () => {
    const unhandled = [...EXAMPLE_TYPES.keys()].filter((type) => handlerFor(type) === undefined)
    assert.deepEqual(unhandled, [], 'example folders no rule handles')
    const stale = Object.keys(EMBEDDINGS).filter((type) => !EXAMPLE_TYPES.has(type))
    assert.deepEqual(stale, [], 'embeddings for types that have no examples')
    assert.ok(EXAMPLE_TYPES.size >= 88, `found ${EXAMPLE_TYPES.size} example types`)
  })

  for (const [type, examples] of EXAMPLE_TYPES) {
    test(`${type}: every example validates, decodes and re-encodes unchanged`, () => {
      const handler = handlerFor(type)
      assert.ok(handler, `no rule handles ${type}`)
      assert.ok(examples.length > 0, `${type} has examples`)
      for (const { file, value } of examples) {
        assert.deepEqual(validateDef(REVISION, type, value), [], `${file} is a valid ${type}`)
        try {
          handler(value)
        } catch (err) {
          if (err instanceof Error) err.message = `${type}/${file}: ${err.message}`
          throw err
        }
      }
    })
  }
})
