/**
 * Turns zod's issues into messages an operator can act on: the exact key path, what was
 * expected, what was found, and for a misspelt key the likely intended one. Unions (an upstream is
 * either a command or a url) are resolved to the branch the operator evidently meant, so one
 * mistake yields one message instead of a report on every alternative.
 */
import type { z } from 'zod'
import { closest } from '../common/suggest.ts'
import type { ConfigIssue, KeyPath } from './config-error.ts'
import { ITEM_NAME_PATTERN, NAME_PATTERN, SEPARATOR_PATTERN } from './defaults.ts'

type Issue = z.core.$ZodIssue

interface Def {
  readonly type: string
  readonly shape?: Record<string, unknown>
  readonly innerType?: unknown
  readonly in?: unknown
  readonly element?: unknown
  readonly valueType?: unknown
  readonly options?: readonly unknown[]
}

/** Converts every zod issue for `input` (validated by `schema`) into ConfigIssues. */
export function issuesFromZod(
  issues: readonly Issue[],
  input: unknown,
  schema: unknown,
): ConfigIssue[] {
  const out: ConfigIssue[] = []
  for (const issue of issues) collect(issue, [], input, schema, out)
  const seen = new Set<string>()
  return out.filter((issue) => {
    const key = `${JSON.stringify(issue.path)} ${issue.message}`
    if (seen.has(key)) return false
    seen.add(key)
    return true
  })
}

function collect(issue: Issue, base: KeyPath, root: unknown, schema: unknown, out: ConfigIssue[]) {
  const path: KeyPath = [...base, ...(issue.path as (string | number)[])]
  const value = valueAt(root, path)
  switch (issue.code) {
    case 'invalid_union': {
      const branch = chooseBranch(issue.errors, value)
      const options = defOf(schemaAt(schema, issue.path as KeyPath))?.options
      if (branch !== undefined) {
        const branchSchema = options?.[branch]
        for (const inner of issue.errors[branch] ?? [])
          collect(inner, path, root, branchSchema, out)
        return
      }
      // A misspelt discriminating key (`comand`) fails every branch. The branch that has the
      // intended key is the one meant: report its problems, the misspelling among them, and not
      // the key it then misses.
      const shapes = (options ?? []).map((option) => Object.keys(defOf(option)?.shape ?? {}))
      const known = shapes.flat()
      const intended = isRecord(value)
        ? Object.keys(value)
            .filter((key) => !known.includes(key))
            .map((key) => closest(key, known))
            .filter((key) => key !== undefined)
        : []
      const meant = shapes.findIndex((keys) => intended.some((key) => keys.includes(key)))
      if (meant < 0) {
        out.push({ path, message: describeUnionMiss(issue.errors, value) })
        return
      }
      for (const inner of issue.errors[meant] ?? []) {
        const missing =
          inner.code === 'invalid_type' && valueAt(value, inner.path as KeyPath) === undefined
        if (missing && intended.includes(String(inner.path[0]))) continue
        collect(inner, path, root, options?.[meant], out)
      }
      return
    }
    case 'unrecognized_keys': {
      const known = Object.keys(defOf(schemaAt(schema, issue.path as KeyPath))?.shape ?? {})
      for (const key of issue.keys)
        out.push({ path: [...path, key], message: unknownKey(key, known) })
      return
    }
    case 'invalid_key': {
      const name = typeof issue.input === 'string' ? issue.input : String(path.at(-1))
      const reason = issue.issues.map((inner) => messageFor(inner, name, path)).join('; ')
      out.push({ path, message: `invalid name ${JSON.stringify(name)}: ${reason}` })
      return
    }
    default:
      out.push({ path, message: messageFor(issue, value, path) })
  }
}

/**
 * The branch the operator meant: the one with the fewest problems, where a type mismatch at the
 * union itself or a missing required key weighs heavily. Undefined when nothing stands out.
 */
function chooseBranch(branches: readonly (readonly Issue[])[], value: unknown): number | undefined {
  const scores = branches.map((issues) => {
    let score = 0
    for (const issue of issues) {
      if (issue.code === 'invalid_type' && issue.path.length === 0) score += 1000
      else if (issue.code === 'invalid_type' && valueAt(value, issue.path as KeyPath) === undefined)
        score += 100
      else if (issue.code === 'unrecognized_keys') score += issue.keys.length
      else score += 1
    }
    return score
  })
  const best = Math.min(...scores)
  const winners = scores.filter((score) => score === best)
  if (winners.length !== 1 || best >= 100) return undefined
  return scores.indexOf(best)
}

function describeUnionMiss(branches: readonly (readonly Issue[])[], value: unknown): string {
  const types = branches.flatMap((issues) =>
    issues.filter((i) => i.code === 'invalid_type' && i.path.length === 0).map((i) => i),
  )
  if (types.length === branches.length) {
    const expected = types.map((i) => (i.code === 'invalid_type' ? i.expected : ''))
    const names = [...new Set(expected)]
    if (names.length === 1)
      return `expected ${typeName(names[0] ?? '')}, got ${describeValue(value, [])}`
    return `expected a ${joinOr(names)}, got ${describeValue(value, [])}`
  }
  // Each branch misses a different required key: name them, which says what the entry can be.
  const required = branches.map((issues) =>
    issues
      .filter((i) => i.code === 'invalid_type' && valueAt(value, i.path as KeyPath) === undefined)
      .map((i) => `"${String(i.path.at(-1))}"`),
  )
  if (required.every((keys) => keys.length > 0)) {
    return `expected a mapping with ${joinOr(required.map((keys) => keys.join(' and ')))}`
  }
  return 'does not match any accepted form'
}

function messageFor(issue: Issue, value: unknown, path: KeyPath): string {
  switch (issue.code) {
    case 'invalid_type':
      if (value === undefined) return `is required (expected ${typeName(issue.expected)})`
      return `expected ${typeName(issue.expected)}, got ${describeValue(value, path)}`
    case 'too_small':
      return bound('at least', issue.origin, Number(issue.minimum), issue.inclusive !== false)
    case 'too_big':
      return bound('at most', issue.origin, Number(issue.maximum), issue.inclusive !== false)
    case 'invalid_format':
      return formatMessage(issue)
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(value, path)}`
    case 'not_multiple_of':
      return `must be a multiple of ${issue.divisor}`
    default:
      return issue.message
  }
}

function formatMessage(issue: z.core.$ZodIssueInvalidStringFormat): string {
  if (issue.format === 'url') return 'expected an absolute http://, https://, ws:// or wss:// URL'
  if (issue.format === 'regex') {
    if (issue.pattern === String(NAME_PATTERN))
      return 'must be 1-64 letters, digits, "_" or "-", starting with a letter or digit'
    if (issue.pattern === String(SEPARATOR_PATTERN))
      return 'must be 1-8 letters, digits, "_", "." or "-"'
    if (issue.pattern === String(ITEM_NAME_PATTERN))
      return 'must be 1-128 letters, digits, "_", "." or "-"'
    return `must match ${issue.pattern ?? 'the expected pattern'}`
  }
  return `expected a valid ${issue.format}`
}

function bound(word: string, origin: string, limit: number, inclusive: boolean): string {
  const n = inclusive ? limit : word === 'at least' ? limit + 1 : limit - 1
  if (origin === 'array') return `must have ${word} ${n} item${n === 1 ? '' : 's'}`
  if (origin === 'string')
    return n === 1 && word === 'at least'
      ? 'must not be empty'
      : `must be ${word} ${n} characters long`
  return `must be ${word} ${n}`
}

function typeName(expected: string): string {
  const names: Record<string, string> = {
    string: 'a string',
    number: 'a number',
    int: 'an integer',
    boolean: 'true or false',
    object: 'a mapping of keys to values',
    record: 'a mapping of keys to values',
    array: 'a list',
  }
  return names[expected] ?? expected
}

/** Shows what was found without ever echoing a value that may be a secret. */
function describeValue(value: unknown, path: KeyPath): string {
  if (value === null) return 'nothing (null)'
  if (Array.isArray(value)) return 'a list'
  if (typeof value === 'object') return 'a mapping'
  const sensitive = path.some((part) => part === 'env' || part === 'headers')
  if (typeof value === 'string') {
    if (sensitive) return 'a string'
    return value.length > 40 ? `"${value.slice(0, 37)}..."` : JSON.stringify(value)
  }
  if (typeof value === 'number' && Number.isFinite(value) && !Number.isInteger(value)) {
    return `the fraction ${value}`
  }
  return `${typeof value} ${String(value)}`
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function unknownKey(key: string, known: readonly string[]): string {
  const close = closest(key, known)
  if (close !== undefined) return `unknown key (did you mean "${close}"?)`
  if (known.length === 0) return 'unknown key'
  return `unknown key; expected one of: ${known.filter((k) => k !== '$schema').join(', ')}`
}

function joinOr(items: readonly string[]): string {
  if (items.length <= 1) return items[0] ?? ''
  return `${items.slice(0, -1).join(', ')} or ${items.at(-1)}`
}

/** The value at `path` in `root`, or undefined where the path leaves the data. */
export function valueAt(root: unknown, path: KeyPath): unknown {
  let node = root
  for (const part of path) {
    if (node === null || typeof node !== 'object') return undefined
    node = (node as Record<string | number, unknown>)[part]
  }
  return node
}

function defOf(schema: unknown): Def | undefined {
  let def = (schema as { _zod?: { def?: Def } } | undefined)?._zod?.def
  // Wrappers (default, optional, pipe of a transform) hide the shape the operator wrote.
  while (def && (def.innerType !== undefined || def.type === 'pipe')) {
    const inner = def.type === 'pipe' ? def.in : def.innerType
    def = (inner as { _zod?: { def?: Def } } | undefined)?._zod?.def
  }
  return def
}

/** Walks the schema along a data path; undefined where a union makes the path ambiguous. */
function schemaAt(schema: unknown, path: KeyPath): unknown {
  let node = schema
  for (const part of path) {
    const def = defOf(node)
    if (!def) return undefined
    if (def.type === 'object') node = def.shape?.[String(part)]
    else if (def.type === 'record') node = def.valueType
    else if (def.type === 'array') node = def.element
    else return undefined
  }
  return node
}
