/**
 * Docs as a map (issue 30, point 5): every source path README.md and docs/ name exists, so a
 * reader who follows one finds the file. A record that names a file since removed says so in
 * words rather than by a path.
 */
import assert from 'node:assert/strict'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

const ROOT = new URL('../../', import.meta.url).pathname
const PATH = /\b(?:src|test|bench|scripts)\/[A-Za-z0-9_./-]+\.(?:ts|js|md)\b/g

function markdownFiles(): string[] {
  const docs = ['docs', 'docs/decisions'].flatMap((dir) =>
    readdirSync(join(ROOT, dir))
      .filter((name) => name.endsWith('.md'))
      .map((name) => `${dir}/${name}`),
  )
  return ['README.md', ...docs]
}

/** The paths a text names, leaving out globs and placeholders, which name no one file. */
export function pathsNamedIn(text: string): string[] {
  return [...new Set(text.match(PATH) ?? [])].filter((p) => !/[*<>]|\/\.\.?\//.test(p))
}

describe('paths named in the docs', () => {
  it('exist in the tree', () => {
    const missing = markdownFiles().flatMap((file) =>
      pathsNamedIn(readFileSync(join(ROOT, file), 'utf8'))
        .filter((path) => !existsSync(join(ROOT, path)))
        .map((path) => `${file}: ${path}`),
    )
    assert.deepEqual(missing, [])
  })

  it('finds the paths a text names', () => {
    assert.deepEqual(pathsNamedIn('see `src/relay/steps.ts` and src/app/app.ts, not src/**/x.ts'), [
      'src/relay/steps.ts',
      'src/app/app.ts',
    ])
  })
})
