/**
 * "Did you mean": the closest of a few known words to one the user typed. One helper for the
 * command line (commands, subcommands, options) and the config (keys, in every format), so a
 * typo gets the same answer wherever it is made.
 */

/**
 * Optimal string alignment distance (Damerau-Levenshtein where a transposition of two adjacent
 * letters costs one edit: `comand`, `lsit`). Quadratic; meant for short words only.
 */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = [Array.from({ length: b.length + 1 }, (_, j) => j)]
  for (let i = 1; i <= a.length; i++) {
    const row = [i]
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let best = Math.min(rows[i - 1]![j]! + 1, row[j - 1]! + 1, rows[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        best = Math.min(best, rows[i - 2]![j - 2]! + 1)
      row.push(best)
    }
    rows.push(row)
  }
  return rows[a.length]![b.length]!
}

/**
 * The known word closest to `typed` (case-insensitive), or undefined when none is close enough:
 * at most 2 edits, and fewer than half the typed word, so `x` never "means" `ls`.
 */
export function closest(typed: string, known: readonly string[]): string | undefined {
  const word = typed.toLowerCase()
  const limit = Math.min(2, Math.max(1, Math.floor(word.length / 2)))
  let best: string | undefined
  let bestDistance = limit + 1
  for (const candidate of known) {
    const d = editDistance(word, candidate.toLowerCase())
    if (d < bestDistance) {
      best = candidate
      bestDistance = d
    }
  }
  return best
}

/** ` (did you mean "x"?)`, or the empty string when nothing is close. */
export function didYouMean(typed: string, known: readonly string[]): string {
  const match = closest(typed, known)
  return match === undefined ? '' : ` (did you mean "${match}"?)`
}
