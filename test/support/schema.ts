/**
 * Validation of JSON values against the official MCP JSON Schemas of each revision, for tests.
 *
 * Tests of anything that emits MCP messages call `assertValidMessage` so that a message Barbican
 * would put on the wire is checked against the normative schema of the revision it claims to
 * speak, not against our own idea of it. The official schemas are vendored in
 * `test/fixtures/spec/<revision>/schema.json` (source and licence in the README there);
 * `BARBICAN_SPEC_DIR` points the tests at another copy.
 */
import { AssertionError } from 'node:assert'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { Revision } from '../../src/protocol/revisions.ts'

/** A JSON Schema definition as it appears in `definitions` / `$defs`. */
type SchemaDef = { [key: string]: unknown }

/** What one revision's schema offers, derived once from the schema itself. */
interface RevisionSchema {
  readonly revision: Revision
  readonly defs: Readonly<Record<string, SchemaDef>>
  /** `definitions` (draft-07) or `$defs` (2020-12). */
  readonly defsKey: 'definitions' | '$defs'
  readonly ajv: Ajv
  readonly validators: Map<string, ValidateFunction>
  /** method → the `*Request` def whose `method` const names it. */
  readonly requestDefs: ReadonlyMap<string, string>
  /** method → the `*Notification` def whose `method` const names it. */
  readonly notificationDefs: ReadonlyMap<string, string>
  /** Error code → defs that pin that code (error objects or whole error responses). */
  readonly errorDefs: ReadonlyMap<number, readonly string[]>
}

/** Where the per-revision schema folders are, resolved once. */
export function specSchemaDir(): string {
  const fromEnv = process.env.BARBICAN_SPEC_DIR
  if (fromEnv) {
    // Accept both the spec folder (holding `schema/`) and the schema folder itself.
    const nested = join(fromEnv, 'schema')
    return existsSync(nested) ? nested : fromEnv
  }
  return fileURLToPath(new URL('../fixtures/spec/', import.meta.url))
}

const SCHEMAS = new Map<Revision, RevisionSchema>()

function addFormats(ajv: Ajv): void {
  // ajv-formats is CommonJS: its default export is the module object or the plugin itself.
  const plugin = addFormatsModule.default ?? addFormatsModule
  plugin(ajv)
}

function load(revision: Revision): RevisionSchema {
  const cached = SCHEMAS.get(revision)
  if (cached) return cached
  const file = join(specSchemaDir(), revision, 'schema.json')
  if (!existsSync(file)) {
    throw new Error(`MCP schema for ${revision} not found at ${file} (set BARBICAN_SPEC_DIR)`)
  }
  const schema = JSON.parse(readFileSync(file, 'utf8')) as SchemaDef
  const defsKey = '$defs' in schema ? '$defs' : 'definitions'
  const defs = schema[defsKey] as Record<string, SchemaDef>
  const dialect2020 = String(schema.$schema).includes('2020-12')
  // strict: false because the schemas carry annotation keywords draft-07 does not know;
  // validateSchema: false because the official schemas are trusted and meta-validation is slow.
  const options = { allErrors: true, strict: false, validateSchema: false } as const
  const ajv = dialect2020 ? new Ajv2020(options) : new Ajv(options)
  addFormats(ajv)
  ajv.addSchema(schema, schemaKey(revision))
  const loaded: RevisionSchema = {
    revision,
    defs,
    defsKey,
    ajv,
    validators: new Map(),
    requestDefs: methodTable(defs, 'Request'),
    notificationDefs: methodTable(defs, 'Notification'),
    errorDefs: errorTable(defs),
  }
  SCHEMAS.set(revision, loaded)
  return loaded
}

function schemaKey(revision: Revision): string {
  return `mcp-${revision}`
}

/**
 * Reads method → def name from the schema's own `method` const values. The unions
 * (`ClientRequest`, `ServerNotification`, …) collapse to a single object when they have one
 * member (2026's `ClientNotification`), so the specific def wins over a union name.
 */
function methodTable(
  defs: Readonly<Record<string, SchemaDef>>,
  suffix: 'Request' | 'Notification',
): Map<string, string> {
  const table = new Map<string, string>()
  const union = new RegExp(`^(Client|Server)${suffix}$`)
  for (const [name, def] of Object.entries(defs)) {
    if (!name.endsWith(suffix)) continue
    const method = methodConst(def)
    if (method === undefined) continue
    const existing = table.get(method)
    if (existing === undefined || union.test(existing)) table.set(method, name)
  }
  return table
}

/** The `method` const of a request or notification def, if it pins one. */
export function methodConst(def: SchemaDef | undefined): string | undefined {
  const properties = def?.properties as Record<string, SchemaDef> | undefined
  const method = properties?.method?.const
  return typeof method === 'string' ? method : undefined
}

/** Error code → defs pinning it: error objects (`code` const) or responses (`error.…code`). */
function errorTable(defs: Readonly<Record<string, SchemaDef>>): Map<number, string[]> {
  const table = new Map<number, string[]>()
  for (const [name, def] of Object.entries(defs)) {
    const properties = def.properties as Record<string, SchemaDef> | undefined
    const code = properties?.code?.const ?? codeConstIn(properties?.error)
    if (typeof code !== 'number') continue
    const list = table.get(code) ?? []
    list.push(name)
    table.set(code, list)
  }
  return table
}

function codeConstIn(schema: SchemaDef | undefined): unknown {
  if (schema === undefined) return undefined
  const direct = (schema.properties as Record<string, SchemaDef> | undefined)?.code?.const
  if (direct !== undefined) return direct
  for (const part of (schema.allOf as SchemaDef[] | undefined) ?? []) {
    const found = codeConstIn(part)
    if (found !== undefined) return found
  }
  return undefined
}

function validatorFor(s: RevisionSchema, defName: string): ValidateFunction {
  let validate = s.validators.get(defName)
  if (validate === undefined) {
    if (!(defName in s.defs)) {
      throw new Error(`MCP ${s.revision} schema has no definition "${defName}"`)
    }
    const found = s.ajv.getSchema(`${schemaKey(s.revision)}#/${s.defsKey}/${defName}`)
    if (found === undefined) throw new Error(`Cannot compile ${defName} of MCP ${s.revision}`)
    validate = found
    s.validators.set(defName, validate)
  }
  return validate
}

function describe(errors: readonly ErrorObject[] | null | undefined): string[] {
  return (errors ?? []).map(
    (e) => `${e.instancePath || '/'} ${e.message ?? e.keyword} ${JSON.stringify(e.params)}`,
  )
}

/** True when `defName` exists in the revision's schema. */
export function hasDef(revision: Revision, defName: string): boolean {
  return defName in load(revision).defs
}

/** The names of every definition in the revision's schema. */
export function defNames(revision: Revision): string[] {
  return Object.keys(load(revision).defs)
}

/** The raw definition, for tests that read the schema itself (e.g. its `method` consts). */
export function schemaDef(revision: Revision, defName: string): SchemaDef | undefined {
  return load(revision).defs[defName]
}

/**
 * Validates `value` against `#/$defs/<defName>` (or `#/definitions/<defName>`) of the
 * revision's schema. Returns readable errors; empty when valid.
 */
export function validateDef(revision: Revision, defName: string, value: unknown): string[] {
  const validate = validatorFor(load(revision), defName)
  return validate(value) ? [] : describe(validate.errors)
}

/** Methods with a standalone `*Request` def in the revision, and that def's name. */
export function requestDefsOf(revision: Revision): ReadonlyMap<string, string> {
  return load(revision).requestDefs
}

/** Methods with a `*Notification` def in the revision, and that def's name. */
export function notificationDefsOf(revision: Revision): ReadonlyMap<string, string> {
  return load(revision).notificationDefs
}

/**
 * True when the def describes a message sent on its own. In 2020-12 revisions every standalone
 * request or notification def declares `jsonrpc`; 2026's embedded input requests
 * (`ElicitRequest`, `CreateMessageRequest`, `ListRootsRequest`) do not. Draft-07 revisions
 * declare `jsonrpc` only on the generic envelope, so there every method def is standalone.
 */
export function isStandaloneDef(revision: Revision, defName: string): boolean {
  const s = load(revision)
  if (s.defsKey === 'definitions') return true
  const properties = s.defs[defName]?.properties as Record<string, unknown> | undefined
  return properties !== undefined && 'jsonrpc' in properties
}

/**
 * The result def answering each method. Results carry no `method`, so this one table is written
 * by hand; a row whose def is missing from a revision means the method has no result there.
 */
const RESULT_DEFS: Readonly<Record<string, string>> = {
  initialize: 'InitializeResult',
  ping: 'EmptyResult',
  'completion/complete': 'CompleteResult',
  'logging/setLevel': 'EmptyResult',
  'resources/list': 'ListResourcesResult',
  'resources/templates/list': 'ListResourceTemplatesResult',
  'resources/read': 'ReadResourceResult',
  'resources/subscribe': 'EmptyResult',
  'resources/unsubscribe': 'EmptyResult',
  'prompts/list': 'ListPromptsResult',
  'prompts/get': 'GetPromptResult',
  'tools/list': 'ListToolsResult',
  'tools/call': 'CallToolResult',
  'sampling/createMessage': 'CreateMessageResult',
  'roots/list': 'ListRootsResult',
  'elicitation/create': 'ElicitResult',
  'tasks/get': 'GetTaskResult',
  'tasks/result': 'GetTaskPayloadResult',
  'tasks/list': 'ListTasksResult',
  'tasks/cancel': 'CancelTaskResult',
  'server/discover': 'DiscoverResult',
  'subscriptions/listen': 'SubscriptionsListenResult',
}

/** The result def for `method` in `revision`, or undefined when the revision has none. */
export function resultDefFor(revision: Revision, method: string): string | undefined {
  const name = RESULT_DEFS[method]
  return name !== undefined && hasDef(revision, name) ? name : undefined
}

/** Context for checking a message: results need the method of the request they answer. */
export interface MessageContext {
  /** The method of the request a result answers. Required for results. */
  readonly method?: string
  /**
   * Accept a request or notification whose method the revision does not define (a custom or
   * experimental method relayed unchanged) by checking only the generic envelope.
   */
  readonly allowCustomMethod?: boolean
}

/**
 * Asserts that `message` is a JSON-RPC message that the given MCP revision allows Barbican to
 * emit: requests against the method's `*Request` def, notifications against its
 * `*Notification` def, results against the answered method's result def inside the revision's
 * response envelope (`input_required` results against `InputRequiredResult`), errors against
 * the error-response def and, where the revision pins the code, the specific error def.
 * Throws an AssertionError naming the revision, the def and the schema errors.
 */
export function assertValidMessage(
  revision: Revision,
  message: unknown,
  context: MessageContext = {},
): void {
  const s = load(revision)
  const checks = checksFor(s, message, context)
  for (const [defName, value] of checks) {
    const errors = validateDef(revision, defName, value)
    if (errors.length > 0) {
      throw new AssertionError({
        message:
          `Not a valid MCP ${revision} message: ${defName} rejects it:\n  ` +
          `${errors.slice(0, 12).join('\n  ')}\nmessage: ${JSON.stringify(message).slice(0, 2000)}`,
        actual: message,
        expected: defName,
        operator: 'assertValidMessage',
      })
    }
  }
}

type Check = readonly [defName: string, value: unknown]

function fail(revision: Revision, text: string, message: unknown): never {
  throw new AssertionError({
    message: `Not a valid MCP ${revision} message: ${text}\nmessage: ${JSON.stringify(message)}`,
    actual: message,
    operator: 'assertValidMessage',
  })
}

function firstDef(s: RevisionSchema, names: readonly string[]): string {
  const found = names.find((n) => n in s.defs)
  if (found === undefined) throw new Error(`MCP ${s.revision} schema has none of ${names}`)
  return found
}

function checksFor(s: RevisionSchema, message: unknown, context: MessageContext): Check[] {
  const { revision } = s
  if (typeof message !== 'object' || message === null || Array.isArray(message)) {
    fail(revision, 'a message must be a JSON object', message)
  }
  const m = message as Record<string, unknown>
  if ('method' in m) {
    const isRequest = 'id' in m
    const method = String(m.method)
    const envelope = firstDef(s, [isRequest ? 'JSONRPCRequest' : 'JSONRPCNotification'])
    const defName = (isRequest ? s.requestDefs : s.notificationDefs).get(method)
    if (defName === undefined) {
      if (context.allowCustomMethod) return [[envelope, m]]
      fail(revision, `no ${isRequest ? 'request' : 'notification'} "${method}" exists`, m)
    }
    if (!isStandaloneDef(revision, defName)) {
      fail(revision, `"${method}" (${defName}) is only embedded, never sent on its own`, m)
    }
    // Draft-07 method defs omit `jsonrpc` and `id`; the generic envelope checks those.
    return [
      [envelope, m],
      [defName, m],
    ]
  }
  if ('result' in m) {
    if (context.method === undefined) {
      fail(revision, 'a result can only be checked knowing the method it answers', m)
    }
    const result = m.result as Record<string, unknown> | undefined
    const inputRequired = result?.resultType === 'input_required'
    let resultDef = inputRequired
      ? firstDef(s, ['InputRequiredResult'])
      : resultDefFor(revision, context.method)
    // 2025-11-25 task-augmented requests are answered with a CreateTaskResult.
    if (!inputRequired && result && 'task' in result && hasDef(revision, 'CreateTaskResult')) {
      resultDef = 'CreateTaskResult'
    }
    if (resultDef === undefined) {
      fail(revision, `no result is defined for "${context.method}"`, m)
    }
    const checks: Check[] = [
      [firstDef(s, ['JSONRPCResultResponse', 'JSONRPCResponse']), m],
      [resultDef, result],
    ]
    // 2026 names the envelope of each method's response (e.g. CallToolResultResponse).
    const named = `${RESULT_DEFS[context.method] ?? ''}Response`
    if (named in s.defs) checks.push([named, m])
    return checks
  }
  if ('error' in m) {
    const envelope = firstDef(s, ['JSONRPCErrorResponse', 'JSONRPCError'])
    let value: Record<string, unknown> = m
    if (m.id === null) {
      // JSON-RPC 2.0 §5 answers an unreadable request with `"id": null`; the MCP schemas do not
      // model that case (legacy ones require a RequestId, newer ones make `id` optional), so
      // check the rest of the message with the id left out or, where required, a stand-in.
      const { id: _null, ...rest } = m
      const required = (s.defs[envelope]?.required as string[] | undefined) ?? []
      value = required.includes('id') ? { ...rest, id: 0 } : rest
    }
    const checks: Check[] = [[envelope, value]]
    const error = m.error as Record<string, unknown> | undefined
    const code = error?.code
    for (const defName of typeof code === 'number' ? (s.errorDefs.get(code) ?? []) : []) {
      const properties = s.defs[defName]?.properties as Record<string, unknown> | undefined
      checks.push([defName, properties && 'error' in properties ? value : error])
    }
    return checks
  }
  fail(revision, 'neither a request, a notification, a result nor an error', m)
}
