/**
 * Readable differences between two definitions, field by field, so an operator reviewing a
 * quarantined tool sees `annotations.destructiveHint: false → true` rather than two hashes.
 */
import { canonicalJson } from './canonical.ts'

/** One changed field: its dotted path and the canonical JSON before and after (absent: undefined). */
export interface FieldChange {
  readonly path: string
  readonly before: string | undefined
  readonly after: string | undefined
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  v !== null && typeof v === 'object' && !Array.isArray(v)

/** The fields that differ, depth first, in sorted key order. */
export function diffDefinitions(before: unknown, after: unknown, path = ''): FieldChange[] {
  // A definition never approved is shown field by field, as additions.
  if (path === '' && before === undefined && isObject(after)) return diffDefinitions({}, after, '')
  if (isObject(before) && isObject(after)) {
    const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort()
    return keys.flatMap((k) => diffDefinitions(before[k], after[k], path ? `${path}.${k}` : k))
  }
  const a = before === undefined ? undefined : canonicalJson(before)
  const b = after === undefined ? undefined : canonicalJson(after)
  if (a === b) return []
  return [{ path: path || '(whole)', before: a, after: b }]
}

/** One line per change: `path: before → after`, long values shortened. */
export function formatChanges(changes: readonly FieldChange[], width = 160): string[] {
  const show = (v: string | undefined) => (v === undefined ? '(absent)' : clip(v, width))
  return changes.map((c) => `${c.path}: ${show(c.before)} → ${show(c.after)}`)
}

/** A one-line summary naming the changed fields, for error messages. */
export function summarizeChanges(changes: readonly FieldChange[]): string {
  if (changes.length === 0) return 'no field changed'
  const names = changes.slice(0, 4).map((c) => c.path)
  return `${names.join(', ')}${changes.length > 4 ? ` and ${changes.length - 4} more` : ''} changed`
}

function clip(text: string, width: number): string {
  // Escape invisible and bidirectional characters so a review shows what is really there.
  const visible = text.replace(
    /[\u00ad\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]|[\u{e0000}-\u{e007f}]/gu,
    (ch) => `\\u{${ch.codePointAt(0)!.toString(16)}}`,
  )
  return visible.length > width ? `${visible.slice(0, width - 1)}…` : visible
}
