/**
 * Canonical JSON in the manner of RFC 8785 (JCS): object keys sorted by UTF-16 code units, no
 * whitespace, numbers and strings as ECMAScript serializes them. Two servers that advertise the
 * same definition with keys in another order or other spacing get the same hash; any change of
 * meaning changes it.
 */
import { createHash } from 'node:crypto'

/** The canonical text of a JSON value; `undefined` members are dropped as JSON.stringify does. */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') {
    if (typeof value === 'number' && !Number.isFinite(value)) return 'null'
    return JSON.stringify(value) ?? 'null'
  }
  if (Array.isArray(value)) {
    return `[${value.map((v) => (v === undefined ? 'null' : canonicalJson(v))).join(',')}]`
  }
  const record = value as Record<string, unknown>
  // Default sort compares UTF-16 code units, which is what JCS prescribes.
  const keys = Object.keys(record)
    .filter((k) => record[k] !== undefined)
    .sort()
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`).join(',')}}`
}

/** SHA-256 of the canonical JSON, as lower-case hex. */
export function canonicalHash(value: unknown): string {
  return createHash('sha256').update(canonicalJson(value), 'utf8').digest('hex')
}
