/**
 * The tool-search benchmark (`npm run bench:search`, docs/context-economy.md).
 *
 * Catalogue: bench/search/catalogue.json, the tools/list of real MCP servers (each named with
 * its package@version; bench/search/dump-catalogue.ts made it). Tasks: bench/search/tasks.txt,
 * requests written as users put them, each with its right tool(s); odd lines are the
 * development half (used to tune), even lines the held-out half (never tuned on).
 *
 * Reports recall@1, recall@5 and MRR for each ranking tried (MiniSearch as shipped, its
 * ablations, Orama with the same analysis, and plain BM25 over name and description), the
 * p50/p95 latency of a search on a 1,000-tool catalogue, the tokens (o200k_base) of
 * tools/list in search mode against the full list, and the scripted client's end-to-end tokens
 * and success per task (client.ts, issue 34), the tasks queried as their "verb object"
 * (intents.txt) or as written, with the names in view or servers and counts only.
 *
 *   node bench/search/run.ts [--json] [--show-misses] [--per-task]
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { create, insertMultiple, search as oramaSearch } from '@orama/orama'
import { encode } from 'gpt-tokenizer/encoding/o200k_base'
import MiniSearch from 'minisearch'
import { stemmer } from 'stemmer'
import { DEFAULT_NAMES_BUDGET } from '../../src/config/defaults.ts'
import { namesInView } from '../../src/exposure/tool-names.ts'
import {
  parameterText,
  type SearchTuning,
  type ServerText,
  SHIPPED_TUNING,
  ToolIndex,
  term,
  words,
} from '../../src/exposure/tool-search.ts'
import { SEARCH_GUIDANCE, searchModeListing } from '../../src/exposure/tool-search-mode.ts'
import { SYNONYM_GROUPS, synonymsOf } from '../../src/exposure/tool-search-synonyms.ts'
import type { JsonObject } from '../../src/protocol/jsonrpc.ts'
import { type ClientRun, catalogueView, RESULTS, ScriptedClient } from './client.ts'

interface DumpedServer {
  readonly name: string
  readonly package: string
  readonly serverInfo?: { name?: string; title?: string; description?: string; version?: string }
  readonly instructions?: string
  readonly tools: JsonObject[]
}

interface Task {
  readonly line: number
  readonly request: string
  readonly right: readonly string[]
  readonly half: 'dev' | 'held-out'
  /** The "verb object" query of intents.txt (the scripted client's). */
  readonly intent: string
}

/** A ranking under test: the exposed names of the best tools for a request, best first. */
type Ranker = (request: string, limit: number) => string[]

const SEPARATOR = '__'
const B = SHIPPED_TUNING.boosts
const R = SHIPPED_TUNING.rerank
const here = (file: string) => new URL(file, import.meta.url)

export function loadCatalogue(): {
  tools: JsonObject[]
  serverOf: (t: JsonObject) => ServerText
  servers: DumpedServer[]
} {
  const { servers } = JSON.parse(readFileSync(here('./catalogue.json'), 'utf8')) as {
    servers: DumpedServer[]
  }
  const tools: JsonObject[] = []
  const serverByTool = new Map<string, ServerText>()
  for (const s of servers) {
    const info = s.serverInfo ?? {}
    const text = [info.name, info.title, info.description]
      .filter((p): p is string => typeof p === 'string')
      .join(' ')
    for (const tool of s.tools) {
      const exposed = { ...tool, name: `${s.name}${SEPARATOR}${String(tool.name)}` }
      tools.push(exposed)
      serverByTool.set(exposed.name, { name: s.name, text })
    }
  }
  return { tools, serverOf: (t) => serverByTool.get(String(t.name))!, servers }
}

export function loadTasks(): Task[] {
  const lines = readFileSync(here('./tasks.txt'), 'utf8').split('\n')
  const intents = readFileSync(here('./intents.txt'), 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('#'))
  const tasks: Task[] = []
  for (const raw of lines) {
    const line = raw.trim()
    if (line === '' || line.startsWith('#')) continue
    const [request, right] = line.split(' | ')
    if (request === undefined || right === undefined) throw new Error(`bad task line: ${line}`)
    const n = tasks.length + 1
    tasks.push({
      line: n,
      request,
      right: right.split(',').map((r) => r.trim()),
      half: n % 2 === 1 ? 'dev' : 'held-out',
      intent: intents[n - 1] ?? '',
    })
  }
  if (intents.length !== tasks.length) {
    throw new Error(`intents.txt has ${intents.length} lines for ${tasks.length} tasks`)
  }
  return tasks
}

interface Scores {
  readonly n: number
  readonly recall1: number
  readonly recall5: number
  readonly mrr: number
}

function score(ranker: Ranker, tasks: readonly Task[], misses?: string[]): Scores {
  let r1 = 0
  let r5 = 0
  let rr = 0
  for (const task of tasks) {
    const ranked = ranker(task.request, 10)
    const rank = ranked.findIndex((name) => task.right.includes(name))
    if (rank === 0) r1++
    if (rank >= 0 && rank < 5) r5++
    if (rank >= 0) rr += 1 / (rank + 1)
    if (misses && (rank < 0 || rank >= 5)) {
      misses.push(
        `${task.half} #${task.line} "${task.request}" → ${ranked.slice(0, 3).join(', ')} (want ${task.right.join(' / ')})`,
      )
    }
  }
  const n = tasks.length
  return { n, recall1: r1 / n, recall5: r5 / n, mrr: rr / n }
}

/** Barbican's ToolIndex (src/exposure/tool-search.ts), as shipped or with parts changed. */
function minisearch(
  tools: JsonObject[],
  serverOf: (t: JsonObject) => ServerText,
  change: Partial<SearchTuning> = {},
): Ranker {
  const index = new ToolIndex(tools, serverOf, { ...SHIPPED_TUNING, ...change })
  return (request, limit) => index.search(request, limit).map((t) => String(t.name))
}

/** Plain BM25 over name and description: MiniSearch's defaults, no analysis of our own. */
function plainBm25(tools: JsonObject[]): Ranker {
  const index = new MiniSearch({ fields: ['name', 'description'] })
  index.addAll(tools.map((t, id) => ({ id, name: t.name, description: t.description ?? '' })))
  return (request, limit) =>
    index
      .search(request)
      .slice(0, limit)
      .map((r) => String(tools[r.id as number]!.name))
}

/**
 * Orama with the same analysis (our tokeniser, stemming and synonyms; its BM25, field boosts and
 * typo tolerance). Orama weighs every query term alike, so synonyms count fully.
 */
async function orama(
  tools: JsonObject[],
  serverOf: (t: JsonObject) => ServerText,
): Promise<Ranker> {
  const tokenize = (raw: string) =>
    words(raw)
      .map((w) => term(w))
      .filter((t): t is string => t !== null)
  const db = create({
    schema: { name: 'string', description: 'string', params: 'string', server: 'string' } as const,
    components: {
      tokenizer: { language: 'english', normalizationCache: new Map(), tokenize },
    },
  })
  await insertMultiple(
    db,
    tools.map((t) => ({
      id: String(t.name),
      name: String(t.name),
      // The same lead as the shipped index (ToolIndex keeps the first leadLength characters).
      description: String(t.description ?? '').slice(0, SHIPPED_TUNING.leadLength),
      params: parameterText(t.inputSchema),
      server: `${serverOf(t).name} ${serverOf(t).text}`,
    })),
  )
  const b = SHIPPED_TUNING.boosts
  return (request, limit) => {
    const own = words(request)
    const expanded = [...own]
    for (const w of own) for (const s of synonymsOf(w)) expanded.push(...words(s))
    const found = oramaSearch(db, {
      term: expanded.join(' '),
      // Orama refuses a boost of 0: a field the shipped index leaves out is left out here too.
      properties: ['name', 'description', 'server'],
      boost: { name: b.name, description: b.lead, server: b.server },
      tolerance: 1,
      limit,
    }) as { hits: { id: string }[] }
    return found.hits.map((h) => h.id)
  }
}

/** A catalogue of `size` tools: the real one, repeated under other server names. */
export function grown(tools: JsonObject[], serverOf: (t: JsonObject) => ServerText, size: number) {
  const out: JsonObject[] = []
  const servers = new Map<string, ServerText>()
  for (let copy = 0; out.length < size; copy++) {
    for (const t of tools) {
      if (out.length >= size) break
      const name = copy === 0 ? String(t.name) : `c${copy}_${String(t.name)}`
      out.push({ ...t, name })
      servers.set(name, serverOf(t))
    }
  }
  return { tools: out, serverOf: (t: JsonObject) => servers.get(String(t.name))! }
}

export function percentile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!
}

function latency(
  tools: JsonObject[],
  serverOf: (t: JsonObject) => ServerText,
  tasks: readonly Task[],
) {
  const builtAt = performance.now()
  const index = new ToolIndex(tools, serverOf)
  const buildMs = performance.now() - builtAt
  // What search_tools does: a visibility filter over the caller's view, then the top 8.
  const visible = new Set(tools.map((t) => t.name))
  for (const t of tasks) index.search(t.request, 8, (tool) => visible.has(tool.name)) // warm up
  const samples: number[] = []
  for (let round = 0; round < 5; round++) {
    for (const t of tasks) {
      const start = performance.now()
      index.search(t.request, 8, (tool) => visible.has(tool.name))
      samples.push(performance.now() - start)
    }
  }
  samples.sort((a, b) => a - b)
  return {
    tools: tools.length,
    buildMs,
    p50: percentile(samples, 50),
    p95: percentile(samples, 95),
    samples: samples.length,
  }
}

function tokensOf(value: unknown): number {
  return encode(JSON.stringify(value)).length
}

interface ClientRow {
  readonly variant: string
  /** Tokens of the search-mode tools/list this client read. */
  readonly list: number
  /** Share of tasks whose search returned a right tool. */
  readonly dev: number
  readonly heldOut: number
  /** Tokens per task: tools/list + search_tools call + its result. */
  readonly mean: number
  readonly median: number
  readonly max: number
  /** Tasks where the client selected by name, and where a selected name was right. */
  readonly selected: number
  readonly selectedRight: number
}

function clientRow(
  variant: string,
  list: number,
  runs: readonly { task: Task; run: ClientRun }[],
): ClientRow {
  const share = (half: Task['half']) => {
    const mine = runs.filter((r) => r.task.half === half)
    return mine.filter((r) => r.run.found).length / mine.length
  }
  const totals = runs
    .map(({ run: { tokens: t } }) => t.list + t.call + t.result)
    .sort((a, b) => a - b)
  return {
    variant,
    list,
    dev: share('dev'),
    heldOut: share('held-out'),
    mean: totals.reduce((a, b) => a + b, 0) / totals.length,
    median: percentile(totals, 50),
    max: totals[totals.length - 1]!,
    selected: runs.filter((r) => r.run.selected > 0).length,
    selectedRight: runs.filter((r) => r.run.selectedRight).length,
  }
}

async function main(): Promise<void> {
  const json = process.argv.includes('--json')
  const showMisses = process.argv.includes('--show-misses')
  const { tools, serverOf, servers } = loadCatalogue()
  const tasks = loadTasks()
  const dev = tasks.filter((t) => t.half === 'dev')
  const heldOut = tasks.filter((t) => t.half === 'held-out')
  const known = new Set(tools.map((t) => String(t.name)))
  for (const t of tasks)
    for (const r of t.right) if (!known.has(r)) throw new Error(`task #${t.line}: no tool ${r}`)

  // The same ranking, queried as search_tools' guidance asks: the task's "verb object".
  const intentOf = new Map(tasks.map((t) => [t.request, t.intent]))
  const shippedRanker = minisearch(tools, serverOf)
  const rankers: [string, Ranker][] = [
    ['minisearch (shipped)', shippedRanker],
    [
      'shipped, "verb object" queries',
      (request, limit) => shippedRanker(intentOf.get(request)!, limit),
    ],
    [
      'minisearch, coverage without idf',
      minisearch(tools, serverOf, { rerank: { ...R, idf: false } }),
    ],
    ['orama, same analysis', await orama(tools, serverOf)],
    [
      'minisearch, no re-rank',
      minisearch(tools, serverOf, { rerank: { ...R, weight: 0, server: 0 } }),
    ],
    ['minisearch, re-rank: coverage', minisearch(tools, serverOf, { rerank: { ...R, server: 0 } })],
    ['minisearch, re-rank: server', minisearch(tools, serverOf, { rerank: { ...R, weight: 0 } })],
    ['minisearch, no synonyms', minisearch(tools, serverOf, { synonymWeight: 0 })],
    ['minisearch, + details 0.1', minisearch(tools, serverOf, { boosts: { ...B, details: 0.1 } })],
    ['minisearch, + Porter stemming', minisearch(tools, serverOf, { stem: stemmer })],
    ['minisearch, no fuzzy', minisearch(tools, serverOf, { fuzzy: false })],
    ['minisearch, whole descriptions', minisearch(tools, serverOf, { leadLength: 1e9 })],
    ['minisearch, + details 0.3', minisearch(tools, serverOf, { boosts: { ...B, details: 0.3 } })],
    [
      'minisearch, + parameters 0.3',
      minisearch(tools, serverOf, { boosts: { ...B, params: 0.3 } }),
    ],
    ['minisearch, no server field', minisearch(tools, serverOf, { boosts: { ...B, server: 0 } })],
    ['plain BM25 name+description', plainBm25(tools)],
  ]
  const quality = rankers.map(([name, ranker]) => {
    const misses: string[] = []
    return {
      name,
      all: score(ranker, tasks, name.endsWith('(shipped)') ? misses : undefined),
      dev: score(ranker, dev),
      heldOut: score(ranker, heldOut),
      misses,
    }
  })

  const big = grown(tools, serverOf, 1000)
  const speed = latency(big.tools, big.serverOf, tasks)

  const full = { tools }
  // search_tools' description holds the names in view at the default budget (ADR 126).
  const catalog = catalogueView(tools, serverOf)
  const count = (text: string) => encode(text).length
  const names = namesInView(catalog, DEFAULT_NAMES_BUDGET, count)
  const searchList = { tools: searchModeListing(catalog, [], names.text).tools }
  const countsOnly = namesInView(catalog, 0, count).text
  const tokens = {
    full: tokensOf(full),
    search: tokensOf(searchList),
    countsOnly: tokensOf({ tools: searchModeListing(catalog, [], countsOnly).tools }),
    names: names.tokens,
  }
  const pinned3 = {
    tools: searchModeListing(
      catalog,
      ['github__create_issue', 'filesystem__read_text_file', 'slack__slack_post_message'],
      names.text,
    ).tools,
  }
  const tokensPinned = tokensOf(pinned3)

  // The scripted client (client.ts): each task's end-to-end tokens and whether it got a right
  // tool, for names budgets 0 (servers and counts) and the default, querying with the task's
  // "verb object" annotation or its raw request.
  const view = catalog
  const shipped = new ToolIndex(tools, serverOf)
  const clientRows: ClientRow[] = []
  const perTask: { line: number; half: string; variant: string; run: ClientRun }[] = []
  for (const [budget, query] of [
    [0, 'request'],
    [0, 'intent'],
    [2000, 'request'],
    [2000, 'intent'],
  ] as const) {
    const client = new ScriptedClient(view, shipped, budget, query)
    const variant = `${client.named ? 'names' : 'counts'} (budget ${budget}), ${query === 'intent' ? '"verb object"' : 'raw request'}`
    const runs: { task: Task; run: ClientRun }[] = []
    for (const task of tasks) {
      const run = await client.run(task)
      runs.push({ task, run })
      perTask.push({ line: task.line, half: task.half, variant, run })
    }
    clientRows.push(clientRow(variant, client.listTokens, runs))
  }
  const guidanceTokens = encode(SEARCH_GUIDANCE).length

  const report = {
    catalogue: {
      servers: servers.length,
      tools: tools.length,
      packages: servers.map((s) => s.package),
    },
    tasks: { all: tasks.length, dev: dev.length, heldOut: heldOut.length },
    synonymGroups: SYNONYM_GROUPS,
    quality: quality.map(({ misses: _m, ...q }) => q),
    latency: speed,
    client: { rows: clientRows, guidanceTokens, fullListTokens: tokens.full },
    tokens: {
      ...tokens,
      ratio: tokens.search / tokens.full,
      withThreePinned: tokensPinned,
      encoding: 'o200k_base',
    },
  }
  if (json) {
    console.log(
      JSON.stringify(
        process.argv.includes('--per-task') ? { ...report, perTask } : report,
        null,
        2,
      ),
    )
    return
  }
  const pct = (x: number) => x.toFixed(3)
  console.log(
    `catalogue: ${tools.length} tools from ${servers.length} servers; tasks: ${tasks.length} (${dev.length} dev, ${heldOut.length} held-out); ${SYNONYM_GROUPS} synonym groups`,
  )
  console.log(
    'ranking                          | all: R@1  R@5   MRR  | dev: R@1  R@5   MRR  | held-out: R@1 R@5  MRR',
  )
  for (const q of quality) {
    const cells = [q.all, q.dev, q.heldOut].map(
      (s) => `${pct(s.recall1)} ${pct(s.recall5)} ${pct(s.mrr)}`,
    )
    console.log(`${q.name.padEnd(32)} | ${cells.join(' | ')}`)
  }
  console.log(
    `search_tools on ${speed.tools} tools: p50 ${speed.p50.toFixed(3)} ms, p95 ${speed.p95.toFixed(3)} ms over ${speed.samples} searches (index built in ${speed.buildMs.toFixed(1)} ms)`,
  )
  console.log(
    `tools/list tokens (o200k_base): full ${tokens.full}; search mode with the names in view ${tokens.search} (${(100 * report.tokens.ratio).toFixed(2)} %; the names ${tokens.names}), servers and counts only ${tokens.countsOnly}, names and 3 pinned ${tokensPinned}`,
  )
  console.log(
    `scripted client (bench/search/client.ts), at most ${RESULTS} tools per search; search_tools' guidance ${guidanceTokens} tokens; full tools/list ${tokens.full} tokens per task`,
  )
  console.log(
    'client                                   | list  | dev found | held-out found | tokens/task: mean  median  max | selected (right)',
  )
  for (const r of clientRows) {
    console.log(
      `${r.variant.padEnd(40)} | ${String(r.list).padStart(5)} | ${pct(r.dev)}     | ${pct(r.heldOut)}          | ${r.mean.toFixed(0).padStart(17)} ${String(r.median).padStart(7)} ${String(r.max).padStart(5)} | ${r.selected} (${r.selectedRight})`,
    )
  }
  if (process.argv.includes('--per-task')) {
    for (const p of perTask) {
      const t = p.run.tokens
      console.log(
        `task ${p.half} #${p.line} ${p.variant}: ${p.run.found ? 'found' : 'missed'}, selected ${p.run.selected}, tokens list ${t.list} + call ${t.call} + result ${t.result} = ${t.list + t.call + t.result} (full mode ${tokens.full})`,
      )
    }
  }
  if (showMisses) for (const m of quality[0]!.misses) console.log(`miss: ${m}`)
}

// Run when executed, not when imported (a tuning script reads the catalogue and tasks).
if (process.argv[1] === fileURLToPath(import.meta.url)) await main()
