/**
 * No room too big to read (issue 30, point 7): no source file over 600 lines and no function
 * over 120, in src/ (tests aside) and in the contract suites of test/contracts/. Lines are
 * counted as an editor shows them, comments and blank lines included: what a reader scrolls.
 */
import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative, sep } from 'node:path'
import { describe, it } from 'node:test'
import ts from 'typescript'

const MAX_FILE_LINES = 600
const MAX_FUNCTION_LINES = 120

const ROOT = new URL('../../', import.meta.url).pathname
const SCANNED = ['src', 'test/contracts']

/**
 * Files left over the limits, each with why. Empty since issue 30 ended: a file that grows past
 * a limit is split, not listed. The test fails once a listed file is back under the limits.
 */
const ALLOWED: Readonly<Record<string, string>> = {}

interface Oversize {
  readonly file: string
  readonly what: string
}

function lineOf(source: ts.SourceFile, pos: number): number {
  return source.getLineAndCharacterOfPosition(pos).line
}

/** A function's name as a reader finds it: its own, or what it is assigned to or passed to. */
function nameOf(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(source)
  const parent = node.parent
  if (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) {
    return parent.name.getText(source)
  }
  if (ts.isCallExpression(parent)) return `callback of ${parent.expression.getText(source)}`
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  return 'anonymous function'
}

function oversizeIn(file: string, text: string): Oversize[] {
  const found: Oversize[] = []
  const lines = text.split('\n').length - (text.endsWith('\n') ? 1 : 0)
  if (lines > MAX_FILE_LINES) found.push({ file, what: `${lines} lines` })
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true)
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const start = lineOf(source, node.getStart(source))
      const length = lineOf(source, node.getEnd()) - start + 1
      if (length > MAX_FUNCTION_LINES) {
        const fn = node as ts.FunctionLikeDeclaration
        found.push({ file, what: `${nameOf(fn, source)} (line ${start + 1}): ${length} lines` })
      }
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return found
}

/** Every non-test TypeScript module under the scanned folders, by path relative to the root. */
function modules(): Map<string, string> {
  const found = new Map<string, string>()
  for (const folder of SCANNED) {
    for (const entry of readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true })) {
      if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts'))
        continue
      const path = join(entry.parentPath, entry.name)
      found.set(relative(ROOT, path).split(sep).join('/'), readFileSync(path, 'utf8'))
    }
  }
  return found
}

describe('sizes', () => {
  const all = modules()
  const oversize = [...all].flatMap(([file, text]) => oversizeIn(file, text))

  it(`no source file over ${MAX_FILE_LINES} lines, no function over ${MAX_FUNCTION_LINES}`, () => {
    assert.ok(all.size > 100, `found only ${all.size} modules under ${SCANNED.join(', ')}`)
    const refused = oversize.filter((o) => !(o.file in ALLOWED)).map((o) => `${o.file}: ${o.what}`)
    assert.deepEqual(refused, [], 'split these: one concept per module, one step per function')
  })

  it('allows only files that are still over a limit', () => {
    const over = new Set(oversize.map((o) => o.file))
    assert.deepEqual(
      Object.keys(ALLOWED).filter((file) => !over.has(file)),
      [],
      'remove from ALLOWED the files that are back under the limits',
    )
  })

  it('counts what it should', () => {
    const long = `function long() {\n${'  work()\n'.repeat(MAX_FUNCTION_LINES)}}\n`
    assert.deepEqual(
      oversizeIn('x.ts', long).map((o) => o.what),
      [`long (line 1): ${MAX_FUNCTION_LINES + 2} lines`],
    )
    const method = `class A {\n  m() {\n${'    x()\n'.repeat(MAX_FUNCTION_LINES - 2)}  }\n}\n`
    assert.deepEqual(oversizeIn('y.ts', method), [])
    const file = 'const a = 1\n'.repeat(MAX_FILE_LINES + 1)
    assert.deepEqual(
      oversizeIn('z.ts', file).map((o) => o.what),
      [`${MAX_FILE_LINES + 1} lines`],
    )
  })
})
