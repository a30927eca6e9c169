/**
 * `${VAR}` substitution in every string value of a config, so secrets live in the environment
 * and never in the file. Also understands the placeholders of the editor formats Barbican reads
 * (`${env:VAR}`, `${userHome}`, `${workspaceFolder}`), and refuses VS Code's `${input:…}`
 * prompts, which only an editor can answer.
 */
import { homedir } from 'node:os'
import type { ConfigIssue, KeyPath } from './config-error.ts'

/** What placeholders may refer to. */
export interface InterpolationContext {
  readonly env: Readonly<Record<string, string | undefined>>
  /** Value of `${workspaceFolder}` (the project a `.vscode/mcp.json` belongs to). */
  readonly workspaceFolder?: string
}

const VARIABLE = /^[A-Za-z_][A-Za-z0-9_]*$/

/**
 * Returns a copy of `value` with every placeholder in its strings replaced, plus one issue per
 * unresolvable placeholder (all of them, with key paths starting at `base`). Keys are never
 * interpolated: they are names, not values.
 */
export function interpolate(
  value: unknown,
  context: InterpolationContext,
  base: KeyPath = [],
): { value: unknown; issues: ConfigIssue[] } {
  const issues: ConfigIssue[] = []
  const walk = (node: unknown, path: KeyPath): unknown => {
    if (typeof node === 'string') return substitute(node, path, context, issues)
    if (Array.isArray(node)) return node.map((item, index) => walk(item, [...path, index]))
    if (node !== null && typeof node === 'object') {
      const out: Record<string, unknown> = {}
      for (const [key, child] of Object.entries(node)) out[key] = walk(child, [...path, key])
      return out
    }
    return node
  }
  return { value: walk(value, base), issues }
}

function substitute(
  text: string,
  path: KeyPath,
  context: InterpolationContext,
  issues: ConfigIssue[],
): string {
  if (!text.includes('${')) return text
  let out = ''
  let i = 0
  while (i < text.length) {
    const start = text.indexOf('${', i)
    if (start < 0) {
      out += text.slice(i)
      break
    }
    // `$${` is the escape for a literal `${`.
    if (start > 0 && text[start - 1] === '$') {
      out += `${text.slice(i, start - 1)}\${`
      i = start + 2
      continue
    }
    out += text.slice(i, start)
    const end = text.indexOf('}', start + 2)
    if (end < 0) {
      issues.push({
        path,
        message: `has a "\${" without its closing "}" (write "$\${" for a literal "\${")`,
      })
      return text
    }
    const resolved = resolvePlaceholder(text.slice(start + 2, end), path, context, issues)
    if (resolved === undefined) return text
    out += resolved
    i = end + 1
  }
  return out
}

function resolvePlaceholder(
  expression: string,
  path: KeyPath,
  context: InterpolationContext,
  issues: ConfigIssue[],
): string | undefined {
  if (expression.startsWith('input:')) {
    const id = expression.slice('input:'.length)
    issues.push({
      path,
      message: `uses \${input:${id}}, a VS Code input prompt that only the editor can answer; put the value in an environment variable and write \${${suggestName(id)}} instead`,
    })
    return undefined
  }
  if (expression === 'userHome') return homedir()
  if (expression === 'workspaceFolder') {
    if (context.workspaceFolder !== undefined) return context.workspaceFolder
    issues.push({ path, message: `\${workspaceFolder} is only known for a file read from disk` })
    return undefined
  }
  const body = expression.startsWith('env:') ? expression.slice('env:'.length) : expression
  const split = body.indexOf(':-')
  const name = split < 0 ? body : body.slice(0, split)
  const fallback = split < 0 ? undefined : body.slice(split + 2)
  if (!VARIABLE.test(name)) {
    issues.push({
      path,
      message: `"\${${expression}}" is not a placeholder Barbican understands; write \${NAME} or \${NAME:-default} (NAME of letters, digits and "_"), or "$\${" for a literal "\${"`,
    })
    return undefined
  }
  const found = context.env[name]
  // Shell semantics: `:-` also replaces an empty value.
  if (fallback !== undefined) return found === undefined || found === '' ? fallback : found
  if (found !== undefined) return found
  issues.push({
    path,
    message: `${UNSET}${name}, which is not set (set it, or write \${${name}:-default})`,
  })
  return undefined
}

const UNSET = 'needs environment variable '

/**
 * Whether `issue` is a variable that is not set (which setting it fixes), as opposed to a
 * placeholder that can never resolve (`${input:…}`, a malformed one): only the former may hold
 * back an upstream entry instead of failing the load (ADR 121).
 */
export function isUnsetVariable(issue: ConfigIssue): boolean {
  return issue.message.startsWith(UNSET)
}

function suggestName(id: string): string {
  const upper = id.replace(/[^A-Za-z0-9]+/g, '_').toUpperCase()
  return VARIABLE.test(upper) ? upper : 'NAME'
}
