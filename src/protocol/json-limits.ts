/**
 * Structural limits for untrusted JSON, checked before `JSON.parse` builds anything.
 *
 * `JSON.parse` silently keeps the last of two duplicate keys, while other parsers keep the first:
 * a gateway that authorizes `params.name` as one value while the upstream executes another is a
 * known MCP vulnerability class (parser differentials). This scan rejects duplicate keys at every
 * depth, keys differing only by case in the JSON-RPC envelope (the top-level object, or each
 * element of a top-level batch), and inputs whose nesting, strings, arrays or objects exceed the
 * configured limits. It is one linear pass over the text that allocates nothing per value, only
 * the keys it must compare, so it costs less than the parse it guards.
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
const SPACE = 32

/** Frame kinds on the scan stack. */
const ARRAY = 0
const OBJECT = 1
/** A JSON-RPC message object: the top-level object, or an element of a top-level batch. */
const ENVELOPE = 2

/** Objects with at most this many keys are checked for duplicates by a linear scan, no Set. */
const LINEAR_KEYS = 16

/** Longest key quoted back in a violation: keys may be megabytes long. */
const MAX_REPORTED_KEY = 64

/**
 * The scan stack lives in module-level buffers reused by every call: the scan is synchronous and
 * never re-entered, so a typical message costs no allocation at all. Per open frame: its kind,
 * its element or key count, whether the next string is a key, and where its keys start. Keys
 * are kept as [start, end) ranges of the text and compared in place; an object switches to a
 * Set of decoded keys only when it grows large or one of its keys contains an escape.
 */
let kinds = new Uint8Array(32)
let counts = new Int32Array(32)
let expectKey = new Uint8Array(32)
let keyBase = new Int32Array(32)
let keyStarts = new Int32Array(256)
let keyEnds = new Int32Array(256)
/** Number of key ranges held for the open objects, innermost last. */
let keyTop = 0
/** Per frame, 1 once it left the in-place mode for the Set in keySets. */
let setMode = new Uint8Array(32)
/** Per frame, the Set of its decoded keys once it left the in-place mode. */
const keySets: (Set<string> | undefined)[] = []
/**
 * Per envelope frame, lower-cased key → key as written, for the case-variant check, once the
 * frame left the in-place mode (see `caseInPlace`).
 */
const lowerKeys: (Map<string, string> | undefined)[] = []
/**
 * Per envelope frame, 1 while its case-variant check runs in place: every key so far is plain
 * ASCII (no escape) and the frame is still in the in-place mode for duplicates. For such keys
 * `toLowerCase` is ASCII case folding, so two keys are case variants exactly when they have the
 * same length and fold equal, and the ranges already held for the duplicate check suffice; no
 * key is decoded, lower-cased or put in a Map (what every message's envelope used to cost).
 */
let caseInPlace = new Uint8Array(32)

function growFrames(): void {
  const size = kinds.length * 2
  const k = new Uint8Array(size)
  k.set(kinds)
  kinds = k
  const c = new Int32Array(size)
  c.set(counts)
  counts = c
  const e = new Uint8Array(size)
  e.set(expectKey)
  expectKey = e
  const b = new Int32Array(size)
  b.set(keyBase)
  keyBase = b
  const m = new Uint8Array(size)
  m.set(setMode)
  setMode = m
  const p = new Uint8Array(size)
  p.set(caseInPlace)
  caseInPlace = p
}

function growKeys(): void {
  const starts = new Int32Array(keyStarts.length * 2)
  starts.set(keyStarts)
  keyStarts = starts
  const ends = new Int32Array(keyEnds.length * 2)
  ends.set(keyEnds)
  keyEnds = ends
}

/**
 * Scans `text` and returns the first violation, or `undefined` when the text is within limits.
 * Syntax errors are not reported here: the scan stops quietly and `JSON.parse` names them.
 */
export function scanJson(text: string, limits: JsonLimits): JsonLimitViolation | undefined {
  keyTop = 0
  try {
    return scan(text, limits)
  } finally {
    // Drop the message's keys so the buffers hold nothing of it between calls.
    keySets.length = 0
    lowerKeys.length = 0
    // One huge message must not pin megabytes of key ranges for the life of the process.
    if (keyStarts.length > 4096) {
      keyStarts = new Int32Array(256)
      keyEnds = new Int32Array(256)
    }
  }
}

function scan(text: string, limits: JsonLimits): JsonLimitViolation | undefined {
  const length = text.length
  const { maxDepth, maxStringLength, maxArrayLength } = limits
  // `top` is the index of the innermost open frame; -1 outside every container.
  let top = -1
  let i = 0
  while (i < length) {
    const c = text.charCodeAt(i)
    if (c === QUOTE) {
      const end = findStringEnd(text, i + 1)
      if (end < 0) return undefined // unterminated: a syntax error for JSON.parse to report
      if (end - i - 1 > maxStringLength) return { kind: 'string-length', limit: maxStringLength }
      if (top >= 0) {
        if (kinds[top] === ARRAY) {
          if (counts[top] === 0) counts[top] = 1
        } else if (expectKey[top] === 1) {
          const violation = recordKey(text, top, i + 1, end, limits)
          if (violation) return violation === SYNTAX ? undefined : violation
          expectKey[top] = 0
        }
      }
      i = end + 1
      continue
    }
    if (c === OPEN_OBJECT || c === OPEN_ARRAY) {
      if (top + 1 >= maxDepth) return { kind: 'depth', limit: maxDepth }
      if (top >= 0 && kinds[top] === ARRAY && counts[top] === 0) counts[top] = 1
      top++
      if (top === kinds.length) growFrames()
      const isEnvelope = top === 0 || (top === 1 && kinds[0] === ARRAY)
      kinds[top] = c === OPEN_ARRAY ? ARRAY : isEnvelope ? ENVELOPE : OBJECT
      counts[top] = 0
      expectKey[top] = c === OPEN_OBJECT ? 1 : 0
      keyBase[top] = keyTop
      setMode[top] = 0
      caseInPlace[top] = 1
    } else if (c === CLOSE_OBJECT || c === CLOSE_ARRAY) {
      if (top >= 0) {
        if (kinds[top] !== ARRAY) keyTop = keyBase[top] as number
        top--
      }
    } else if (c === COMMA) {
      if (top >= 0) {
        if (kinds[top] !== ARRAY) {
          expectKey[top] = 1
        } else {
          const count = (counts[top] as number) + 1
          counts[top] = count
          if (count > maxArrayLength) return { kind: 'array-length', limit: maxArrayLength }
        }
      }
    } else if (c > SPACE && c !== COLON) {
      // The first character of a scalar: arrays count their first element here.
      if (top >= 0 && kinds[top] === ARRAY && counts[top] === 0) counts[top] = 1
    }
    i++
  }
  return undefined
}

/** Returned by recordKey for a key JSON.parse will reject anyway (a bad escape). */
const SYNTAX = 'syntax'

/** Records the key text[start, end) of object `frame`; reports a violation it causes. */
function recordKey(
  text: string,
  frame: number,
  start: number,
  end: number,
  limits: JsonLimits,
): JsonLimitViolation | typeof SYNTAX | undefined {
  const count = (counts[frame] as number) + 1
  counts[frame] = count
  if (count > limits.maxObjectKeys) return { kind: 'object-keys', limit: limits.maxObjectKeys }
  const envelope = kinds[frame] === ENVELOPE
  const form = keyForm(text, start, end)
  const escaped = form === ESCAPED
  // An envelope leaves the in-place case check for good with its first key that is not plain
  // ASCII, or when it leaves the in-place duplicate check: its earlier keys, all plain ASCII
  // and all still held as ranges, are then lower-cased into the Map once.
  if (envelope && caseInPlace[frame] === 1 && (form !== PLAIN_ASCII || count > LINEAR_KEYS)) {
    caseInPlace[frame] = 0
    const seen = new Map<string, string>()
    for (let j = keyBase[frame] as number; j < keyTop; j++) {
      const earlier = text.slice(keyStarts[j] as number, keyEnds[j] as number)
      seen.set(earlier.toLowerCase(), earlier)
    }
    lowerKeys[frame] = seen
  }
  let set = setMode[frame] === 1 ? keySets[frame] : undefined
  let key: string | undefined
  if (set === undefined && (escaped || count > LINEAR_KEYS)) {
    // Escapes must be decoded before keys compare ("\u006dethod" is "method"), and past a
    // handful of keys a Set keeps the check linear: leave the in-place mode for this object.
    set = new Set()
    for (let j = keyBase[frame] as number; j < keyTop; j++) {
      const earlier = keyText(text, keyStarts[j] as number, keyEnds[j] as number)
      if (earlier === undefined) return SYNTAX
      set.add(earlier)
    }
    keySets[frame] = set
    setMode[frame] = 1
  }
  if (set !== undefined) {
    key = keyText(text, start, end, escaped)
    if (key === undefined) return SYNTAX
    if (set.has(key)) return duplicate(key, envelope)
    set.add(key)
  } else {
    const length = end - start
    const foldCase = envelope && caseInPlace[frame] === 1
    for (let j = keyBase[frame] as number; j < keyTop; j++) {
      const other = keyStarts[j] as number
      if ((keyEnds[j] as number) - other !== length) continue
      if (sameText(text, other, start, length)) return duplicate(text.slice(start, end), envelope)
      // Earlier envelope keys are pairwise no case variants, so at most one can match here.
      if (foldCase && sameAsciiFolded(text, other, start, length)) {
        return {
          kind: 'case-variant-key',
          key: reported(text.slice(start, end)),
          other: reported(text.slice(other, other + length)),
        }
      }
    }
    if (keyTop === keyStarts.length) growKeys()
    keyStarts[keyTop] = start
    keyEnds[keyTop] = end
    keyTop++
  }
  // Case variants matter only in the envelope, where routing decisions are made; payloads may
  // legitimately carry both "Name" and "name".
  if (envelope && caseInPlace[frame] === 0) {
    key ??= keyText(text, start, end, escaped)
    if (key === undefined) return SYNTAX
    const lower = key.toLowerCase()
    // Set when the frame left the in-place mode, at this key or an earlier one.
    const seen = lowerKeys[frame] as Map<string, string>
    const other = seen.get(lower)
    if (other !== undefined) {
      return { kind: 'case-variant-key', key: reported(key), other: reported(other) }
    }
    seen.set(lower, key)
  }
  return undefined
}

function duplicate(key: string, envelope: boolean): JsonLimitViolation {
  return { kind: 'duplicate-key', key: reported(key), path: envelope ? '' : '(nested)' }
}

function hasEscape(text: string, start: number, end: number): boolean {
  for (let k = start; k < end; k++) if (text.charCodeAt(k) === BACKSLASH) return true
  return false
}

/** What `keyForm` found in a key: only ASCII and no escape, a non-ASCII unit, or an escape. */
const PLAIN_ASCII = 0
const NON_ASCII = 1
const ESCAPED = 2

/** Whether the key text[start, end) has an escape (first), or else a non-ASCII unit. */
function keyForm(text: string, start: number, end: number): number {
  let form = PLAIN_ASCII
  for (let k = start; k < end; k++) {
    const c = text.charCodeAt(k)
    if (c === BACKSLASH) return ESCAPED
    if (c > 0x7f) form = NON_ASCII
  }
  return form
}

/** Whether two plain ASCII ranges are equal once A–Z fold to a–z (what `toLowerCase` does to ASCII). */
function sameAsciiFolded(text: string, a: number, b: number, length: number): boolean {
  for (let k = 0; k < length; k++) {
    const x = text.charCodeAt(a + k)
    const y = text.charCodeAt(b + k)
    if (x === y) continue
    const lower = x | 0x20
    if (lower !== (y | 0x20) || lower < 0x61 || lower > 0x7a) return false
  }
  return true
}

function sameText(text: string, a: number, b: number, length: number): boolean {
  for (let k = 0; k < length; k++) {
    if (text.charCodeAt(a + k) !== text.charCodeAt(b + k)) return false
  }
  return true
}

/** The decoded key text[start, end), or undefined when its escapes are not valid JSON. */
function keyText(
  text: string,
  start: number,
  end: number,
  escaped = hasEscape(text, start, end),
): string | undefined {
  const raw = text.slice(start, end)
  if (!escaped) return raw
  try {
    return JSON.parse(`"${raw}"`) as string
  } catch {
    return undefined
  }
}

function reported(key: string): string {
  return key.length > MAX_REPORTED_KEY ? `${key.slice(0, MAX_REPORTED_KEY)}…` : key
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
