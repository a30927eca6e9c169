import assert from 'node:assert/strict'
import { readdirSync, readFileSync } from 'node:fs'
import { basename, dirname, join, relative } from 'node:path'
import { describe, it } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BarbicanError, jsonRpcCodeOf, upstreamClosed } from './errors.ts'

const ERRORS = fileURLToPath(new URL('./errors.ts', import.meta.url))

/** The src/ folder, wherever errors.ts sits inside it. */
function srcRoot(): string {
  let dir = dirname(ERRORS)
  while (basename(dir) !== 'src') dir = dirname(dir)
  return dir
}

/** Every non-test module of src/ but errors.ts: path → source. */
function otherModules(): Map<string, string> {
  const root = srcRoot()
  const modules = new Map<string, string>()
  for (const entry of readdirSync(root, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue
    const path = join(entry.parentPath, entry.name)
    if (path !== ERRORS) modules.set(relative(root, path), readFileSync(path, 'utf8'))
  }
  return modules
}

const errorsSource = readFileSync(ERRORS, 'utf8')

/** The codes the ErrorCode union declares. */
const declaredCodes = [...errorsSource.matchAll(/^ {2}\| '(ERR_[A-Z_]+)'$/gm)].map((m) => m[1]!)

/** Functions of errors.ts that make an error of `code` (a factory such as upstreamClosed). */
function factoriesOf(code: string): string[] {
  return [...errorsSource.matchAll(/^export function (\w+)\b[\s\S]*?^\}$/gm)]
    .filter((m) => m[0].includes(`'${code}'`))
    .map((m) => m[1]!)
}

describe('error codes', () => {
  it('declares the codes it maps (the union is read from the source)', () => {
    assert.ok(declaredCodes.length >= 10, `read only ${declaredCodes.length} codes`)
    for (const code of declaredCodes) assert.equal(typeof jsonRpcCodeOf(code as never), 'number')
  })

  it('every declared code is used outside errors.ts, itself or through its factory', () => {
    const sources = [...otherModules().values()]
    const unused = declaredCodes.filter((code) => {
      const names = [`'${code}'`, ...factoriesOf(code).map((f) => `${f}(`)]
      return !sources.some((source) => names.some((name) => source.includes(name)))
    })
    assert.deepEqual(unused, [], 'remove these codes or throw them where they apply')
  })

  it('ERR_UPSTREAM_CLOSED is made only by upstreamClosed', () => {
    const direct = [...otherModules()]
      .filter(([, source]) => /new BarbicanError\(\s*'ERR_UPSTREAM_CLOSED'/.test(source))
      .map(([path]) => path)
    assert.deepEqual(direct, [])
  })

  it('upstreamClosed words the message after the upstream and keeps data and cause', () => {
    const cause = new Error('EPIPE')
    const err = upstreamClosed('files', 'input closed', { cause, data: { httpStatus: 404 } })
    assert.ok(err instanceof BarbicanError)
    assert.equal(err.code, 'ERR_UPSTREAM_CLOSED')
    assert.equal(err.message, 'Upstream "files" input closed')
    assert.equal(err.cause, cause)
    assert.deepEqual(err.data, { httpStatus: 404 })
    assert.equal(jsonRpcCodeOf(err.code), -32007)
  })
})
