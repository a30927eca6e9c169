/**
 * Tuning of the second pass (issue 34), on the development half only: prints dev recall@1,
 * recall@5 and MRR for each variant tried. The held-out half is not read here.
 *
 *   node bench/search/tune.ts
 */
import {
  type SearchTuning,
  SHIPPED_TUNING,
  ToolIndex,
  words,
} from '../../src/exposure/tool-search.ts'
import { withNameMatch } from './name-match.ts'
import { loadCatalogue, loadTasks } from './run.ts'

const { tools, serverOf } = loadCatalogue()
const dev = loadTasks().filter((t) => t.half === 'dev')

/**
 * Pseudo-relevance feedback, outside the index: the query searched again with the words of the
 * names of its first `depth` results appended (each once, so at a query word's full weight).
 */
function withFeedback(index: ToolIndex, depth: number) {
  return (query: string, limit: number) => {
    const first = index.search(query, depth)
    const extra = first.flatMap((t) => words(String(t.name)).slice(1))
    return index.search(`${query} ${extra.join(' ')}`, limit)
  }
}

/**
 * Synonyms from the catalogue's own text: the verb a description opens with ("Retrieves …",
 * "Returns …") against the verb its tool's name opens with (`get_…`), kept when at least
 * `least` tools pair them; a query word with a pair also searches the name's verb, once.
 */
function catalogueSynonyms(least: number): Map<string, string> {
  const pairs = new Map<string, number>()
  for (const t of tools) {
    const name = words(String(t.name)).slice(1)
    const lead = words(String(t.description ?? ''))[0]
    if (name[0] === undefined || lead === undefined) continue
    const verb = lead.length > 3 && lead.endsWith('s') ? lead.slice(0, -1) : lead
    if (verb === name[0]) continue
    const key = `${verb} ${name[0]}`
    pairs.set(key, (pairs.get(key) ?? 0) + 1)
  }
  const map = new Map<string, string>()
  for (const [key, n] of pairs) {
    const [from, to] = key.split(' ') as [string, string]
    if (n >= least && !map.has(from)) map.set(from, to)
  }
  return map
}

function devScore(
  change: Partial<SearchTuning>,
  feedback = 0,
  synonyms?: Map<string, string>,
  nameMatch?: [number, number],
) {
  const built = new ToolIndex(tools, serverOf, { ...SHIPPED_TUNING, ...change })
  const expand = (q: string) =>
    synonyms === undefined
      ? q
      : `${q} ${words(q)
          .map((w) => synonyms.get(w))
          .filter((w) => w !== undefined)
          .join(' ')}`
  const index = {
    search:
      feedback > 0
        ? withFeedback(built, feedback)
        : nameMatch !== undefined
          ? withNameMatch(built, tools, serverOf, ...nameMatch)
          : (q: string, l: number) => built.search(expand(q), l),
  }
  let r1 = 0
  let r5 = 0
  let rr = 0
  for (const task of dev) {
    const ranked = index.search(task.request, 10).map((t) => String(t.name))
    const rank = ranked.findIndex((n) => task.right.includes(n))
    if (rank === 0) r1++
    if (rank >= 0 && rank < 5) r5++
    if (rank >= 0) rr += 1 / (rank + 1)
  }
  const n = dev.length
  return `${(r1 / n).toFixed(3)} ${(r5 / n).toFixed(3)} ${(rr / n).toFixed(3)}`
}

const variants: [string, Partial<SearchTuning>, number?][] = [['shipped', {}]]
for (const depth of [1, 3, 5]) variants.push([`feedback ${depth}`, {}, depth])
console.log('variant                 | dev R@1 R@5 MRR')
for (const [label, change, feedback] of variants) {
  console.log(`${label.padEnd(23)} | ${devScore(change, feedback)}`)
}
for (const name of [0.5, 1, 2, 4]) {
  console.log(`${`name ${name}`.padEnd(23)} | ${devScore({}, 0, undefined, [name, 0])}`)
}
for (const verb of [0.25, 0.5, 1, 2]) {
  console.log(`${`verb ${verb}`.padEnd(23)} | ${devScore({}, 0, undefined, [0, verb])}`)
}
if (process.argv.includes('--pairs')) console.log([...catalogueSynonyms(2)].join('; '))
for (const least of [2, 3, 5]) {
  const table = catalogueSynonyms(least)
  console.log(
    `${`catalogue synonyms ≥${least}`.padEnd(23)} | ${devScore({}, 0, table)} (${table.size} pairs)`,
  )
}
