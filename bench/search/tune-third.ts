/**
 * Retrieval tuning, third round (issue 34 item 4, ADR 140), on the development half only:
 * prints dev recall@1, recall@5 and MRR for each variant. The held-out half is not read here.
 *
 *   node bench/search/tune-third.ts [section]   (bm25, idf, stem, cooc, rm3, fields, name; all)
 *
 * "before" is the ranking shipped until this round (coverage counting every word alike); each
 * candidate is measured on top of it, then the chosen one (idf coverage) with the others.
 */
import { stemmer } from 'stemmer'
import {
  type SearchTuning,
  SHIPPED_TUNING,
  ToolIndex,
  term,
  words,
} from '../../src/exposure/tool-search.ts'
import { withNameMatch } from './name-match.ts'
import { loadCatalogue, loadTasks } from './run.ts'

const { tools, serverOf } = loadCatalogue()
const dev = loadTasks().filter((t) => t.half === 'dev')
const BEFORE: SearchTuning = { ...SHIPPED_TUNING, rerank: { ...SHIPPED_TUNING.rerank, idf: false } }
const IDF: SearchTuning = SHIPPED_TUNING

type Search = (q: string, limit: number) => string[]
type Score = [number, number, number]

function devScore(search: Search): Score {
  let r1 = 0
  let r5 = 0
  let rr = 0
  for (const task of dev) {
    const rank = search(task.request, 10).findIndex((n) => task.right.includes(n))
    if (rank === 0) r1++
    if (rank >= 0 && rank < 5) r5++
    if (rank >= 0) rr += 1 / (rank + 1)
  }
  return [r1 / dev.length, r5 / dev.length, rr / dev.length]
}

function tuned(base: SearchTuning, change: Partial<SearchTuning> = {}): Search {
  const index = new ToolIndex(tools, serverOf, { ...base, ...change })
  return (q, l) => index.search(q, l).map((t) => String(t.name))
}

function line(label: string, s: Score) {
  console.log(`${label.padEnd(56)} | ${s.map((x) => x.toFixed(3)).join(' ')}`)
}

/** A tool's name and description (its lead only, unless `leadLength` says more), as terms. */
function toolTerms(tool: (typeof tools)[number], leadLength: number): string[] {
  const text = `${String(tool.name)} ${String(tool.description ?? '').slice(0, leadLength)}`
  return words(text)
    .map((w) => term(w))
    .filter((t): t is string => t !== null)
}

/** The catalogue's terms grouped by Porter stem: `flows` ↔ `flow`, `memories` ↔ `memory`. */
function stemClasses(): (t: string) => string[] {
  const byStem = new Map<string, Set<string>>()
  for (const tool of tools) {
    for (const t of toolTerms(tool, Number.POSITIVE_INFINITY)) {
      if (t.length < 3) continue
      const set = byStem.get(stemmer(t)) ?? new Set()
      byStem.set(stemmer(t), set.add(t))
    }
  }
  return (t) => (t.length < 3 ? [] : [...(byStem.get(stemmer(t)) ?? [])].filter((x) => x !== t))
}

/**
 * Related terms by co-occurrence in the same tool's name and description: the `top` terms of
 * highest pointwise mutual information seen together in at least `least` tools.
 */
function cooccurrence(least: number, top: number): (t: string) => string[] {
  const df = new Map<string, number>()
  const co = new Map<string, Map<string, number>>()
  const docs = tools.map((t) => [...new Set(toolTerms(t, Number.POSITIVE_INFINITY))])
  for (const d of docs) {
    for (const a of d) {
      df.set(a, (df.get(a) ?? 0) + 1)
      const m = co.get(a) ?? new Map<string, number>()
      co.set(a, m)
      for (const b of d) if (b !== a) m.set(b, (m.get(b) ?? 0) + 1)
    }
  }
  const cache = new Map<string, string[]>()
  return (t) => {
    const known = cache.get(t)
    if (known) return known
    const related = [...(co.get(t) ?? [])]
      .filter(([, n]) => n >= least)
      .map(([b, n]) => [b, Math.log((n * docs.length) / (df.get(t)! * df.get(b)!))] as const)
      .filter(([, pmi]) => pmi > 0)
      .sort((x, y) => y[1] - x[1])
      .slice(0, top)
      .map(([b]) => b)
    cache.set(t, related)
    return related
  }
}

/**
 * RM3-style pseudo-relevance feedback: the `depth` best tools' name and lead terms, each
 * weighted by its share of those tools' text times the tool's share of their scores; the
 * `count` heaviest not in the query are searched besides it, the heaviest at `weight`.
 */
function rm3(base: SearchTuning, depth: number, count: number, weight: number): Search {
  const index = new ToolIndex(tools, serverOf, base)
  const termsOf = tools.map((t) => toolTerms(t, base.leadLength))
  return (q, limit) => {
    const first = index.ranked(q).slice(0, depth)
    const total = first.reduce((a, r) => a + r.score, 0)
    const own = new Set(words(q).map((w) => term(w)))
    const p = new Map<string, number>()
    for (const r of first) {
      const ts = termsOf[r.id]!
      for (const t of ts) if (!own.has(t)) p.set(t, (p.get(t) ?? 0) + r.score / total / ts.length)
    }
    const best = [...p].sort((a, b) => b[1] - a[1]).slice(0, count)
    const max = best[0]?.[1] ?? 1
    const feedback = new Map(best.map(([t, v]) => [t, (weight * v) / max]))
    return index
      .ranked(q, () => true, feedback)
      .slice(0, limit)
      .map((r) => String(tools[r.id]!.name))
  }
}

/**
 * Name match (tune.ts's, second round): the best 20 re-scored by 1 + `name` × the share of
 * the name's own words the query covers, and 1 + `verb` when it covers the name's first word.
 */
function nameMatch(base: SearchTuning, name: number, verb: number): Search {
  const ranking = withNameMatch(new ToolIndex(tools, serverOf, base), tools, serverOf, name, verb)
  return (query, limit) => ranking(query, limit).map((tool) => String(tool.name))
}

const section = process.argv[2] ?? 'all'
const run = (name: string) => section === 'all' || section === name
console.log(`${'variant (development half)'.padEnd(56)} | R@1   R@5   MRR`)
line('before (coverage counts every word alike)', devScore(tuned(BEFORE)))
line('idf coverage (shipped)', devScore(tuned(IDF)))
if (run('bm25')) {
  for (const k of [0.6, 0.9, 1.2, 1.6, 2.0])
    for (const b of [0.3, 0.5, 0.7, 0.9])
      for (const d of [0, 0.5, 1])
        line(`bm25 k=${k} b=${b} d=${d}`, devScore(tuned(BEFORE, { bm25: { k, b, d } })))
}
if (run('idf')) {
  for (const depth of [10, 20, 40])
    for (const weight of [2, 4, 8])
      for (const server of [1, 2, 3]) {
        const rerank = { depth, weight, server, idf: true }
        line(
          `idf coverage, depth ${depth} weight ${weight} server ${server}`,
          devScore(tuned(IDF, { rerank })),
        )
      }
  line('idf coverage + Porter stemming', devScore(tuned(IDF, { stem: stemmer })))
  line('idf coverage, no fuzzy', devScore(tuned(IDF, { fuzzy: false })))
  for (const synonymWeight of [0, 0.4, 0.8, 1])
    line(`idf coverage, synonyms ${synonymWeight}`, devScore(tuned(IDF, { synonymWeight })))
}
if (run('stem')) {
  const of = stemClasses()
  for (const base of [BEFORE, IDF])
    for (const weight of [0.3, 0.5, 0.7, 0.9])
      line(
        `${base === IDF ? 'idf, ' : ''}stem classes ${weight}`,
        devScore(tuned(base, { expansions: { of, weight } })),
      )
}
if (run('cooc')) {
  for (const base of [BEFORE, IDF])
    for (const least of [2, 3])
      for (const top of [2, 4, 8])
        for (const weight of [0.1, 0.2, 0.4]) {
          const of = cooccurrence(least, top)
          const label = `${base === IDF ? 'idf, ' : ''}co-occurrence ≥${least} top ${top} weight ${weight}`
          line(label, devScore(tuned(base, { expansions: { of, weight } })))
        }
}
if (run('rm3')) {
  for (const base of [BEFORE, IDF])
    for (const depth of [3, 5, 10])
      for (const count of [5, 10, 20])
        for (const weight of [0.1, 0.2, 0.4]) {
          const label = `${base === IDF ? 'idf, ' : ''}rm3 depth ${depth} terms ${count} weight ${weight}`
          line(label, devScore(rm3(base, depth, count, weight)))
        }
}
if (run('name')) {
  for (const base of [BEFORE, IDF]) {
    const on = base === IDF ? 'idf, ' : ''
    for (const n of [0.25, 0.5, 1, 2]) line(`${on}name match ${n}`, devScore(nameMatch(base, n, 0)))
    for (const v of [0.25, 0.5, 1]) line(`${on}name's verb ${v}`, devScore(nameMatch(base, 0, v)))
  }
}
if (run('fields')) {
  // Field weights and lead length with the idf coverage: the 15 best of 243 settings.
  const rows: [string, Score][] = []
  for (const name of [2, 3, 4])
    for (const lead of [1, 2, 3])
      for (const server of [0, 1, 2])
        for (const params of [0, 0.1, 0.2])
          for (const leadLength of [120, 200, 300]) {
            const boosts = { name, lead, server, params, details: 0 }
            const s = devScore(tuned(IDF, { boosts, leadLength }))
            rows.push([
              `name ${name} lead ${lead} server ${server} params ${params} lead ${leadLength}`,
              s,
            ])
          }
  rows.sort((a, b) => b[1][1] + b[1][2] - (a[1][1] + a[1][2]))
  for (const [label, s] of rows.slice(0, 15)) line(`fields: ${label}`, s)
}
