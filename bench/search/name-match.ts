/**
 * Verb/object matching on the tool's own name, after a ranking (issue 34's tuning rounds): the
 * best 20 are re-scored by 1 + `name` × the share of the name's words (its server's left out)
 * the query covers, through the synonym table or as a prefix, and by 1 + `verb` when the name's
 * first word (its verb: `create` of `create_issue`) is covered.
 */
import { type ServerText, type ToolIndex, term, words } from '../../src/exposure/tool-search.ts'
import { synonymsOf } from '../../src/exposure/tool-search-synonyms.ts'
import type { JsonObject } from '../../src/protocol/jsonrpc.ts'

export function withNameMatch(
  index: ToolIndex,
  tools: readonly JsonObject[],
  serverOf: (tool: JsonObject) => ServerText,
  name: number,
  verb: number,
): (query: string, limit: number) => JsonObject[] {
  return (query, limit) => {
    const asked = words(query)
      .map((w) => term(w))
      .filter((t): t is string => t !== null)
      .map((t) => [t, ...synonymsOf(t).flatMap(words)])
    const covered = (w: string) =>
      asked.some((alts) => alts.includes(w) || (alts[0]!.length >= 4 && w.startsWith(alts[0]!)))
    const ranked = index.ranked(query)
    const head = ranked.slice(0, 20).map((r) => {
      const tool = tools[r.id]!
      const server = new Set(words(serverOf(tool).name))
      const own = words(String(tool.name)).filter((w) => !server.has(w))
      let score = r.score
      if (own.length > 0) score *= 1 + (name * own.filter(covered).length) / own.length
      if (own[0] !== undefined && covered(own[0])) score *= 1 + verb
      return { id: r.id, score }
    })
    head.sort((a, b) => b.score - a.score)
    return [...head, ...ranked.slice(20)].slice(0, limit).map((r) => tools[r.id]!)
  }
}
