/**
 * The tools a virtual server adds to its catalog for some clients, and how calls to them run:
 * `run_code` (`tools.mode: code`, ADR 075) and the tools-only adapters (`adapt: tools-only`,
 * ADR 076). Neither re-implements a method: each step is a request the session dispatches
 * exactly as if the client had sent it (`Dispatch`), so route, pins, policies, confirmation
 * and audit all apply, on behalf of the same caller.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError, jsonRpcCodeOf, toBarbicanError } from '../common/errors.ts'
import type { CodeLimits, ToolExposure } from '../config/config.ts'
import {
  ADAPTED_TOOLS,
  adaptedTools,
  GET_PROMPT,
  getPromptResult,
  LIST_RESOURCES,
  listResourcesResult,
  READ_RESOURCE,
  readResourceResult,
  withExposedUris,
} from '../exposure/adapted-tools.ts'
import { codeFunctions, RUN_CODE, runCodeTool } from '../exposure/code-catalog.ts'
import type { ProgramClock } from '../exposure/code-clock.ts'
import type { HostFunction, IsolateLimits } from '../exposure/code-isolate.ts'
import { runInThread } from '../exposure/code-thread.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'
import { complete } from './local-answers.ts'
import type { ProgramInput } from './program-input.ts'

/**
 * Sends `method` with `params` through the session's full path, as the calling client. A
 * program's call passes its `clock`, held while the client's human is asked something.
 */
export type Dispatch = (
  method: string,
  params: JsonObject,
  signal: AbortSignal,
  clock?: ProgramClock,
) => Promise<Result | ErrorReply>

/** Whether `name` is a tool the exposure adds (it never reaches an upstream). */
export function isExposureTool(exposure: ToolExposure, name: unknown): boolean {
  if (exposure.mode === 'code' && name === RUN_CODE) return true
  return exposure.adapt === 'tools-only' && typeof name === 'string' && ADAPTED_TOOLS.has(name)
}

/** Adapted lists are cached per catalog: a narrowed catalog is a new object, so a new entry. */
const listed = new WeakMap<Catalog, Map<string, readonly JsonObject[]>>()

/** The catalog as `tools/list` shows it: in code mode only `run_code`; tools-only adds three. */
export function exposedCatalog(exposure: ToolExposure, catalog: Catalog): Catalog {
  if (exposure.mode !== 'code' && exposure.adapt === undefined) return catalog
  const key = `${exposure.mode}/${exposure.adapt ?? ''}`
  let byKey = listed.get(catalog)
  if (byKey === undefined) {
    byKey = new Map()
    listed.set(catalog, byKey)
  }
  let tools = byKey.get(key)
  if (tools === undefined) {
    const base =
      exposure.mode === 'code' ? [runCodeTool(catalog, codeFunctions(catalog))] : catalog.tools
    tools = exposure.adapt === 'tools-only' ? [...base, ...adaptedTools(catalog)] : base
    byKey.set(key, tools)
  }
  return { ...catalog, tools }
}

/**
 * A tool result after the call: with `adapt: tools-only`, resource links and embedded resources
 * name the URI `read_resource` reads them by on this server.
 */
export function adaptToolResult(
  server: VirtualServer,
  upstream: string,
  reply: Result | ErrorReply,
): Result | ErrorReply | Promise<Result | ErrorReply> {
  // Decided without a promise: most servers adapt nothing, and every call passes here.
  if (server.exposure.adapt !== 'tools-only' || reply.kind !== 'result') return reply
  return withExposedResultUris(server, upstream, reply)
}

async function withExposedResultUris(
  server: VirtualServer,
  upstream: string,
  reply: Result,
): Promise<Result> {
  const result = await withExposedUris(reply.result, (uri) => server.exposedUri(upstream, uri))
  return result === reply.result ? reply : { ...reply, result }
}

/**
 * `dispatch` with a refusal or routing failure (thrown by a policy or the route) as the error
 * reply the client would have got; cancellation and internal failures still throw.
 */
function replying(dispatch: Dispatch): Dispatch {
  return async (method, params, signal, clock) => {
    try {
      return await dispatch(method, params, signal, clock)
    } catch (err) {
      const e = toBarbicanError(err)
      if (e.code === 'ERR_INTERNAL' || e.code === 'ERR_CANCELLED') throw err
      return { kind: 'error', id: null, code: jsonRpcCodeOf(e.code), message: e.message }
    }
  }
}

/**
 * Runs a call to one of the exposure's own tools. `input`: how a program's call gets the input
 * it needs from the client (a 2026-07-28 client's held rounds); absent, such a call fails.
 */
export async function callExposureTool(
  server: VirtualServer,
  /** The caller's view of the catalogue (what their `tools/list` shows), or its refusal. */
  view: () => Promise<Catalog | ErrorReply>,
  params: JsonObject | undefined,
  sent: Dispatch,
  signal: AbortSignal,
  input?: ProgramInput,
): Promise<Result> {
  const dispatch = replying(sent)
  const name = params?.name
  const args = params?.arguments === undefined ? {} : params.arguments
  if (!isPlainObject(args)) {
    throw new BarbicanError(
      'ERR_INVALID_PARAMS',
      `The arguments of ${String(name)} must be an object`,
    )
  }
  switch (name) {
    case RUN_CODE: {
      // Only the tools the caller may call exist for the program: hidden and quarantined ones
      // are not even names it could enumerate.
      const catalog = await view()
      if (!('tools' in catalog)) return toolError(catalog)
      return await runCode(server, catalog, args, dispatch, signal, input)
    }
    case LIST_RESOURCES:
      return await listResources(args, dispatch, signal)
    case READ_RESOURCE: {
      const uri = args.uri
      if (typeof uri !== 'string') {
        throw new BarbicanError('ERR_INVALID_PARAMS', 'read_resource needs a "uri" string')
      }
      const read = await dispatch('resources/read', { uri }, signal)
      return read.kind === 'error' ? toolError(read) : complete(readResourceResult(read.result))
    }
    case GET_PROMPT: {
      const prompt = args.name
      if (typeof prompt !== 'string') {
        throw new BarbicanError('ERR_INVALID_PARAMS', 'get_prompt needs a "name" string')
      }
      const given = args.arguments
      if (given !== undefined && !isPlainObject(given)) {
        throw new BarbicanError('ERR_INVALID_PARAMS', 'get_prompt "arguments" must be an object')
      }
      const got = await dispatch(
        'prompts/get',
        { name: prompt, ...(given === undefined ? {} : { arguments: given }) },
        signal,
      )
      return got.kind === 'error' ? toolError(got) : complete(getPromptResult(got.result))
    }
    default:
      throw new BarbicanError('ERR_INTERNAL', `${String(name)} is not an exposure tool`)
  }
}

/** Templates come with the first page; a later page (a cursor) lists resources only. */
async function listResources(
  args: JsonObject,
  dispatch: Dispatch,
  signal: AbortSignal,
): Promise<Result> {
  const cursor = args.cursor
  if (cursor !== undefined && typeof cursor !== 'string') {
    throw new BarbicanError('ERR_INVALID_PARAMS', 'list_resources "cursor" must be a string')
  }
  const page = await dispatch('resources/list', cursor === undefined ? {} : { cursor }, signal)
  if (page.kind === 'error') return toolError(page)
  let templates: unknown[] | undefined
  if (cursor === undefined) {
    const listedTemplates = await dispatch('resources/templates/list', {}, signal)
    if (listedTemplates.kind === 'error') return toolError(listedTemplates)
    const items = listedTemplates.result.resourceTemplates
    templates = Array.isArray(items) ? items : []
  }
  return complete(listResourcesResult(page.result, templates))
}

/** A refusal or failure of the method a tool stands for, as a tool error the model can read. */
function toolError(reply: ErrorReply): Result {
  return complete({
    content: [{ type: 'text', text: `Error ${reply.code}: ${reply.message}` }],
    isError: true,
  })
}

/** The isolate's limits from the virtual server's configuration. */
function isolateLimits(limits: CodeLimits): IsolateLimits {
  return {
    memoryBytes: limits.memoryMb * 1024 * 1024,
    stackBytes: 512 * 1024,
    timeoutMs: limits.timeoutMs,
    maxCalls: limits.maxCalls,
    maxOutputBytes: limits.maxOutputKb * 1024,
  }
}

/**
 * `run_code`: runs the program with one host function per tool of the caller's view, each a
 * `tools/call` through `dispatch`. QuickJS is loaded at the first program (lazy-deps.ts).
 */
async function runCode(
  server: VirtualServer,
  catalog: Catalog,
  args: JsonObject,
  dispatch: Dispatch,
  signal: AbortSignal,
  input: ProgramInput | undefined,
): Promise<Result> {
  const code = args.code
  if (typeof code !== 'string') {
    throw new BarbicanError('ERR_INVALID_PARAMS', 'run_code needs a "code" string')
  }
  const limits = server.exposure.code
  // Each run holds its own instance and memory: a server runs at most maxConcurrent at once.
  const running = runningPrograms.get(server) ?? 0
  if (running >= limits.maxConcurrent) {
    const busy = new BarbicanError(
      'ERR_CODE_LIMIT',
      `${running} programs are already running on this server (code.maxConcurrent); try again`,
      { data: { limit: 'maxConcurrent', value: limits.maxConcurrent } },
    )
    return complete({
      content: [{ type: 'text', text: `${busy.code}: ${busy.message}` }],
      isError: true,
    })
  }
  runningPrograms.set(server, running + 1)
  try {
    return await runProgram(code, limits, catalog, dispatch, signal, input)
  } finally {
    runningPrograms.set(server, (runningPrograms.get(server) ?? 1) - 1)
  }
}

/** Programs running now, per virtual server. */
const runningPrograms = new WeakMap<VirtualServer, number>()

/** One program in its own isolate, with one host function per tool; its tool result. */
async function runProgram(
  code: string,
  limits: CodeLimits,
  catalog: Catalog,
  dispatch: Dispatch,
  signal: AbortSignal,
  input: ProgramInput | undefined,
): Promise<Result> {
  const functions = new Map<string, Map<string, HostFunction>>()
  for (const fn of codeFunctions(catalog)) {
    const space = functions.get(fn.namespace) ?? new Map<string, HostFunction>()
    functions.set(fn.namespace, space)
    space.set(fn.name, async (toolArgs, callSignal, clock) => {
      if (!isPlainObject(toolArgs)) throw new Error(`${fn.namespace}.${fn.name} takes an object`)
      const params: JsonObject = { name: fn.tool, arguments: toolArgs }
      let reply = await dispatch('tools/call', params, callSignal, clock)
      if (input && reply.kind === 'result' && reply.resultType === 'input_required') {
        // The client is asked (run_code's own round); the call is retried with its answers.
        const retry = (again: JsonObject) => dispatch('tools/call', again, callSignal, clock)
        reply = await input.relay(reply, params, retry, clock, callSignal)
      }
      return programValue(fn.tool, reply)
    })
  }
  const outcome = await runInThread(code, functions, isolateLimits(limits), signal)
  const content: JsonObject[] = []
  if (outcome.logs.length > 0) content.push({ type: 'text', text: outcome.logs.join('\n') })
  if (outcome.error) {
    const { code: errorCode, message } = outcome.error
    content.push({ type: 'text', text: `${errorCode}: ${message}` })
  } else if (outcome.value !== undefined) {
    content.push({ type: 'text', text: outcome.value })
  }
  if (outcome.truncated) {
    content.push({
      type: 'text',
      text: `(output cut at ${limits.maxOutputKb} KiB: servers.NAME.code.maxOutputKb)`,
    })
  }
  if (content.length === 0) content.push({ type: 'text', text: '(no output)' })
  return complete({
    content,
    ...(outcome.error ? { isError: true } : {}),
    _meta: { 'dev.barbican/code': { calls: outcome.calls } },
  })
}

/**
 * What a tool call gives the program: structuredContent, else the text of an all-text result,
 * else its content blocks. A refusal, a failure or a tool error rejects with its text; so does a
 * result that still needs the client's input when nobody can relay it (fail closed).
 */
function programValue(tool: string, reply: Result | ErrorReply): unknown {
  if (reply.kind === 'error') throw new Error(`${tool}: error ${reply.code}: ${reply.message}`)
  if (reply.resultType !== 'complete') {
    throw new Error(
      `${tool} needs the client's input (${reply.resultType}), which a program cannot give: ` +
        'call the tool directly',
    )
  }
  const result = reply.result
  const content = Array.isArray(result.content) ? result.content : []
  const allText = content.every((c) => isPlainObject(c) && c.type === 'text')
  const text = allText ? content.map((c) => String((c as JsonObject).text)).join('\n') : undefined
  if (result.isError === true) throw new Error(`${tool}: ${text ?? JSON.stringify(content)}`)
  if (result.structuredContent !== undefined) return result.structuredContent
  return text ?? content
}
