/**
 * The scripted client of `npm run bench:search` (issue 34): what a search-mode client pays in
 * tokens for one task, against full mode, and how often it gets the right tool. A script, not a
 * model. Its rules, all of them:
 *
 * 1. It reads `tools/list` once. Full mode: every tool's definition. Search mode: search_tools
 *    (its guidance, then the names in view within `namesBudget`, or servers and counts past it)
 *    and call_tool.
 * 2. Select (search mode, names in view only): a visible name is a candidate when every word of
 *    its own part (the name without its server's prefix, split as the index splits names:
 *    snake_case, kebab-case, camelCase) is a word of the task's request or of its "verb object"
 *    annotation (lower case, a final "s" ignored). The client selects at most MAX_SELECTED
 *    candidates, those of most words first (then catalogue order).
 * 3. Server: when a word of the request is, as written, the name of a server the description
 *    shows, it sets `server` to it.
 * 4. Query: the task's "verb object" annotation (bench/search/intents.txt), or, for the
 *    comparison rows, the raw request. One query: every task has one need.
 * 5. One search_tools call, `limit` = RESULTS − the number selected: at most RESULTS tools come
 *    back. The task succeeds when a right tool is among them. (Then call_tool would be called;
 *    its arguments and result cost the same in both modes and are not counted.)
 *
 * Tokens (o200k_base, JSON as sent): full mode pays the full tools/list; search mode pays its
 * tools/list, the search_tools call (name and arguments), and its result once (its text, the
 * structured content with the returned definitions as JSON; a host that shows the model both
 * the text and the structured content pays it twice).
 */
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import type { Catalog } from '../../src/catalog/catalog.ts'
import { namesInView } from '../../src/exposure/tool-names.ts'
import { type ServerText, type ToolIndex, words } from '../../src/exposure/tool-search.ts'
import {
  answerSearch,
  askedText,
  type SearchArguments,
  searchModeListing,
  searchResult,
} from '../../src/exposure/tool-search-mode.ts'
import type { JsonObject } from '../../src/protocol/jsonrpc.ts'

/** Tools one search returns at most (select and query together): recall@5's five. */
export const RESULTS = 5
/** Names the client selects at most. */
export const MAX_SELECTED = 2

export interface ClientTask {
  readonly request: string
  readonly intent: string
  readonly right: readonly string[]
}

export interface ClientRun {
  readonly found: boolean
  readonly selected: number
  readonly selectedRight: boolean
  readonly tokens: { readonly list: number; readonly call: number; readonly result: number }
}

const count = (value: unknown) =>
  encode(typeof value === 'string' ? value : JSON.stringify(value)).length

/** A task's words as the select rule reads them: lower case, a final "s" also without it. */
function taskWords(text: string): Set<string> {
  const out = new Set<string>()
  for (const w of words(text)) {
    out.add(w)
    if (w.length > 3 && w.endsWith('s')) out.add(w.slice(0, -1))
  }
  return out
}

/** The catalogue as a search-mode server sees it, with each tool's upstream. */
export function catalogueView(
  tools: readonly JsonObject[],
  serverOf: (t: JsonObject) => ServerText,
  separator = '__',
): Catalog {
  const toolTargets = new Map(
    tools.map((t) => {
      const name = String(t.name)
      const upstream = serverOf(t).name
      return [name, { upstream, original: name.slice(upstream.length + separator.length) }]
    }),
  )
  return {
    tools,
    prompts: [],
    resources: [],
    resourceTemplates: [],
    toolTargets,
    promptTargets: new Map(),
    resourceTargets: new Map(),
    conflicts: [],
    heldBack: [],
  }
}

/** A scripted client over one catalogue, for one names budget and query kind. */
export class ScriptedClient {
  readonly #view: Catalog
  readonly #index: ToolIndex
  readonly #listTokens: number
  readonly #named: boolean
  /** Per visible tool: its full name and its own words. */
  readonly #names: { name: string; own: string[] }[]
  readonly #servers: Set<string>

  readonly budget: number
  readonly query: 'intent' | 'request'

  constructor(view: Catalog, index: ToolIndex, budget: number, query: 'intent' | 'request') {
    this.budget = budget
    this.query = query
    this.#view = view
    this.#index = index
    const names = namesInView(view, budget, count)
    this.#named = names.named
    this.#listTokens = count({ tools: searchModeListing(view, [], names.text).tools })
    this.#names = view.tools.map((t) => {
      const name = String(t.name)
      const target = view.toolTargets.get(name)!
      return { name, own: words(target.original) }
    })
    this.#servers = new Set([...view.toolTargets.values()].map((t) => t.upstream))
  }

  get named(): boolean {
    return this.#named
  }

  get listTokens(): number {
    return this.#listTokens
  }

  async run(task: ClientTask): Promise<ClientRun> {
    const known = taskWords(`${task.request} ${task.intent}`)
    const select = this.#named
      ? this.#names
          .filter((n) => n.own.length > 0 && n.own.every((w) => known.has(w)))
          .sort((a, b) => b.own.length - a.own.length)
          .slice(0, MAX_SELECTED)
          .map((n) => n.name)
      : []
    const written = task.request.toLowerCase().split(/[^a-z0-9]+/)
    const server = written.find((w) => this.#servers.has(w))
    const query = this.query === 'intent' ? task.intent : task.request
    const args: SearchArguments = {
      queries: [query],
      select,
      server,
      limit: RESULTS - select.length,
    }
    const bounds = { maxTerms: 16, maxExpansions: 48, budgetMs: 60_000 }
    const { found, notes } = await answerSearch(
      { view: this.#view, index: this.#index, bounds },
      args,
    )
    const result = searchResult(
      askedText(args),
      found,
      notes.length === 0 ? undefined : notes.join(' '),
    )
    const call = {
      name: 'search_tools',
      arguments: {
        query,
        ...(select.length > 0 ? { select } : {}),
        ...(server !== undefined ? { server } : {}),
        limit: args.limit,
      },
    }
    const names = found.map((f) => String(f.tool.name))
    return {
      found: names.some((n) => task.right.includes(n)),
      selected: select.length,
      selectedRight: select.some((n) => task.right.includes(n)),
      // What the model reads of the result: its text, which is the structured content as JSON
      // (a host gives the model one or the other; one that gives both doubles this).
      tokens: {
        list: this.#listTokens,
        call: count(call),
        result: count(String((result.content as JsonObject[])[0]!.text)),
      },
    }
  }
}
