import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import type { Catalog } from '../catalog/catalog.ts'
import type { BarbicanError } from '../common/errors.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { namesInView } from './tool-names.ts'
import {
  parameterText,
  SHIPPED_TUNING,
  ToolIndex,
  toolIndexFor,
  toolIndexReady,
  words,
} from './tool-search.ts'
import {
  answerSearch,
  directCallParams,
  reachable,
  SEARCH_GUIDANCE,
  type SearchArguments,
  searchArguments,
  searchModeListing,
  searchModeTools,
  searchResult,
} from './tool-search-mode.ts'

const TOOLS: JsonObject[] = [
  {
    name: 'k8s__node_management',
    description: 'Manage Kubernetes nodes with cordon, drain, and uncordon operations',
    inputSchema: { type: 'object', properties: { nodeName: { type: 'string' } } },
  },
  {
    name: 'chart__generate_fishbone_diagram',
    description: 'Generate a fishbone diagram to show the causes of a problem',
    inputSchema: { type: 'object', properties: { data: { type: 'object' } } },
  },
  {
    name: 'files__read_text_file',
    description: 'Read the complete contents of a file as text.',
    inputSchema: {
      type: 'object',
      properties: { path: { type: 'string', description: 'Where the file lives on disk' } },
    },
  },
  { name: 'github__createPullRequest', description: 'Open a PR.' },
]

const serverOf = (tool: JsonObject) => ({ name: String(tool.name).split('__')[0]!, text: '' })

function catalogOf(tools: JsonObject[]): Catalog {
  return {
    tools,
    prompts: [],
    resources: [],
    resourceTemplates: [],
    toolTargets: new Map(),
    promptTargets: new Map(),
    resourceTargets: new Map(),
    conflicts: [],
    heldBack: [],
  }
}

const names = (tools: JsonObject[]) => tools.map((t) => t.name)

describe('words', () => {
  test('splits snake_case, kebab-case and camelCase names into lower-case words', () => {
    assert.deepEqual(words('github__createPullRequest'), ['github', 'create', 'pull', 'request'])
    assert.deepEqual(words('get-file_infoHTTPServer2'), ['get', 'file', 'info', 'http', 'server2'])
  })
})

describe('parameterText', () => {
  test('holds parameter names and descriptions, nested ones too', () => {
    const text = parameterText({
      properties: {
        path: { description: 'Where it is' },
        options: { properties: { recursive: { description: 'Walk folders' } } },
      },
    })
    for (const part of ['path', 'Where it is', 'options', 'recursive', 'Walk folders']) {
      assert.ok(text.includes(part), `${part} in ${text}`)
    }
  })
})

describe('ToolIndex', () => {
  const index = new ToolIndex(TOOLS, serverOf)

  test('finds a tool through a synonym of its words ("evict" for drain, Ishikawa for fishbone)', () => {
    assert.equal(index.search('evict everything from node worker-3', 1)[0]?.name, TOOLS[0]!.name)
    assert.equal(index.search('draw an Ishikawa diagram', 1)[0]?.name, TOOLS[1]!.name)
  })

  test('matches plurals, camelCase words and, when weighed in, parameter descriptions', () => {
    assert.equal(index.search('pull requests', 1)[0]?.name, 'github__createPullRequest')
    const boosts = { ...SHIPPED_TUNING.boosts, params: 1 }
    const withParams = new ToolIndex(TOOLS, serverOf, { ...SHIPPED_TUNING, boosts })
    assert.equal(withParams.search('on disk', 1)[0]?.name, 'files__read_text_file')
    assert.equal(index.search('on disk', 1)[0]?.name, undefined)
  })

  test('the re-rank favours the server the query names and tools covering every word', () => {
    const tools: JsonObject[] = [
      { name: 'web__search_github', description: 'Search GitHub, GitHub and GitHub via the web' },
      { name: 'github__search_code', description: 'Search code' },
      {
        name: 'db__update_many',
        description: 'Update documents',
        inputSchema: { properties: { filter: { description: 'Which orders to touch' } } },
      },
      { name: 'db__update_one', description: 'Update one document, update it now' },
    ]
    const off = { ...SHIPPED_TUNING, rerank: { depth: 20, weight: 0, server: 0, idf: false } }
    const plain = new ToolIndex(tools, serverOf, off)
    const shipped = new ToolIndex(tools, serverOf)
    assert.equal(plain.search('search GitHub code', 1)[0]?.name, 'web__search_github')
    assert.equal(shipped.search('search GitHub code', 1)[0]?.name, 'github__search_code')
    // "orders" is only in a parameter description, which BM25 does not index but coverage sees.
    assert.equal(plain.search('update orders', 1)[0]?.name, 'db__update_one')
    assert.equal(shipped.search('update orders', 1)[0]?.name, 'db__update_many')
  })

  test("the re-rank weighs a request's telling word above its common ones (idf, ADR 140)", () => {
    const lists = ['issues', 'branches', 'commits', 'tags', 'releases', 'labels']
    const tools: JsonObject[] = [
      ...lists.map((x) => ({
        name: `github__list_${x}`,
        description: `List the ${x} of a repository, with their details`,
      })),
      { name: 'maps__elevation', description: 'Height above sea level of points on Earth' },
    ]
    const query = 'list repository details elevation'
    const alike = { ...SHIPPED_TUNING, rerank: { ...SHIPPED_TUNING.rerank, idf: false } }
    // Counted alike, three common words covered outweigh the one word only one tool holds.
    assert.equal(
      new ToolIndex(tools, serverOf, alike).search(query, 1)[0]?.name,
      'github__list_issues',
    )
    assert.equal(new ToolIndex(tools, serverOf).search(query, 1)[0]?.name, 'maps__elevation')
  })

  test('ranked gives the order of search, with positions and re-ranked, falling scores', () => {
    const tools: JsonObject[] = [
      { name: 'web__search_github', description: 'Search GitHub, GitHub and GitHub via the web' },
      { name: 'github__search_code', description: 'Search code' },
      { name: 'db__update_one', description: 'Update one document' },
    ]
    const shipped = new ToolIndex(tools, serverOf)
    const ranked = shipped.ranked('search GitHub code')
    // The re-rank lifts github__search_code (position 1) over the keyword-stuffed one.
    assert.deepEqual(
      ranked.map((r) => r.id),
      [1, 0],
    )
    assert.deepEqual(
      names(shipped.search('search GitHub code', 5)),
      ranked.map((r) => tools[r.id]!.name),
    )
    assert.ok(ranked[0]!.score > ranked[1]!.score)
    assert.deepEqual(
      shipped
        .ranked('search GitHub code', (t) => t.name !== 'github__search_code')
        .map((r) => r.id),
      [0],
    )
  })

  test('returns only what the visibility check admits, at most `limit`', () => {
    const hidden = index.search('read file', 5, (t) => t.name !== 'files__read_text_file')
    assert.ok(!names(hidden).includes('files__read_text_file'))
    assert.ok(index.search('a', 50).length <= TOOLS.length)
    assert.equal(index.search('manage generate read open', 2).length, 2)
  })

  test('a rebuilt catalog gets a fresh index; the same catalog keeps its own', () => {
    const first = catalogOf(TOOLS)
    assert.equal(toolIndexFor(first, serverOf), toolIndexFor(first, serverOf))
    const changed = catalogOf([
      ...TOOLS,
      { name: 'files__delete_file', description: 'Remove a file' },
    ])
    assert.notEqual(
      toolIndexFor(first, serverOf).search('erase a file', 1)[0]?.name,
      'files__delete_file',
    )
    assert.equal(
      toolIndexFor(changed, serverOf).search('erase a file', 1)[0]?.name,
      'files__delete_file',
    )
  })
})

describe('search mode', () => {
  test('lists the meta-tools, then only the pinned tools the view holds', () => {
    const view = catalogOf(TOOLS.slice(0, 2))
    const listed = searchModeListing(view, [
      'chart__generate_fishbone_diagram',
      'files__read_text_file',
    ])
    assert.deepEqual(names([...listed.tools]), [
      'search_tools',
      'call_tool',
      'chart__generate_fishbone_diagram',
    ])
  })

  test('checks search_tools arguments', () => {
    const plain = { queries: ['x'], select: [], server: undefined, limit: 8 }
    assert.deepEqual(searchArguments({ query: 'x' }), plain)
    assert.deepEqual(searchArguments({ query: 'x', limit: 3 }), { ...plain, limit: 3 })
    assert.deepEqual(
      searchArguments({ query: 'a', queries: ['b', 'a', ' '], select: ['t', 't'], server: 's' }),
      { queries: ['a', 'b'], select: ['t'], server: 's', limit: 8 },
    )
    assert.deepEqual(searchArguments({ select: ['t'] }), { ...plain, queries: [], select: ['t'] })
    for (const bad of [
      undefined,
      {},
      { query: '' },
      { query: 3 },
      { queries: [] },
      { queries: 'x' },
      { queries: [1] },
      { queries: Array.from({ length: 9 }, (_, i) => `q${i}`) },
      { queries: ['x'.repeat(600), 'y'.repeat(600)] },
      { select: 'x' },
      { select: Array.from({ length: 51 }, (_, i) => `t${i}`) },
      { query: 'x', server: '' },
      { query: 'x', server: 1 },
      { query: 'x', limit: 0 },
      { query: 'x', limit: 1.5 },
      { query: 'x', limit: 51 },
      { query: 'x'.repeat(1001) },
    ]) {
      assert.throws(
        () => searchArguments(bad),
        (e: BarbicanError) => e.code === 'ERR_META_TOOL_ARGUMENTS',
      )
    }
  })

  test('call_tool becomes the direct call, keeping _meta; refuses meta-tools and bad arguments', () => {
    const meta = { progressToken: 7 }
    assert.deepEqual(
      directCallParams({
        name: 'call_tool',
        arguments: { name: 'a__b', arguments: { x: 1 } },
        _meta: meta,
      }),
      { name: 'a__b', arguments: { x: 1 }, _meta: meta },
    )
    assert.deepEqual(directCallParams({ name: 'call_tool', arguments: { name: 'a__b' } }), {
      name: 'a__b',
    })
    assert.throws(
      () => directCallParams({ name: 'call_tool', arguments: { name: 'search_tools' } }),
      (e: BarbicanError) => e.code === 'ERR_META_TOOL_NESTED',
    )
    for (const args of [{}, { name: 3 }, { name: 'a__b', arguments: [1] }]) {
      assert.throws(
        () => directCallParams({ name: 'call_tool', arguments: args }),
        (e: BarbicanError) => e.code === 'ERR_META_TOOL_ARGUMENTS',
      )
    }
    assert.equal(reachable({ name: 'call_tool' }), false)
    assert.equal(reachable({ name: 'a__b' }), true)
  })

  test('a search result carries the tools whole and what each answered, as JSON text too', () => {
    const result = searchResult('"drain"', [
      { tool: TOOLS[0]!, answered: 'drain' },
      { tool: TOOLS[2]!, answered: 'select' },
    ])
    const structured = result.structuredContent as JsonObject
    assert.deepEqual(structured.tools, [TOOLS[0], TOOLS[2]])
    assert.deepEqual(structured.answered, ['drain', 'select'])
    const text = String((result.content as JsonObject[])[0]!.text)
    assert.deepEqual(JSON.parse(text), structured)
    const none = searchResult('"zzz"', [], 'Note: cut short.')
    assert.equal(
      (none.structuredContent as JsonObject).note,
      'No tool matches "zzz". Note: cut short.',
    )
    assert.match(String((none.content as JsonObject[])[0]!.text), /No tool matches/)
  })
})

/** A catalog whose tools come from the upstream their prefix names (`k8s__…` from k8s). */
function namespaced(tools: JsonObject[]): Catalog {
  const targets = new Map(
    tools.map((t) => {
      const [upstream, original] = String(t.name).split('__') as [string, string]
      return [String(t.name), { upstream, original }] as const
    }),
  )
  return { ...catalogOf(tools), toolTargets: targets }
}

/** Counts words, a stand-in for a tokenizer where the exact count does not matter. */
const wordCount = (text: string) => text.split(/\s+/).length

describe('names in view (ADR 126)', () => {
  test('names every tool of the view by server, each server prefix said once', () => {
    const names = namesInView(namespaced(TOOLS), 2000, wordCount)
    assert.equal(names.named, true)
    assert.match(names.text, /^Tools you may call \(4\)/)
    assert.match(names.text, /\nk8s \(k8s__…\): node_management\n/)
    assert.match(names.text, /github \(github__…\): createPullRequest$/)
    assert.match(names.text, /k8s__… node_management is k8s__node_management/)
  })

  test('past the budget, servers and counts only; budget 0: counts only', () => {
    const many = Array.from({ length: 40 }, (_, i) => ({ name: `k8s__tool_${i}` }))
    const view = namespaced([...many, ...TOOLS.slice(1)])
    const small = namesInView(view, 20, wordCount)
    assert.equal(small.named, false)
    assert.match(small.text, /43 on 4 server\(s\).*k8s \(40\), chart \(1\)/)
    assert.doesNotMatch(small.text, /tool_3/)
    assert.equal(namesInView(view, 0, wordCount).named, false)
    assert.equal(namesInView(view, 1000, wordCount).named, true)
  })

  test('a catalogue far over the budget is never encoded whole', () => {
    const many = Array.from({ length: 5000 }, (_, i) => ({ name: `k8s__some_tool_number_${i}` }))
    let longest = 0
    const measuring = (text: string) => {
      longest = Math.max(longest, text.length)
      return wordCount(text)
    }
    const names = namesInView(namespaced(many), 2000, measuring)
    assert.equal(names.named, false)
    assert.match(names.text, /5000 on 1 server\(s\)/)
    assert.ok(longest < 1000, `encoded ${longest} characters at once`)
  })

  test('a tool outside the view is never named; the listing carries the names', () => {
    const view = namespaced(TOOLS.slice(0, 2))
    const names = namesInView(view, 2000, wordCount)
    assert.doesNotMatch(names.text, /read_text_file|createPullRequest|files|github/)
    const listed = searchModeListing(view, [], names.text)
    const description = String(listed.tools[0]!.description)
    assert.ok(description.startsWith(SEARCH_GUIDANCE))
    assert.ok(description.endsWith(names.text))
  })

  test('the listing counts tokens with o200k and names within the budget', async () => {
    const view = namespaced(TOOLS)
    const listed = await searchModeTools(view, { pinned: [] })
    assert.match(String(listed.tools[0]!.description), /chart \(chart__…\): generate_fishbone/)
    const counts = await searchModeTools(view, { pinned: [], namesBudget: 5 })
    assert.match(String(counts.tools[0]!.description), /4 on 4 server\(s\)/)
  })
})

describe('answering a search (issue 34)', () => {
  const view = namespaced(TOOLS)
  const index = new ToolIndex(TOOLS, serverOf)
  const bounds = { maxTerms: 16, maxExpansions: 64, budgetMs: 5000 }
  const ask = (args: Partial<SearchArguments>, inView: Catalog = view) =>
    answerSearch(
      { view: inView, index, bounds },
      { queries: [], select: [], server: undefined, limit: 8, ...args },
    )
  const pairs = (found: { tool: JsonObject; answered: string }[]) =>
    found.map((f) => `${String(f.tool.name)}<${f.answered}`)

  test('select returns the exact tools first, then the queries fill up to limit', async () => {
    const { found, notes } = await ask({
      select: ['github__createPullRequest'],
      queries: ['drain a node'],
      limit: 1,
    })
    assert.deepEqual(pairs(found), [
      'github__createPullRequest<select',
      'k8s__node_management<drain a node',
    ])
    assert.deepEqual(notes, [])
  })

  test('several queries merge round-robin, each tool tagged with the query that found it', async () => {
    const { found } = await ask({ queries: ['drain a node', 'read a file', 'fishbone'], limit: 3 })
    assert.deepEqual(pairs(found), [
      'k8s__node_management<drain a node',
      'files__read_text_file<read a file',
      'chart__generate_fishbone_diagram<fishbone',
    ])
    const capped = await ask({ queries: ['drain a node', 'read a file'], limit: 1 })
    assert.equal(capped.found.length, 1)
  })

  test('the server filter keeps the queries to that server, and names the servers there are', async () => {
    const { found } = await ask({ queries: ['read a file'], server: 'k8s' })
    assert.ok(found.every((f) => String(f.tool.name).startsWith('k8s__')))
    const none = await ask({ queries: ['read a file'], server: 'nope' })
    assert.equal(none.found.length, 0)
    assert.match(none.notes[0]!, /No server "nope" here; servers: k8s, chart, files, github/)
  })

  test('a tool outside the view is neither selected, found, suggested nor named', async () => {
    const narrowed = namespaced(TOOLS.slice(0, 2))
    const hidden = await ask({ select: ['files__read_text_file'] }, narrowed)
    const absent = await ask({ select: ['files__nothing_here'] }, narrowed)
    assert.equal(hidden.found.length, 0)
    assert.equal(
      hidden.notes[0]!.replace('read_text_file', 'X'),
      absent.notes[0]!.replace('nothing_here', 'X'),
    )
    const searched = await ask({ queries: ['read the text of a file'], server: 'files' }, narrowed)
    assert.equal(searched.found.length, 0)
    assert.doesNotMatch(JSON.stringify(searched.notes), /servers:.*files/)
    const suggested = await ask({ select: ['node_management', 'read_text_file'] }, narrowed)
    assert.match(suggested.notes[0]!, /"node_management" \(did you mean k8s__node_management\?\)/)
    assert.doesNotMatch(suggested.notes[0]!, /files__/)
  })
})

describe('bounded search (ADR 105)', () => {
  // 3,000 tools over a vocabulary of 240 words: a catalogue as large as issue 31's.
  const VOCABULARY = Array.from(
    { length: 240 },
    (_, i) => `word${String.fromCharCode(97 + (i % 26))}${i}`,
  )
  const many: JsonObject[] = Array.from({ length: 3000 }, (_, i) => ({
    name: `svc${i % 40}__${VOCABULARY[i % 240]}_${VOCABULARY[(i * 7) % 240]}`,
    description: Array.from({ length: 14 }, (_, k) => VOCABULARY[(i * 13 + k * 31) % 240]).join(
      ' ',
    ),
  }))
  const big = new ToolIndex(many, serverOf)
  const longQuery = Array.from({ length: 200 }, (_, k) => VOCABULARY[(k * 17) % 240])
    .join(' ')
    .slice(0, 1000)
  const GENEROUS = { maxTerms: 1000, maxExpansions: 1000, budgetMs: 60_000 }

  test('within its bounds it ranks exactly as the unbounded search', async () => {
    const index = new ToolIndex(TOOLS, serverOf)
    for (const query of ['drain a node', 'read a file from disk', 'open a pull request']) {
      const bounded = await index.searchBounded(query, 4, GENEROUS)
      assert.deepEqual(bounded.tools, index.search(query, 4), query)
      assert.equal(bounded.cutShort, false)
    }
    const bigBounded = await big.searchBounded('worda0 wordb1 wordc2', 10, GENEROUS)
    assert.deepEqual(bigBounded.tools, big.search('worda0 wordb1 wordc2', 10))
  })

  test('a 1,000-character query searches at most maxTerms words, and says so', async () => {
    const found = await big.searchBounded(longQuery, 8, { ...GENEROUS, maxTerms: 16 })
    assert.equal(found.words, 16)
    assert.ok(found.droppedWords > 100, `dropped ${found.droppedWords}`)
    assert.equal(found.tools.length, 8)
    const expanded = await big.searchBounded('delete remove', 8, { ...GENEROUS, maxExpansions: 2 })
    assert.ok(expanded.droppedExpansions > 0)
  })

  test('an index built for a search is built in slices, and ranks as one built at once', async () => {
    let ticks = 0
    let running = true
    const tick = () => {
      ticks++
      if (running) setImmediate(tick)
    }
    setImmediate(tick)
    const sliced = await ToolIndex.build(many, serverOf)
    running = false
    assert.ok(ticks > 10, `the build held the event loop (${ticks} ticks)`)
    assert.deepEqual(sliced.search(longQuery, 8), big.search(longQuery, 8))
    const catalog = catalogOf(TOOLS)
    const [a, b] = await Promise.all([
      toolIndexReady(catalog, serverOf),
      toolIndexReady(catalog, serverOf),
    ])
    assert.equal(a, b, 'concurrent first searches share one build')
    assert.equal(toolIndexFor(catalog, serverOf), a)
  })

  test('the event loop runs between slices, and the budget cuts a long search short', async () => {
    let ticks = 0
    let running = true
    const tick = () => {
      ticks++
      if (running) setImmediate(tick)
    }
    setImmediate(tick)
    const before = ticks
    const full = await big.searchBounded(longQuery, 8, GENEROUS)
    running = false
    assert.ok(full.words > 100)
    assert.ok(ticks - before > 1, `the search held the event loop (${ticks - before} ticks)`)
    const cut = await big.searchBounded(longQuery, 8, { ...GENEROUS, budgetMs: 1 })
    assert.equal(cut.cutShort, true)
    assert.ok(cut.tools.length > 0, 'a search cut short still answers with what it found')
  })
})
