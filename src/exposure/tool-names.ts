/**
 * The names in view (issue 34, ADR 126): in search mode, `search_tools`' description ends with
 * the name of every tool the caller may call, grouped by server, so that the model does the
 * semantic matching over names and loads exact tools with `select`. The block is built from the
 * caller's own narrowed catalog (policy, pins and quarantine already applied), and kept within
 * a token budget (`tools.search.namesBudget`, o200k_base); past it, only the servers and how
 * many tools each has are shown, and the model searches.
 */
import type { Catalog } from '../catalog/catalog.ts'

/** One server's tools as the names block shows them. */
interface Group {
  readonly server: string
  /** What every name of the group begins with (`github__`), shown once; '' when none is shared. */
  readonly prefix: string
  /** The names without the prefix, in catalogue order. */
  readonly names: string[]
}

/**
 * The caller's tools grouped by the upstream they come from, in catalogue order. A name that is
 * the upstream's prefix plus the tool's own name (`github__create_issue`) is shown without the
 * prefix, which the group states once: that is most of the saving over listing full names.
 */
function groups(view: Catalog, callable: (name: string) => boolean): Group[] {
  const byServer = new Map<string, { full: string[]; prefixes: Set<string> }>()
  for (const tool of view.tools) {
    const name = tool.name
    if (typeof name !== 'string' || !callable(name)) continue
    const target = view.toolTargets.get(name)
    const server = target?.upstream ?? ''
    let group = byServer.get(server)
    if (group === undefined) {
      group = { full: [], prefixes: new Set() }
      byServer.set(server, group)
    }
    group.full.push(name)
    const original = target?.original ?? name
    const prefix =
      original !== name && name.endsWith(original) && name.startsWith(server)
        ? name.slice(0, name.length - original.length)
        : ''
    group.prefixes.add(prefix)
  }
  return [...byServer].map(([server, { full, prefixes }]) => {
    const [only] = prefixes
    const prefix = prefixes.size === 1 && only !== undefined ? only : ''
    return { server, prefix, names: full.map((n) => n.slice(prefix.length)) }
  })
}

/** The names block, line by line: the header, then one line per server (its prefix, its names). */
function namesLines(all: readonly Group[]): string[] {
  const count = all.reduce((n, g) => n + g.names.length, 0)
  const lines = all.map((g) => {
    const head = g.prefix === '' ? `${g.server || 'tools'}:` : `${g.server} (${g.prefix}…):`
    return `${head} ${g.names.join(', ')}`
  })
  const sample = all.find((g) => g.prefix !== '' && g.names.length > 0)
  const example =
    sample === undefined
      ? ''
      : ` (${sample.prefix}… ${sample.names[0]} is ${sample.prefix}${sample.names[0]})`
  return [
    `Tools you may call (${count}), by server; a full name is the server's prefix plus the name shown${example}:`,
    ...lines,
  ]
}

/** Past the budget: the servers and how many tools each has. */
function countsText(all: readonly Group[]): string {
  const count = all.reduce((n, g) => n + g.names.length, 0)
  const parts = all.map((g) => `${g.server || 'tools'} (${g.names.length})`)
  return `Tools you may call: ${count} on ${all.length} server(s), too many to name here: ${parts.join(', ')}. Search to find them.`
}

/** What the names block became: the text, and whether the names fitted the budget. */
export interface NamesInView {
  readonly text: string
  readonly named: boolean
  /** Tokens (o200k_base) of `text`. */
  readonly tokens: number
}

/** Token counts of lines already counted, by text (views repeat across callers). */
const counted = new Map<string, number>()
const COUNTED_MAX = 1024

function tokensOf(text: string, count: (text: string) => number): number {
  let n = counted.get(text)
  if (n === undefined) {
    n = count(text)
    if (counted.size >= COUNTED_MAX) counted.delete(counted.keys().next().value as string)
    counted.set(text, n)
  }
  return n
}

/** More characters per token than any list of names reaches (their average is about 4.4). */
const MAX_CHARS_PER_TOKEN = 12

/**
 * The tokens of `lines` joined by newlines, counted line by line (o200k_base splits words at a
 * newline, so the sum is the count of the whole, to a token or so), and no further than
 * `budget`: a catalogue of thousands of tools is never encoded whole on the main thread (3,000
 * names took 50–100 ms) only to be found over budget. Undefined: over `budget`.
 */
function withinBudget(
  lines: readonly string[],
  budget: number,
  count: (text: string) => number,
): number | undefined {
  let total = 0
  for (const [i, line] of lines.entries()) {
    // Names average about 4.4 characters a token (the benchmark's block: 6,528 for 1,499); a
    // line that would need more than MAX_CHARS_PER_TOKEN to fit is over without encoding it.
    if (line.length > (budget - total) * MAX_CHARS_PER_TOKEN) return undefined
    total += tokensOf(i === 0 ? line : `\n${line}`, count)
    if (total > budget) return undefined
  }
  return total
}

/**
 * The names block for `view`: every tool `callable` admits (the catalogue's tools, not the
 * meta-tools), named when the block fits `budget` tokens, else servers and counts only.
 * `budget` 0: counts only, whatever their number.
 */
export function namesInView(
  view: Catalog,
  budget: number,
  count: (text: string) => number,
  callable: (name: string) => boolean = () => true,
): NamesInView {
  const all = groups(view, callable)
  if (all.length === 0) return { text: 'No tool is yours to call here.', named: true, tokens: 0 }
  if (budget > 0) {
    const lines = namesLines(all)
    const tokens = withinBudget(lines, budget, count)
    if (tokens !== undefined) return { text: lines.join('\n'), named: true, tokens }
  }
  const text = countsText(all)
  return { text, named: false, tokens: tokensOf(text, count) }
}
