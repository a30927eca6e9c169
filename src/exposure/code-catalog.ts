/**
 * The catalog as a code-mode program sees it (ADR 075): one namespace per upstream, one async
 * function per tool (`await files.read_file({ path })`), and the TypeScript declarations of
 * them all, which the `run_code` tool's description carries. Pure: the session binds each
 * function to a call through the policy chain.
 */

import type { Catalog } from '../catalog/catalog.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'

/** The one tool a code-mode server lists. */
export const RUN_CODE = 'run_code'

/** Where one program function leads: the exposed tool name a direct `tools/call` would use. */
export interface CodeFunction {
  readonly namespace: string
  readonly name: string
  /** The exposed tool name, as in `tools/call`. */
  readonly tool: string
}

/**
 * QuickJS's own globals (and `console`): a namespace must not shadow one, or a program would
 * lose `JSON` to an upstream named "JSON".
 */
const TAKEN = new Set([
  'console',
  'globalThis',
  'Object',
  'Function',
  'Array',
  'Number',
  'Boolean',
  'String',
  'Symbol',
  'BigInt',
  'Math',
  'JSON',
  'Date',
  'RegExp',
  'Promise',
  'Proxy',
  'Reflect',
  'Map',
  'Set',
  'WeakMap',
  'WeakSet',
  'WeakRef',
  'Error',
  'Iterator',
  'eval',
  'undefined',
  'NaN',
  'Infinity',
])

/** Words a namespace (a global binding) may not be. */
const RESERVED = new Set(
  (
    'break case catch class const continue debugger default delete do else enum export extends ' +
    'false finally for function if import in instanceof new null return super switch this throw ' +
    'true try typeof var void while with yield let static implements interface package private ' +
    'protected public await arguments'
  ).split(' '),
)

/** `name` made a JavaScript identifier: other characters become `_`, never a leading digit. */
function identifier(name: string): string {
  const id = name.replace(/[^A-Za-z0-9_$]/g, '_')
  return /^[0-9]/.test(id) || id === '' ? `_${id}` : id
}

/** A name not yet in `used`, by suffixing `_2`, `_3`, …; recorded as used. */
function unique(name: string, used: Set<string>): string {
  let candidate = name
  for (let n = 2; used.has(candidate); n++) candidate = `${name}_${n}`
  used.add(candidate)
  return candidate
}

/** The program functions of `catalog`'s tools, in catalog order. */
export function codeFunctions(catalog: Catalog): CodeFunction[] {
  const spaces = new Map<string, string>()
  const usedSpaces = new Set<string>()
  const usedNames = new Map<string, Set<string>>()
  const functions: CodeFunction[] = []
  for (const tool of catalog.tools) {
    const exposed = String(tool.name)
    const target = catalog.toolTargets.get(exposed)
    if (!target) continue
    let namespace = spaces.get(target.upstream)
    if (namespace === undefined) {
      let id = identifier(target.upstream)
      if (TAKEN.has(id) || RESERVED.has(id)) id = `${id}_`
      namespace = unique(id, usedSpaces)
      spaces.set(target.upstream, namespace)
      usedNames.set(namespace, new Set())
    }
    const name = unique(identifier(target.original), usedNames.get(namespace)!)
    functions.push({ namespace, name, tool: exposed })
  }
  return functions
}

/** Longest description kept per function, in characters (the rest is one search away). */
const DESCRIPTION_CHARS = 300

/** The TypeScript declarations of `functions` (the tools of `catalog` they stand for). */
export function declarations(catalog: Catalog, functions: readonly CodeFunction[]): string {
  const byTool = new Map(catalog.tools.map((t) => [String(t.name), t]))
  const spaces = new Map<string, string[]>()
  for (const fn of functions) {
    const tool = byTool.get(fn.tool)
    if (!tool) continue
    const lines = spaces.get(fn.namespace) ?? []
    spaces.set(fn.namespace, lines)
    const about = summary(tool.description)
    if (about) lines.push(`  /** ${about} */`)
    const args = typeOf(tool.inputSchema, 2)
    const result = tool.outputSchema === undefined ? 'any' : typeOf(tool.outputSchema, 2)
    lines.push(`  function ${fn.name}(args: ${args}): Promise<${result}>`)
  }
  return [...spaces]
    .map(([space, lines]) => `declare namespace ${space} {\n${lines.join('\n')}\n}`)
    .join('\n')
}

/** A description on one line, cut at `DESCRIPTION_CHARS`, safe inside a comment. */
function summary(description: unknown): string {
  if (typeof description !== 'string') return ''
  const flat = description.replace(/\s+/g, ' ').trim().replaceAll('*/', '* /')
  return flat.length > DESCRIPTION_CHARS ? `${flat.slice(0, DESCRIPTION_CHARS - 1)}…` : flat
}

/** Deepest nesting rendered; below it a value is `any`. */
const MAX_DEPTH = 5

/** A TypeScript type for a JSON Schema, as far as declarations need it. */
function typeOf(schema: unknown, indent: number, depth = 0): string {
  if (schema === null || typeof schema !== 'object' || depth > MAX_DEPTH) return 'any'
  const s = schema as JsonObject
  if ('const' in s) return JSON.stringify(s.const)
  if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(' | ') || 'never'
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = s[key]
    if (Array.isArray(options)) {
      return options.map((o) => typeOf(o, indent, depth + 1)).join(' | ') || 'any'
    }
  }
  const type = s.type
  if (Array.isArray(type)) {
    return type.map((t) => typeOf({ ...s, type: t }, indent, depth + 1)).join(' | ') || 'any'
  }
  switch (type) {
    case 'string':
      return 'string'
    case 'number':
    case 'integer':
      return 'number'
    case 'boolean':
      return 'boolean'
    case 'null':
      return 'null'
    case 'array': {
      const item = typeOf(s.items, indent, depth + 1)
      return /^[\w.]+$/.test(item) ? `${item}[]` : `Array<${item}>`
    }
    case 'object':
    case undefined:
      return s.properties === undefined && type === undefined ? 'any' : objectType(s, indent, depth)
    default:
      return 'any'
  }
}

function objectType(s: JsonObject, indent: number, depth: number): string {
  const props = s.properties
  const required = new Set(Array.isArray(s.required) ? s.required.map(String) : [])
  const pad = ' '.repeat(indent + 2)
  const fields: string[] = []
  if (props !== null && typeof props === 'object' && !Array.isArray(props)) {
    for (const [key, value] of Object.entries(props)) {
      const about =
        value !== null && typeof value === 'object'
          ? summary((value as JsonObject).description)
          : ''
      const name = /^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)
      const optional = required.has(key) ? '' : '?'
      const comment = about ? ` /** ${about} */` : ''
      fields.push(`${pad}${name}${optional}: ${typeOf(value, indent + 2, depth + 1)};${comment}`)
    }
  }
  const extra = s.additionalProperties
  if (extra !== undefined && extra !== false && fields.length === 0) {
    return `Record<string, ${extra === true ? 'any' : typeOf(extra, indent, depth + 1)}>`
  }
  if (fields.length === 0) return '{}'
  return `{\n${fields.join('\n')}\n${' '.repeat(indent)}}`
}

/** The `run_code` tool: its description explains the contract and carries the declarations. */
export function runCodeTool(catalog: Catalog, functions: readonly CodeFunction[]): JsonObject {
  const description = [
    'Runs a JavaScript program (ES2023, no modules) in an isolated QuickJS sandbox and returns ' +
      'its console output and its return value. Use it to combine several tool calls in one ' +
      'step. The program runs inside an async function: use `await`, and `return` a value. ' +
      'The only host access is the functions declared below (each is one tool call, under the ' +
      "caller's permissions) and `console.log`. A function resolves to the tool's " +
      'structuredContent when it has one, else the text of its content (or its content blocks ' +
      'when not all text); a tool error rejects with an Error. There is no require, import, ' +
      'fetch, process, timer or file access.',
    '',
    '```ts',
    functions.length > 0
      ? declarations(catalog, functions)
      : '// No tools: this server offers none this caller may call (or none is up).',
    '```',
  ].join('\n')
  return {
    name: RUN_CODE,
    title: 'Run code',
    description,
    inputSchema: {
      type: 'object',
      properties: {
        code: {
          type: 'string',
          description: 'The program: the body of an async function (`await`, `return`).',
        },
      },
      required: ['code'],
      additionalProperties: false,
    },
  }
}
