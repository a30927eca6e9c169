import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

// bin/barbican.js in a scratch checkout whose src/ and dist/ entries only say which one ran.
const BIN = fileURLToPath(new URL('../../bin/barbican.js', import.meta.url))
const entry = (which: string) =>
  `export async function main() { process.stdout.write('${which}'); return 0 }\n`

describe('bin/barbican.js', () => {
  let root: string
  before(() => {
    root = mkdtempSync(join(tmpdir(), 'barbican-bin-'))
    mkdirSync(join(root, 'bin'))
    mkdirSync(join(root, 'src/cli'), { recursive: true })
    mkdirSync(join(root, 'src/a/b'), { recursive: true })
    mkdirSync(join(root, 'dist'), { recursive: true })
    copyFileSync(BIN, join(root, 'bin/barbican.js'))
    writeFileSync(join(root, 'package.json'), '{"type":"module"}\n')
    writeFileSync(join(root, 'src/cli/main.ts'), entry('src'))
    writeFileSync(join(root, 'src/a/b/deep.ts'), '')
    writeFileSync(join(root, 'dist/main.js'), entry('dist'))
  })
  after(() => rmSync(root, { recursive: true, force: true }))

  const run = () =>
    execFileSync(process.execPath, [join(root, 'bin/barbican.js')], {
      encoding: 'utf8',
      timeout: 10_000,
    })
  const stamp = (ms: number) => writeFileSync(join(root, 'dist/.build-started'), `${ms}\n`)
  const touch = (path: string, ms: number) => utimesSync(join(root, path), ms / 1000, ms / 1000)

  const ageSources = () => {
    touch('src/cli/main.ts', Date.now() - 60_000)
    touch('src/a/b/deep.ts', Date.now() - 60_000)
  }

  test('runs the build when every source file is older than the build', () => {
    ageSources()
    stamp(Date.now())
    assert.equal(run(), 'dist')
  })

  test('runs the sources when one source file changed after the build started', () => {
    stamp(Date.now() - 60_000)
    touch('src/cli/main.ts', Date.now())
    assert.equal(run(), 'src')
  })

  test('a change in a nested folder counts too', () => {
    ageSources()
    stamp(Date.now() - 30_000)
    touch('src/a/b/deep.ts', Date.now())
    assert.equal(run(), 'src')
  })

  test('runs the sources when the build never completed (no stamp)', () => {
    rmSync(join(root, 'dist/.build-started'), { force: true })
    ageSources()
    assert.equal(run(), 'src')
  })

  test('a changed test file does not make the build stale', () => {
    ageSources()
    stamp(Date.now() - 30_000)
    writeFileSync(join(root, 'src/cli/main.test.ts'), '')
    assert.equal(run(), 'dist')
  })

  test('runs the build when there are no sources (an install under node_modules)', () => {
    rmSync(join(root, 'src'), { recursive: true, force: true })
    assert.equal(run(), 'dist')
  })
})
