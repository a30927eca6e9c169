/**
 * Names that collide with or imitate another upstream's: the same name, the same name in other
 * letters (Cyrillic "а" for Latin "a"), the same words with other separators or case, or one
 * typo away. A server that names its tool `read_fiIe` next to a server offering `read_file`
 * hopes the model picks the wrong one.
 */
import type { Finding, ScannedUpstream, Severity } from './findings.ts'
import type { SurfaceItem } from './surface.ts'

/** Letters that render like Latin ones, mapped to the Latin letter they imitate. */
const CONFUSABLES: Readonly<Record<string, string>> = {
  а: 'a',
  в: 'b',
  е: 'e',
  к: 'k',
  м: 'm',
  н: 'h',
  о: 'o',
  р: 'p',
  с: 'c',
  т: 't',
  у: 'y',
  х: 'x',
  і: 'i',
  ј: 'j',
  ѕ: 's',
  ԁ: 'd',
  ɡ: 'g',
  һ: 'h',
  ӏ: 'l',
  ԛ: 'q',
  ԝ: 'w',
  ь: 'b',
  α: 'a',
  β: 'b',
  ε: 'e',
  ζ: 'z',
  η: 'n',
  ι: 'i',
  κ: 'k',
  μ: 'u',
  ν: 'v',
  ο: 'o',
  ρ: 'p',
  τ: 't',
  υ: 'u',
  χ: 'x',
  '0': 'o',
  '1': 'l',
  '|': 'l',
  ı: 'i',
  ℓ: 'l',
}

/** The name as it looks: compatibility-folded, lookalike letters replaced, case folded. */
export function skeleton(name: string): string {
  let out = ''
  // Upper-case I and lower-case l look alike in most fonts; fold before lower-casing.
  for (const ch of name.normalize('NFKC').replace(/I/g, 'l').toLowerCase())
    out += CONFUSABLES[ch] ?? ch
  return out.replace(/rn/g, 'm').replace(/vv/g, 'w')
}

/** The name's words without separators or case: `readFile`, `read-file`, `READ_FILE` agree. */
function words(name: string): string {
  return name.toLowerCase().replace(/[\s_\-.]/g, '')
}

/** Damerau-Levenshtein distance, stopping early above `max`. */
export function editDistance(a: string, b: string, max = 2): number {
  if (Math.abs(a.length - b.length) > max) return max + 1
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i])
  for (let j = 1; j <= b.length; j++) d[0]![j] = j
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1
      let v = Math.min(d[i - 1]![j]! + 1, d[i]![j - 1]! + 1, d[i - 1]![j - 1]! + cost)
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1])
        v = Math.min(v, d[i - 2]![j - 2]! + 1)
      d[i]![j] = v
    }
  }
  return d[a.length]![b.length]!
}

/** How `a` relates to `b` by name, or undefined when they are simply different. */
export function compareNames(
  a: string,
  b: string,
): { severity: Severity; how: string } | undefined {
  if (a === b) return { severity: 'medium', how: 'has the same name as' }
  if (skeleton(a) === skeleton(b)) return { severity: 'high', how: 'imitates (lookalike letters)' }
  if (words(a) === words(b))
    return { severity: 'high', how: 'imitates (same words, other separators or case)' }
  if (Math.min(a.length, b.length) >= 5 && editDistance(skeleton(a), skeleton(b), 1) <= 1)
    return { severity: 'medium', how: 'is one typo away from' }
  return undefined
}

/** Findings for every pair of tools (or prompts) of different upstreams whose names meet. */
export function imitationFindings(upstreams: readonly ScannedUpstream[]): Finding[] {
  const findings: Finding[] = []
  for (let i = 0; i < upstreams.length; i++) {
    for (let j = i + 1; j < upstreams.length; j++) {
      const u = upstreams[i]!
      const v = upstreams[j]!
      for (const a of u.items) {
        for (const b of v.items) {
          if (a.kind !== b.kind || (a.kind !== 'tool' && a.kind !== 'prompt')) continue
          const relation = compareNames(a.name, b.name)
          if (!relation) continue
          findings.push(finding(u.upstream, a, v.upstream, b, relation))
          findings.push(finding(v.upstream, b, u.upstream, a, relation))
        }
      }
    }
  }
  for (const u of upstreams) {
    for (const item of u.items) {
      if ((item.kind === 'tool' || item.kind === 'prompt') && /[^\x20-\x7e]/.test(item.name)) {
        findings.push({
          upstream: u.upstream,
          kind: item.kind,
          name: item.name,
          key: item.key,
          rule: 'name-imitation',
          severity: 'high',
          message: `name contains non-ASCII characters (reads as "${skeleton(item.name)}")`,
        })
      }
    }
  }
  return findings
}

function finding(
  upstream: string,
  item: SurfaceItem,
  otherUpstream: string,
  other: SurfaceItem,
  relation: { severity: Severity; how: string },
): Finding {
  return {
    upstream,
    kind: item.kind,
    name: item.name,
    key: item.key,
    rule: item.name === other.name ? 'name-collision' : 'name-imitation',
    severity: relation.severity,
    message: `${item.kind} "${item.name}" ${relation.how} ${other.kind} "${other.name}" of upstream "${otherUpstream}"`,
  }
}
