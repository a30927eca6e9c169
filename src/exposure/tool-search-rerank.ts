/**
 * The second stage of `search_tools`' ranking (ADR 070, ADR 140): BM25's best results are
 * re-scored by how much of the query each tool covers anywhere (name, whole description,
 * parameters, server), and by whether the query names the tool's server ("on GitHub").
 *
 * Coverage weighs each query word by its inverse document frequency over the catalogue: a
 * tool that covers "elevation" has covered more of "get the elevation" than one that covers
 * "get", which a third of the tools hold. Counting every word alike (the first re-rank) let
 * the common verbs of a request decide as much as its one telling word.
 */

/** The re-rank's settings (part of `SearchTuning`). */
export interface RerankTuning {
  /** How many of BM25's best are re-scored. */
  readonly depth: number
  /** Score × (1 + weight × coverage), coverage the share of the query covered; 0: off. */
  readonly weight: number
  /** Factor (1 + this) for tools of a server the query names (`on GitHub`); 0: off. */
  readonly server: number
  /** Each query word weighs its idf in the coverage; false: every word alike. */
  readonly idf: boolean
}

/** One query word as the coverage looks for it: its term, then its synonyms' terms. */
export type AskedWord = readonly [string, ...string[]]

/** What the re-rank knows of each indexed tool, by its position in the index. */
export class HeadRerank {
  /** Every term of each tool, all fields. */
  readonly #terms: ReadonlySet<string>[] = []
  /** The words of each tool's server name. */
  readonly #serverTerms: (readonly string[])[] = []
  /** How many tools hold each term: bounded by the catalogue's vocabulary. */
  readonly #documentFrequency = new Map<string, number>()

  /** Records the next tool's terms (tools are added in index order). */
  add(terms: ReadonlySet<string>, serverTerms: readonly string[]): void {
    this.#terms.push(terms)
    this.#serverTerms.push(serverTerms)
    for (const t of terms) this.#documentFrequency.set(t, (this.#documentFrequency.get(t) ?? 0) + 1)
  }

  /**
   * Re-orders the `depth` best of `results` in place. `asked`: the query's own words with
   * their synonyms; `written`: the query's words as the user wrote them (server names).
   */
  rerank(
    results: { id: number; score: number }[],
    asked: readonly AskedWord[],
    written: readonly string[],
    tuning: RerankTuning,
  ): void {
    if (asked.length === 0 || (tuning.weight <= 0 && tuning.server <= 0)) return
    const weights = asked.map(([own]) => (tuning.idf ? this.#idf(own) : 1))
    const total = weights.reduce((a, b) => a + b, 0)
    const top = results.slice(0, tuning.depth).map((r) => {
      let score = r.score
      if (tuning.weight > 0 && this.#terms[r.id] !== undefined) {
        const terms = this.#terms[r.id]!
        let covered = 0
        for (let i = 0; i < asked.length; i++) if (covers(terms, asked[i]!)) covered += weights[i]!
        score *= 1 + (tuning.weight * covered) / total
      }
      if (tuning.server > 0) {
        const named = this.#serverTerms[r.id]!.some((s) =>
          written.some((t) => t === s || (t.length >= 4 && s.startsWith(t))),
        )
        if (named) score *= 1 + tuning.server
      }
      return { id: r.id, score }
    })
    top.sort((a, b) => b.score - a.score)
    for (let i = 0; i < top.length; i++) results[i] = top[i]!
  }

  /** Smoothed idf: positive for every word, highest for a word no tool holds. */
  #idf(term: string): number {
    const n = this.#documentFrequency.get(term) ?? 0
    return Math.log(1 + this.#terms.length / (1 + n))
  }
}

/** Whether `terms` hold one of `alternatives`, or (four letters or more) a word it begins. */
function covers(terms: ReadonlySet<string>, alternatives: AskedWord): boolean {
  for (const a of alternatives) if (terms.has(a)) return true
  const [own] = alternatives
  if (own.length < 4) return false
  for (const t of terms) if (t.startsWith(own)) return true
  return false
}
