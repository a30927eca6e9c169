/**
 * Structural limits for untrusted JSON, checked before `JSON.parse` builds anything.
 *
 * `JSON.parse` silently keeps the last of two duplicate keys, while other parsers keep the first:
 * a gateway that authorizes `params.name` as one value while the upstream executes another is a
 * known MCP vulnerability class (parser differentials). This scan rejects duplicate keys at every
 * depth, keys differing only by case in the JSON-RPC envelope, and inputs whose nesting, strings
 * or arrays exceed the configured limits. It is one linear pass over the text with no allocation
 * per value, so it costs far less than the parse it guards.
 */

/** Explicit limits on one JSON-RPC message; every transport passes its configured values. */
export interface JsonLimits {
  /** Largest message in bytes of UTF-8 (checked by transports before decoding). */
  readonly maxMessageBytes: number
  /** Deepest nesting of objects and arrays; the envelope object itself is depth 1. */
  readonly maxDepth: number
  /** Longest string, key or value, in UTF-16 code units of its JSON text. */
  readonly maxStringLength: number
  /** Most elements in one array (a batch counts too). */
  readonly maxArrayLength: number
  /** Most keys in one object. */
  readonly maxObjectKeys: number
}

/** Defaults chosen to admit every real MCP message seen in the field while bounding the work. */
export const DEFAULT_JSON_LIMITS: JsonLimits = Object.freeze({
  maxMessageBytes: 4 * 1024 * 1024,
  maxDepth: 64,
  maxStringLength: 2 * 1024 * 1024,
  maxArrayLength: 100_000,
  maxObjectKeys: 10_000,
})

/** Why a scan refused its input. */
export type JsonLimitViolation =
  | { readonly kind: 'depth'; readonly limit: number }
  | { readonly kind: 'string-length'; readonly limit: number }
  | { readonly kind: 'array-length'; readonly limit: number }
  | { readonly kind: 'object-keys'; readonly limit: number }
  | { readonly kind: 'duplicate-key'; readonly key: string; readonly path: string }
  | { readonly kind: 'case-variant-key'; readonly key: string; readonly other: string }

const QUOTE = 34
const BACKSLASH = 92
const OPEN_OBJECT = 123
const CLOSE_OBJECT = 125
const OPEN_ARRAY = 91
const CLOSE_ARRAY = 93
const COMMA = 44
const COLON = 58

interface Frame {
  readonly isObject: boolean
  /** Keys seen in this object (objects only); `undefined` until the second key, to save allocations. */
  keys: Set<string> | undefined
  firstKey: string | undefined
  count: number
  /** True while the next string in this object is a key rather than a value. */
  expectKey: boolean
}

/**
 * Scans `text` and returns the first violation, or `undefined` when the text is within limits.
 * Syntax errors are not reported here: the scan stops quietly and `JSON.parse` names them.
 */
export function scanJson(text: string, limits: JsonLimits): JsonLimitViolation | undefined {
  const stack: Frame[] = []
  const length = text.length
  let i = 0
  while (i < length) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = findStringEnd(text, i + 1)
      if (end < 0) return undefined // unterminated: a syntax error for JSON.parse to report
      if (end - i - 1 > limits.maxStringLength) {
        return { kind: 'string-length', limit: limits.maxStringLength }
      }
      const top = stack[stack.length - 1]
      if (top && !top.isObject && top.count === 0) top.count = 1
      if (top?.isObject && top.expectKey) {
        const raw = text.slice(i + 1, end)
        const key = raw.includes('\\') ? decodeKey(raw) : raw
        if (key === undefined) return undefined
        const violation = recordKey(top, key, stack.length, limits)
        if (violation) return violation
        top.expectKey = false
      }
      i = end + 1
      continue
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (stack.length >= limits.maxDepth) return { kind: 'depth', limit: limits.maxDepth }
      const parent = stack[stack.length - 1]
      if (parent && !parent.isObject && parent.count === 0) parent.count = 1
      stack.push({
        isObject: c === OPEN_OBJECT,
        keys: undefined,
        firstKey: undefined,
        count: 0,
        expectKey: c === OPEN_OBJECT,
      })
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      stack.pop()
    } else if (c === COMMA) {
      const top = stack[stack.length - 1]
      if (top) {
        if (top.isObject) {
          top.expectKey = true
        } else {
          top.count++
          if (top.count > limits.maxArrayLength) {
            return { kind: 'array-length', limit: limits.maxArrayLength }
          }
        }
      }
    } else if (c !== COLON) {
      // Scalars and whitespace: arrays count their first element here.
      const top = stack[stack.length - 1]
      if (top && !top.isObject && top.count === 0 && c > 32) top.count = 1
    }
    i++
  }
  return undefined
}

function recordKey(
  frame: Frame,
  key: string,
  depth: number,
  limits: JsonLimits,
): JsonLimitViolation | undefined {
  frame.count++
  if (frame.count > limits.maxObjectKeys)
    return { kind: 'object-keys', limit: limits.maxObjectKeys }
  if (frame.firstKey === undefined) {
    frame.firstKey = key
    return undefined
  }
  if (frame.keys === undefined) frame.keys = new Set([frame.firstKey])
  if (frame.keys.has(key))
    return { kind: 'duplicate-key', key, path: depth === 1 ? '' : '(nested)' }
  // Case variants matter only in the envelope, where routing decisions are made; payloads may
  // legitimately carry both "Name" and "name".
  if (depth === 1) {
    const lower = key.toLowerCase()
    for (const other of frame.keys) {
      if (other.toLowerCase() === lower) return { kind: 'case-variant-key', key, other }
    }
  }
  frame.keys.add(key)
  return undefined
}

/** Index of the closing quote of a string whose body starts at `from`, or -1. */
function findStringEnd(text: string, from: number): number {
  let i = from
  for (;;) {
    const quote = text.indexOf('"', i)
    if (quote < 0) return -1
    // Count the backslashes right before the quote: an odd number escapes it.
    let backslashes = 0
    let j = quote - 1
    while (j >= from && text.charCodeAt(j) === BACKSLASH) {
      backslashes++
      j--
    }
    if (backslashes % 2 === 0) return quote
    i = quote + 1
  }
}

function decodeKey(raw: string): string | undefined {
  try {
    return JSON.parse(`"${raw}"`) as string
  } catch {
    return undefined
  }
}
