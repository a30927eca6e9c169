/**
 * `tools.mode: search` (ADR 070): a virtual server lists two meta-tools, `search_tools` and
 * `call_tool`, plus the tools the operator pinned, instead of its whole catalogue. This module
 * holds what the mode is: the meta-tools' definitions, the listing, and the meta-tools'
 * arguments and results. The session runs them: a search over the caller's own view of the
 * catalogue, a call as the direct `tools/call` it stands for.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'

export const SEARCH_TOOLS = 'search_tools'
export const CALL_TOOL = 'call_tool'

/** Results a search returns when the caller gives no `limit`, and the most it may ask for. */
export const DEFAULT_SEARCH_LIMIT = 8
export const MAX_SEARCH_LIMIT = 50
/** The longest query accepted, in characters. */
export const MAX_QUERY_LENGTH = 1000

const SEARCH_TOOLS_DEFINITION: JsonObject = {
  name: SEARCH_TOOLS,
  title: 'Search tools',
  description:
    'Finds the tools of this server that fit a task, best match first. Describe what you want ' +
    'to do in plain words; each result is a full tool definition. Call a result with call_tool.',
  inputSchema: {
    type: 'object',
    properties: {
      query: { type: 'string', description: 'What you want to do, in plain words.' },
      limit: {
        type: 'integer',
        minimum: 1,
        maximum: MAX_SEARCH_LIMIT,
        description: `How many tools to return (default ${DEFAULT_SEARCH_LIMIT}).`,
      },
    },
    required: ['query'],
  },
  annotations: { readOnlyHint: true, openWorldHint: false },
}

const CALL_TOOL_DEFINITION: JsonObject = {
  name: CALL_TOOL,
  title: 'Call a tool',
  description:
    'Calls a tool found with search_tools by its name, with the arguments its inputSchema asks for.',
  inputSchema: {
    type: 'object',
    properties: {
      name: { type: 'string', description: 'The tool name, as search_tools returned it.' },
      arguments: { type: 'object', description: "The tool's arguments." },
    },
    required: ['name'],
  },
}

/** The tools a search-mode server lists: the meta-tools, then the pinned ones the view holds. */
export function searchModeListing(view: Catalog, pinned: readonly string[]): Catalog {
  const wanted = new Set(pinned)
  const kept = view.tools.filter((t) => typeof t.name === 'string' && wanted.has(t.name))
  return { ...view, tools: [SEARCH_TOOLS_DEFINITION, CALL_TOOL_DEFINITION, ...kept] }
}

/** Which meta-tool a `tools/call` names, if any. */
export function metaToolOf(params: JsonObject | undefined): 'search' | 'call' | undefined {
  const name = params?.name
  if (name === SEARCH_TOOLS) return 'search'
  if (name === CALL_TOOL) return 'call'
  return undefined
}

/** Whether a catalogue tool can be reached through `call_tool` (meta-tool names cannot). */
export function reachable(tool: JsonObject): boolean {
  return tool.name !== SEARCH_TOOLS && tool.name !== CALL_TOOL
}

export interface SearchArguments {
  readonly query: string
  readonly limit: number
}

/** `search_tools` arguments, checked; `maxResults`: the largest `limit` (limits.searchMaxResults). */
export function searchArguments(args: unknown, maxResults = MAX_SEARCH_LIMIT): SearchArguments {
  const given = isPlainObject(args) ? args : {}
  const { query, limit } = given
  if (typeof query !== 'string' || query.trim() === '') {
    throw badArguments('search_tools needs a non-empty "query" string')
  }
  if (query.length > MAX_QUERY_LENGTH) {
    throw badArguments(`search_tools "query" is longer than ${MAX_QUERY_LENGTH} characters`)
  }
  if (limit === undefined) return { query, limit: DEFAULT_SEARCH_LIMIT }
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
    throw badArguments('search_tools "limit" must be a positive integer')
  }
  if (limit > maxResults) {
    throw badArguments(
      `search_tools "limit" must be at most ${maxResults} (limits.searchMaxResults)`,
    )
  }
  return { query, limit }
}

/**
 * The direct `tools/call` params a `call_tool` call stands for: the named tool, its arguments,
 * and the call's own `_meta` (progress token, the 2026 envelope) and task request.
 */
export function directCallParams(params: JsonObject | undefined): JsonObject {
  const args = isPlainObject(params?.arguments) ? params.arguments : {}
  const { name, arguments: inner } = args
  if (typeof name !== 'string' || name === '') {
    throw badArguments('call_tool needs the "name" of the tool to call')
  }
  if (name === SEARCH_TOOLS || name === CALL_TOOL) {
    throw new BarbicanError('ERR_META_TOOL_NESTED', `call_tool cannot call the meta-tool ${name}`, {
      data: { tool: name },
    })
  }
  if (inner !== undefined && !isPlainObject(inner)) {
    throw badArguments('call_tool "arguments" must be an object')
  }
  const direct: JsonObject = { ...params, name }
  if (inner === undefined) delete direct.arguments
  else direct.arguments = inner
  return direct
}

/** The `search_tools` result: a text summary and the tools as structured content. */
export function searchResult(
  query: string,
  tools: readonly JsonObject[],
  note?: string,
): JsonObject {
  const lines = tools.map((t) => {
    const description = typeof t.description === 'string' ? firstSentence(t.description) : ''
    return description === '' ? `- ${String(t.name)}` : `- ${String(t.name)}: ${description}`
  })
  const text =
    tools.length === 0
      ? `No tool matches "${query}".`
      : `${tools.length} tool(s) for "${query}", best first; call one with call_tool:\n${lines.join('\n')}`
  return {
    content: [{ type: 'text', text: note === undefined ? text : `${text}\n${note}` }],
    structuredContent: { tools: [...tools], ...(note === undefined ? {} : { note }) },
  }
}

function firstSentence(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim()
  const end = flat.search(/[.!?](\s|$)/)
  const sentence = end === -1 ? flat : flat.slice(0, end + 1)
  return sentence.length > 160 ? `${sentence.slice(0, 157)}...` : sentence
}

function badArguments(message: string): BarbicanError {
  return new BarbicanError('ERR_META_TOOL_ARGUMENTS', message)
}
