/**
 * `tools.mode: search` (ADR 070): a virtual server lists two meta-tools, `search_tools` and
 * `call_tool`, plus the tools the operator pinned, instead of its whole catalogue. This module
 * holds what the mode is: the meta-tools' definitions, the listing, and the meta-tools'
 * arguments and results. The session runs them: a search over the caller's own view of the
 * catalogue, a call as the direct `tools/call` it stands for.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import type { ToolExposure } from '../config/config.ts'
import { DEFAULT_NAMES_BUDGET } from '../config/defaults.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { namesInView } from './tool-names.ts'
import type { SearchBounds, ToolIndex } from './tool-search.ts'
import { loadTokenCounter } from './tool-tokens.ts'

export const SEARCH_TOOLS = 'search_tools'
export const CALL_TOOL = 'call_tool'

/** Results a search returns when the caller gives no `limit`, and the most it may ask for. */
export const DEFAULT_SEARCH_LIMIT = 8
export const MAX_SEARCH_LIMIT = 50
/** The longest query accepted, in characters. */
export const MAX_QUERY_LENGTH = 1000

/** The most queries one search_tools call may make, and names it may select. */
export const MAX_QUERIES = 8

/**
 * How to search, said to the model (issue 34): short "verb object" keywords rank best (the
 * index matches words, not intent), a server named narrows, one query per need. Its cost in
 * tokens is measured by `npm run bench:search` (docs/context-economy.md).
 */
export const SEARCH_GUIDANCE =
  'Finds the tools of this server and returns their full definitions; call one with ' +
  'call_tool. If a name below fits, pass it in "select" to load it at once. Otherwise query ' +
  'with short "verb object" keywords ("merge pull request", "list pods"), not a whole ' +
  'sentence; set "server" when you know it; for several needs, one query each in "queries".'

const SEARCH_TOOLS_INPUT: JsonObject = {
  type: 'object',
  properties: {
    query: { type: 'string', description: 'Keywords: a verb and an object.' },
    queries: {
      type: 'array',
      items: { type: 'string' },
      maxItems: MAX_QUERIES,
      description: 'Several queries at once, one per need; results are merged.',
    },
    select: {
      type: 'array',
      items: { type: 'string' },
      maxItems: MAX_SEARCH_LIMIT,
      description: 'Exact full tool names whose definitions to return.',
    },
    server: { type: 'string', description: "Only this server's tools." },
    limit: {
      type: 'integer',
      minimum: 1,
      maximum: MAX_SEARCH_LIMIT,
      description: `How many tools to return (default ${DEFAULT_SEARCH_LIMIT}).`,
    },
  },
}

/** `search_tools` as listed; `names`: the names in view (tool-names.ts), when shown. */
export function searchToolsDefinition(names?: string): JsonObject {
  return {
    name: SEARCH_TOOLS,
    title: 'Search tools',
    description: names === undefined ? SEARCH_GUIDANCE : `${SEARCH_GUIDANCE}\n\n${names}`,
    inputSchema: SEARCH_TOOLS_INPUT,
    annotations: { readOnlyHint: true, openWorldHint: false },
  }
}

const CALL_TOOL_DEFINITION: JsonObject = {
  name: CALL_TOOL,
  title: 'Call a tool',
  description: 'Calls a tool by its full name, with the arguments its inputSchema asks for.',
  inputSchema: {
    type: 'object',
    properties: {
      name: { type: 'string', description: "The tool's full name." },
      arguments: { type: 'object', description: "The tool's arguments." },
    },
    required: ['name'],
  },
}

/**
 * The tools a search-mode server lists: the meta-tools, then the pinned ones the view holds.
 * `names`: the names in view for search_tools' description (tool-names.ts); absent, none.
 */
export function searchModeListing(
  view: Catalog,
  pinned: readonly string[],
  names?: string,
): Catalog {
  const wanted = new Set(pinned)
  const kept = view.tools.filter((t) => typeof t.name === 'string' && wanted.has(t.name))
  return { ...view, tools: [searchToolsDefinition(names), CALL_TOOL_DEFINITION, ...kept] }
}

/**
 * The search-mode listing of `view` (the caller's narrowed catalog) with the names in view in
 * search_tools' description, within the server's names budget (ADR 126). Loads the
 * tokenizer at the first listing (tool-tokens.ts).
 */
export async function searchModeTools(
  view: Catalog,
  exposure: Pick<ToolExposure, 'pinned' | 'namesBudget'>,
): Promise<Catalog> {
  const count = await loadTokenCounter()
  const budget = exposure.namesBudget ?? DEFAULT_NAMES_BUDGET
  const names = namesInView(view, budget, count, (name) => reachable({ name }))
  return searchModeListing(view, exposure.pinned, names.text)
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
  /** The queries, in the order given (`query` first, then `queries`), distinct. */
  readonly queries: readonly string[]
  /** Exact names whose definitions to return, in the order given, distinct. */
  readonly select: readonly string[]
  /** Only this server's tools (an upstream name), for the queries. */
  readonly server?: string | undefined
  /** Most tools the queries add after the selected ones. */
  readonly limit: number
}

/**
 * `search_tools` arguments, checked: at least a query or a name to select; the queries' total
 * length at most MAX_QUERY_LENGTH, at most MAX_QUERIES of them; at most `maxResults` names
 * selected and tools asked for (`limit`, limits.searchMaxResults).
 */
export function searchArguments(args: unknown, maxResults = MAX_SEARCH_LIMIT): SearchArguments {
  const given = isPlainObject(args) ? args : {}
  const { query, queries, select, server, limit } = given
  if (query !== undefined && typeof query !== 'string') {
    throw badArguments('search_tools "query" must be a string')
  }
  const asked = [
    ...(query === undefined ? [] : [query]),
    ...stringList(queries, 'queries', MAX_QUERIES),
  ]
    .map((q) => q.trim())
    .filter((q) => q !== '')
  const selected = stringList(select, 'select', maxResults)
  if (asked.length === 0 && selected.length === 0) {
    throw badArguments(
      'search_tools needs a non-empty "query" (or "queries"), or tool names to "select"',
    )
  }
  const distinct = [...new Set(asked)]
  if (distinct.length > MAX_QUERIES) {
    throw badArguments(`search_tools takes at most ${MAX_QUERIES} queries`)
  }
  if (distinct.reduce((n, q) => n + q.length, 0) > MAX_QUERY_LENGTH) {
    throw badArguments(`search_tools queries are longer than ${MAX_QUERY_LENGTH} characters in all`)
  }
  if (server !== undefined && (typeof server !== 'string' || server === '')) {
    throw badArguments('search_tools "server" must be a server name')
  }
  const base = { queries: distinct, select: [...new Set(selected)], server }
  if (limit === undefined) return { ...base, limit: DEFAULT_SEARCH_LIMIT }
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1) {
    throw badArguments('search_tools "limit" must be a positive integer')
  }
  if (limit > maxResults) {
    throw badArguments(
      `search_tools "limit" must be at most ${maxResults} (limits.searchMaxResults)`,
    )
  }
  return { ...base, limit }
}

function stringList(value: unknown, field: string, most: number): string[] {
  if (value === undefined) return []
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) {
    throw badArguments(`search_tools "${field}" must be an array of strings`)
  }
  if (value.length > most) {
    throw badArguments(`search_tools "${field}" takes at most ${most} entries`)
  }
  return value as string[]
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

/** One tool of a search's answer, and what asked for it: a query, or `select`. */
export interface Found {
  readonly tool: JsonObject
  readonly answered: string
}

/** What `select` answers for: its tools are tagged with this instead of a query. */
export const SELECTED = 'select'

/**
 * The `search_tools` result, as structured content: the tools whole (`tools`, best first) and,
 * in the same order, what each answered (`answered`: its query, or "select"), and a `note` when
 * something was left out or nothing matched. The text block is that same object as JSON, as
 * MCP asks of structured results (ADR 126): hosts differ in which of the two they give the
 * model (some only the text, some only the structured content), and a summary in the text
 * would leave a model without the definitions it searched for.
 */
export function searchResult(asked: string, found: readonly Found[], note?: string): JsonObject {
  const none = found.length === 0 ? `No tool matches ${asked}.` : undefined
  const said = [none, note].filter((n) => n !== undefined).join(' ')
  const structured: JsonObject = {
    tools: found.map((f) => f.tool),
    answered: found.map((f) => f.answered),
    ...(said === '' ? {} : { note: said }),
  }
  return {
    content: [{ type: 'text', text: JSON.stringify(structured) }],
    structuredContent: structured,
  }
}

function badArguments(message: string): BarbicanError {
  return new BarbicanError('ERR_META_TOOL_ARGUMENTS', message)
}

/** What a search-mode server's search needs of the caller's view and the catalogue's index. */
export interface SearchScope {
  /** The caller's view: the tools a `tools/list` of theirs would show in `all` mode. */
  readonly view: Catalog
  readonly index: ToolIndex
  readonly bounds: SearchBounds
}

/** A search's tools, and what it tells the model about what it could not do. */
export interface SearchAnswer {
  readonly found: Found[]
  readonly notes: string[]
}

/**
 * Answers `search_tools`: first the selected tools the view holds (exact names, in the order
 * given), then up to `limit` tools the queries find, merged round-robin (each query's best,
 * then each one's second…) so that every need gets its share, without repeats, each tagged with
 * the first query that found it. Only tools of the view are ever returned or named: a selected
 * name the caller may not call is reported exactly as one that does not exist. The queries
 * share the search's ranking time (`bounds.budgetMs`, main-thread time as searchBounded counts
 * it); those it leaves no time for are named.
 */
export async function answerSearch(
  { view, index, bounds }: SearchScope,
  args: SearchArguments,
): Promise<SearchAnswer> {
  const notes: string[] = []
  const callable = new Map<string, JsonObject>()
  for (const tool of view.tools) {
    if (typeof tool.name === 'string' && reachable(tool)) callable.set(tool.name, tool)
  }
  const found: Found[] = []
  const taken = new Set<string>()
  const missing: string[] = []
  for (const name of args.select) {
    const tool = callable.get(name)
    if (tool === undefined) missing.push(name)
    else if (!taken.has(name)) {
      taken.add(name)
      found.push({ tool, answered: SELECTED })
    }
  }
  if (missing.length > 0) notes.push(missingNote(missing, callable))
  const upstreamOf = (name: unknown) => view.toolTargets.get(String(name))?.upstream ?? undefined
  const { server } = args
  if (server !== undefined && ![...callable.keys()].some((n) => upstreamOf(n) === server)) {
    const servers = [...new Set([...callable.keys()].map(upstreamOf))].filter((s) => s)
    notes.push(`No server "${server}" here; servers: ${servers.join(', ')}.`)
  }
  const visible = (tool: JsonObject) =>
    typeof tool.name === 'string' &&
    callable.get(tool.name) !== undefined &&
    (server === undefined || upstreamOf(tool.name) === server)
  const lists: { query: string; tools: JsonObject[] }[] = []
  const skipped: string[] = []
  let spent = 0
  let droppedWords = false
  let cutShort = false
  for (const query of args.queries) {
    if (spent >= bounds.budgetMs) {
      skipped.push(query)
      continue
    }
    const one = await index.searchBounded(
      query,
      args.limit + taken.size,
      { ...bounds, budgetMs: bounds.budgetMs - spent },
      visible,
    )
    spent += one.spentMs
    droppedWords ||= one.droppedWords > 0
    cutShort ||= one.cutShort
    lists.push({ query, tools: one.tools })
  }
  let added = 0
  for (let rank = 0; added < args.limit && lists.some((l) => rank < l.tools.length); rank++) {
    for (const { query, tools } of lists) {
      const tool = tools[rank]
      if (tool === undefined || added >= args.limit) continue
      const name = String(tool.name)
      if (taken.has(name)) continue
      taken.add(name)
      found.push({ tool: callable.get(name) ?? tool, answered: query })
      added++
    }
  }
  if (droppedWords) {
    notes.push(
      `Only the first ${bounds.maxTerms} distinct words of a query were searched (limits.searchMaxTerms).`,
    )
  }
  if (cutShort || skipped.length > 0) {
    notes.push(
      `The search was cut short after ${bounds.budgetMs} ms (limits.searchBudgetMs)` +
        (skipped.length > 0 ? `; not searched: ${skipped.map((q) => `"${q}"`).join(', ')}` : '') +
        '; shorter queries search every word.',
    )
  }
  return { found, notes }
}

/** Selected names the view does not hold, with the view's names they may have meant. */
function missingNote(missing: readonly string[], callable: ReadonlyMap<string, JsonObject>) {
  const parts = missing.map((name) => {
    const like = [...callable.keys()].filter((n) => n !== name && n.endsWith(name)).slice(0, 3)
    return like.length === 0 ? `"${name}"` : `"${name}" (did you mean ${like.join(', ')}?)`
  })
  return `No tool of yours is named ${parts.join(', ')}.`
}

/** How a search's answer names what was asked: its queries and selection. */
export function askedText(args: SearchArguments): string {
  const parts = args.queries.map((q) => `"${q}"`)
  if (args.select.length > 0) parts.push(`select ${args.select.join(', ')}`)
  return parts.join(', ')
}
