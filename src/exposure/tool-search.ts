/**
 * Ranks a virtual server's tools for a natural-language query (`search_tools`, ADR 070).
 *
 * BM25 (MiniSearch's BM25+) over fields with their own boosts: the tool's name split into words
 * (`read_file`, `getPullRequest`), the lead of its description, and its server (upstream name,
 * title and description); the rest of long descriptions and the parameters' text can be weighed
 * in too, and Porter stemming switched on, but both measured worse on the benchmark's
 * development half. The query also looks for the synonyms of its words
 * (tool-search-synonyms.ts) at a lower weight, and for prefixes and near-misses of longer
 * words. A second stage (tool-search-rerank.ts) re-orders the best 20 by how much of the query
 * each tool covers anywhere (parameters and whole description included), each word weighed by
 * its idf, and favours the tools of a server the query names ("on GitHub"). One index per
 * catalog object: a catalog is rebuilt when any list changes, so the index follows it.
 */
import MiniSearch, { type SearchResult } from 'minisearch'
import type { Catalog } from '../catalog/catalog.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { type AskedWord, HeadRerank, type RerankTuning } from './tool-search-rerank.ts'
import { synonymsOf } from './tool-search-synonyms.ts'

/** What one search may cost (limits.search*, docs/security.md, ADR 105). */
export interface SearchBounds {
  /** Most distinct query words searched; later ones are left out. */
  readonly maxTerms: number
  /** Most synonyms added to the query's words, in all. */
  readonly maxExpansions: number
  /** Ranking time (ms, on the main thread) after which the remaining words are skipped. */
  readonly budgetMs: number
}

/** A bounded search's tools, and what its bounds left out. */
export interface BoundedSearch {
  readonly tools: JsonObject[]
  /** Query words searched (or meant to be, when cut short). */
  readonly words: number
  /** Distinct words beyond `maxTerms`, not searched. */
  readonly droppedWords: number
  /** Synonyms beyond `maxExpansions`, not searched. */
  readonly droppedExpansions: number
  /** True when the time budget ran out before every word was searched. */
  readonly cutShort: boolean
  /** Ranking time spent on the main thread (ms), waits for a turn and between slices aside. */
  readonly spentMs: number
}

interface QueryPlan {
  /** The query's own words searched, in order. */
  readonly own: string[]
  /** Per own word: the word, then its synonyms' words. */
  readonly groups: string[][]
  readonly weights: Map<string, number>
  readonly droppedWords: number
  readonly droppedExpansions: number
}

const UNBOUNDED = { maxTerms: Number.POSITIVE_INFINITY, maxExpansions: Number.POSITIVE_INFINITY }

/** Tools indexed before the event loop runs again, when an index is built for a search. */
const BUILD_SLICE = 100

/** Ranking work done before the event loop runs again (ms). */
const SLICE_MS = 3

/**
 * Searches ranking at once in this process: the others wait their turn without holding the
 * main thread, so other clients' requests wait for at most this many slices between two turns
 * of the event loop, however many searches are in flight.
 */
const RANKING_AT_ONCE = 2

/** Turns at ranking: at most RANKING_AT_ONCE searches hold one, the rest wait in order. */
class RankingTurns {
  #running = 0
  readonly #waiting: (() => void)[] = []

  async acquire(): Promise<void> {
    if (this.#running < RANKING_AT_ONCE) {
      this.#running++
      return
    }
    await new Promise<void>((resolve) => this.#waiting.push(resolve))
  }

  release(): void {
    const next = this.#waiting.shift()
    if (next) next()
    else this.#running--
  }

  /** Lets the event loop run (I/O included) before the next slice. */
  yield(): Promise<void> {
    return new Promise((resolve) => setImmediate(resolve))
  }
}

const ranking = new RankingTurns()

/** What the index knows of the server a tool comes from. */
export interface ServerText {
  readonly name: string
  /** The upstream's title, description and instructions, as it gave them. */
  readonly text: string
}

/**
 * How the index analyses tools and queries. The shipped values were chosen on the development
 * half of the benchmark (ADR 070); the benchmark switches parts off to measure what each brings.
 */
export interface SearchTuning {
  /** Each field's weight in the score; a field weighted 0 is not indexed. */
  readonly boosts: Readonly<Record<Field, number>>
  /** How much all the synonyms of one query word count together, against the word itself. */
  readonly synonymWeight: number
  /** Characters of a description indexed as its lead; the rest goes to `details`. */
  readonly leadLength: number
  /** Reduces a word to its stem; absent: words are matched as written (plus prefix, fuzzy). */
  readonly stem?: ((word: string) => string) | undefined
  readonly fuzzy: boolean
  /** Second stage: the best of BM25 re-scored by coverage and named server; see RerankTuning. */
  readonly rerank: RerankTuning
  /** BM25's parameters; absent: MiniSearch's (k 1.2, b 0.7, d 0.5). Measured, not tuned. */
  readonly bm25?: { readonly k: number; readonly b: number; readonly d: number }
  /**
   * More terms for a query's term, sharing `weight` among them (the benchmark's stem classes
   * and co-occurring terms, measured worse; absent in the shipped tuning).
   */
  readonly expansions?: {
    readonly of: (term: string) => readonly string[]
    readonly weight: number
  }
}

type Field = 'name' | 'lead' | 'details' | 'params' | 'server'

export const SHIPPED_TUNING: SearchTuning = {
  // Parameter text and the rest of long descriptions lowered recall on the development half
  // (docs/context-economy.md): weighted 0, they are not indexed.
  boosts: { name: 3, lead: 2, details: 0, params: 0, server: 2 },
  synonymWeight: 0.6,
  leadLength: 200,
  // Porter stemming lowered recall@5 and MRR on the development half: no `stem`.
  fuzzy: true,
  // The re-rank raised dev recall@5 0.821 → 0.832 and MRR 0.681 → 0.710; weighing its words
  // by idf (ADR 140), MRR 0.726 → 0.749 (docs/context-economy.md).
  rerank: { depth: 20, weight: 4, server: 2, idf: true },
}

/** Words too common to tell tools apart. */
const STOP_WORDS = new Set(
  (
    'a an and are as at be by can do does for from i in into is it its me my of on or our please ' +
    'that the their them then there these this those to up us we what when which who will with ' +
    'you your want need some any all'
  ).split(' '),
)

/** Splits text into lower-case words: snake_case, kebab-case, camelCase and digits apart. */
export function words(text: string): string[] {
  return text
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/([A-Z]+)([A-Z][a-z])/g, '$1 $2')
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w.length > 0)
}

/** The indexed form of one word: stop words dropped, the rest lower-cased (and stemmed). */
export function term(word: string, stem?: (word: string) => string): string | null {
  const w = word.toLowerCase()
  if (STOP_WORDS.has(w)) return null
  return stem !== undefined && w.length > 2 ? stem(w) : w
}

interface ToolDocument {
  readonly id: number
  readonly name: string
  readonly lead: string
  readonly details: string
  readonly params: string
  readonly server: string
}

/** The text of a tool's parameters: each property's name, title and description, nested too. */
export function parameterText(schema: unknown, depth = 0): string {
  if (!isPlainObject(schema) || depth > 3) return ''
  const parts: string[] = []
  const properties = schema.properties
  if (isPlainObject(properties)) {
    for (const [name, property] of Object.entries(properties)) {
      parts.push(name)
      if (isPlainObject(property)) {
        if (typeof property.title === 'string') parts.push(property.title)
        if (typeof property.description === 'string') parts.push(property.description)
        parts.push(parameterText(property, depth + 1))
        if (isPlainObject(property.items)) parts.push(parameterText(property.items, depth + 1))
      }
    }
  }
  return parts.filter((p) => p !== '').join(' ')
}

function text(value: unknown): string {
  return typeof value === 'string' ? value : ''
}

/**
 * A description's lead (what the tool does, said first) and the rest (usage notes, examples,
 * caveats). Long descriptions repeat many words; indexed whole, they outrank short, exact ones.
 */
function splitDescription(description: string, leadLength: number): [string, string] {
  if (description.length <= leadLength) return [description, '']
  const cut = description.lastIndexOf(' ', leadLength)
  const at = cut > 0 ? cut : leadLength
  return [description.slice(0, at), description.slice(at)]
}

/** An index over one list of tools; `search` returns the tools themselves, best first. */
export class ToolIndex {
  readonly #tools: readonly JsonObject[]
  readonly #index: MiniSearch<ToolDocument>
  readonly #tuning: SearchTuning
  readonly #term: (word: string) => string | null

  /** `deferred`: the tools are not indexed yet (`build` adds them in slices). */
  constructor(
    tools: readonly JsonObject[],
    serverOf: (tool: JsonObject) => ServerText,
    tuning: SearchTuning = SHIPPED_TUNING,
    deferred = false,
  ) {
    this.#tools = tools
    this.#tuning = tuning
    this.#serverOf = serverOf
    this.#term = (w) => term(w, tuning.stem)
    const fields = (Object.keys(tuning.boosts) as Field[]).filter((f) => tuning.boosts[f] > 0)
    this.#index = new MiniSearch<ToolDocument>({
      fields,
      tokenize: words,
      processTerm: this.#term,
      searchOptions: { boost: { ...tuning.boosts } },
    })
    if (!deferred) this.#index.addAll(tools.map((tool, id) => this.#document(tool, id)))
  }

  /**
   * The index of `tools`, built in slices of BUILD_SLICE tools with the event loop running
   * between them: 3,000 tools take about a second to index, which must not stall every other
   * client at the first search after a list change.
   */
  static async build(
    tools: readonly JsonObject[],
    serverOf: (tool: JsonObject) => ServerText,
    tuning: SearchTuning = SHIPPED_TUNING,
  ): Promise<ToolIndex> {
    const index = new ToolIndex(tools, serverOf, tuning, true)
    for (let start = 0; start < tools.length; start += BUILD_SLICE) {
      const slice = tools.slice(start, start + BUILD_SLICE)
      index.#index.addAll(slice.map((tool, i) => index.#document(tool, start + i)))
      await new Promise((resolve) => setImmediate(resolve))
    }
    return index
  }

  readonly #serverOf: (tool: JsonObject) => ServerText
  /** Each tool's terms, all fields, and its server's, for the second stage. */
  readonly #head = new HeadRerank()

  /** One tool as the index stores it; records its terms for the re-rank, in order. */
  #document(tool: JsonObject, id: number): ToolDocument {
    const tuning = this.#tuning
    const server = this.#serverOf(tool)
    const annotations = isPlainObject(tool.annotations) ? tool.annotations : {}
    const [lead, details] = splitDescription(text(tool.description), tuning.leadLength)
    const document = {
      id,
      name: `${text(tool.name)} ${text(tool.title)} ${text(annotations.title)}`,
      lead,
      details,
      params: parameterText(tool.inputSchema),
      server: `${server.name} ${server.text}`,
    }
    const all = [document.name, lead, details, document.params, document.server].join(' ')
    const terms = (value: string) =>
      words(value)
        .map(this.#term)
        .filter((t) => t !== null)
    this.#head.add(new Set(terms(all)), terms(server.name))
    return document
  }

  get size(): number {
    return this.#tools.length
  }

  /**
   * The `limit` best tools for `query` among those `visible` admits. Each query word counts
   * fully; its synonyms share `synonymWeight` among them. Words of four letters or more also
   * match as prefixes, and words of five or more with one edit in five letters.
   */
  search(
    query: string,
    limit: number,
    visible: (tool: JsonObject) => boolean = () => true,
  ): JsonObject[] {
    return this.ranked(query, visible)
      .slice(0, limit)
      .map((r) => this.#tools[r.id]!)
  }

  /**
   * Every tool `visible` admits that matches `query`, best first, with its position in the list
   * the index was built from and its score (the re-ranked score for the re-ranked head).
   * Unbounded: for the benchmark and small catalogues; calls from clients use `searchBounded`.
   * `feedback`: terms searched besides the query's, each at its weight (the benchmark's).
   */
  ranked(
    query: string,
    visible: (tool: JsonObject) => boolean = () => true,
    feedback: ReadonlyMap<string, number> = new Map(),
  ): { readonly id: number; readonly score: number }[] {
    const plan = this.#plan(query, UNBOUNDED)
    // The benchmark's pseudo-relevance feedback (measured worse): more terms at their weights.
    const added = [...feedback].filter(([t]) => !plan.weights.has(t))
    for (const [t, weight] of added) plan.weights.set(t, weight)
    if (added.length > 0) plan.groups.push(added.map(([t]) => t))
    const results = this.#index.search(plan.groups.flat().join(' '), this.#options(plan, visible))
    return this.#finish(
      results.map((r) => ({ id: r.id as number, score: r.score })),
      query,
      plan.own,
    )
  }

  /**
   * `search` with what one call may cost bounded (ADR 105): at most `maxTerms` distinct words
   * and `maxExpansions` synonyms are searched, in slices of whole words (each with its
   * synonyms) of about SLICE_MS each; the event loop runs between slices, at most
   * RANKING_AT_ONCE searches rank at a time, and once `budgetMs` of ranking time is spent the
   * remaining words are skipped. The scores of the slices add up to
   * those of one search over them all (MiniSearch's OR sums term scores, then multiplies by
   * the number of query terms matched), so a search within its bounds ranks as `search` does.
   */
  async searchBounded(
    query: string,
    limit: number,
    bounds: SearchBounds,
    visible: (tool: JsonObject) => boolean = () => true,
  ): Promise<BoundedSearch> {
    const plan = this.#plan(query, bounds)
    const options = this.#options(plan, visible)
    const sums = new Map<number, { raw: number; terms: Set<string> }>()
    let spent = 0
    let searched = 0
    // Words per slice: one at first, then as many as the last slice's pace fits in SLICE_MS.
    let perSlice = 1
    await ranking.acquire()
    try {
      while (searched < plan.groups.length && spent < bounds.budgetMs) {
        const slice = plan.groups.slice(searched, searched + perSlice)
        const start = performance.now()
        for (const r of this.#index.search(slice.flat().join(' '), options)) {
          const id = r.id as number
          let sum = sums.get(id)
          if (sum === undefined) {
            sum = { raw: 0, terms: new Set() }
            sums.set(id, sum)
          }
          sum.raw += r.score / Math.max(1, r.queryTerms.length)
          for (const t of r.queryTerms) sum.terms.add(t)
        }
        searched += slice.length
        const elapsed = performance.now() - start
        spent += elapsed
        perSlice = Math.max(1, Math.floor((SLICE_MS * slice.length) / Math.max(elapsed, 0.05)))
        if (searched < plan.groups.length) await ranking.yield()
      }
    } finally {
      ranking.release()
    }
    const scored = [...sums].map(([id, { raw, terms }]) => ({ id, score: raw * terms.size }))
    scored.sort((a, b) => b.score - a.score)
    const ranked = this.#finish(scored, query, plan.own)
    return {
      tools: ranked.slice(0, limit).map((r) => this.#tools[r.id]!),
      words: plan.groups.length,
      droppedWords: plan.droppedWords,
      droppedExpansions: plan.droppedExpansions,
      cutShort: searched < plan.groups.length,
      spentMs: spent,
    }
  }

  /**
   * What a query searches: its own words (the first `maxTerms` distinct ones that are not stop
   * words), each in a group with its synonyms (at most `maxExpansions` in all), and the weight
   * of every term: a word's own weight is 1, its synonyms share `synonymWeight`.
   */
  #plan(query: string, bounds: Pick<SearchBounds, 'maxTerms' | 'maxExpansions'>): QueryPlan {
    const all = words(query)
    const weights = new Map<string, number>()
    const own: string[] = []
    const groups: string[][] = []
    let droppedWords = 0
    for (const w of all) {
      const t = this.#term(w)
      if (t === null || weights.has(t)) continue
      if (groups.length >= bounds.maxTerms) {
        droppedWords++
        continue
      }
      weights.set(t, 1)
      own.push(w)
      groups.push([w])
    }
    let expansions = 0
    let droppedExpansions = 0
    if (this.#tuning.synonymWeight > 0) {
      for (const group of groups) {
        const w = group[0]!
        let extra = synonymsOf(w).flatMap(words)
        const room = Math.max(0, bounds.maxExpansions - expansions)
        if (extra.length > room) {
          droppedExpansions += extra.length - room
          extra = extra.slice(0, room)
        }
        expansions += extra.length
        const terms = extra.map(this.#term).filter((t) => t !== null && !weights.has(t))
        const share = this.#tuning.synonymWeight / Math.max(1, Math.sqrt(terms.length))
        for (const t of terms) weights.set(t!, Math.max(weights.get(t!) ?? 0, share))
        group.push(...extra)
      }
    }
    const more = this.#tuning.expansions
    if (more !== undefined) {
      for (const group of groups) {
        const terms = more.of(this.#term(group[0]!) ?? '').filter((t) => !weights.has(t))
        const share = more.weight / Math.max(1, Math.sqrt(terms.length))
        for (const t of terms) weights.set(t, share)
        group.push(...terms)
      }
    }
    return { own, groups, weights, droppedWords, droppedExpansions }
  }

  #options(plan: QueryPlan, visible: (tool: JsonObject) => boolean) {
    return {
      combineWith: 'OR',
      prefix: (t: string) => t.length >= 4,
      fuzzy: this.#tuning.fuzzy ? (t: string) => (t.length >= 5 ? 0.2 : false) : false,
      boostTerm: (t: string) => plan.weights.get(t) ?? 0,
      ...(this.#tuning.bm25 === undefined ? {} : { bm25: this.#tuning.bm25 }),
      filter: (result: SearchResult) => visible(this.#tools[result.id as number]!),
    } as const
  }

  /** The re-rank of the head (tool-search-rerank.ts), when the tuning has one. */
  #finish(
    ranked: { id: number; score: number }[],
    query: string,
    own: readonly string[],
  ): { id: number; score: number }[] {
    const asked: AskedWord[] = []
    for (const w of new Set(own)) {
      const t = this.#term(w)
      if (t === null) continue
      const alternatives = synonymsOf(w)
        .flatMap(words)
        .map(this.#term)
        .filter((a) => a !== null)
      asked.push([t, ...alternatives])
    }
    // Names as the user writes them: "GitHub" is one word here, not `git hub`.
    const written = query.toLowerCase().split(/[^a-z0-9]+/)
    this.#head.rerank(ranked, asked, written, this.#tuning.rerank)
    return ranked
  }
}

/** One index per catalog object (rebuilt catalogs get a new one), built at its first search. */
const indexes = new WeakMap<Catalog, ToolIndex>()

/** The index of `catalog`'s tools, built once; `serverOf` names each tool's server. */
export function toolIndexFor(
  catalog: Catalog,
  serverOf: (tool: JsonObject) => ServerText,
): ToolIndex {
  let index = indexes.get(catalog)
  if (index === undefined) {
    index = new ToolIndex(catalog.tools, serverOf)
    indexes.set(catalog, index)
  }
  return index
}

/** Indexes being built in slices, by catalog, so concurrent first searches share one build. */
const building = new WeakMap<Catalog, Promise<ToolIndex>>()

/**
 * The index of `catalog`'s tools for a client's search: built once, in slices
 * (`ToolIndex.build`), shared with `toolIndexFor`.
 */
export async function toolIndexReady(
  catalog: Catalog,
  serverOf: (tool: JsonObject) => ServerText,
): Promise<ToolIndex> {
  const built = indexes.get(catalog)
  if (built !== undefined) return built
  let pending = building.get(catalog)
  if (pending === undefined) {
    pending = ToolIndex.build(catalog.tools, serverOf).then((index) => {
      indexes.set(catalog, index)
      building.delete(catalog)
      return index
    })
    building.set(catalog, pending)
  }
  return await pending
}
