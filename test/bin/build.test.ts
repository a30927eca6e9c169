import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'

// scripts/build.js into a scratch folder: what bin/barbican.js and src/lazy-deps.ts rely on.
const BUILD = fileURLToPath(new URL('../../scripts/build.js', import.meta.url))
const require = createRequire(import.meta.url)

describe('scripts/build.js', () => {
  let out: string
  before(() => {
    out = mkdtempSync(join(tmpdir(), 'barbican-build-'))
    execFileSync(process.execPath, [BUILD, '--strict', '--out', out], {
      encoding: 'utf8',
      timeout: 60_000,
    })
  })
  after(() => rmSync(out, { recursive: true, force: true }))

  test('writes the entry, the launcher and the stamp, all in one folder', () => {
    for (const file of ['main.js', 'stdio-launcher.js', '.build-started'])
      assert.ok(existsSync(join(out, file)), file)
    const started = Number(readFileSync(join(out, '.build-started'), 'utf8'))
    assert.ok(started > Date.now() - 120_000 && started <= Date.now())
    assert.deepEqual(
      readdirSync(out, { withFileTypes: true }).filter((e) => e.isDirectory()),
      [],
    )
  })

  test('static imports of Node built-ins are gone (they go through getBuiltinModule)', () => {
    for (const file of readdirSync(out).filter((f) => f.endsWith('.js'))) {
      const code = readFileSync(join(out, file), 'utf8')
      assert.doesNotMatch(code, /\bfrom\s*["'](node:)?(http|crypto|util|fs|net)["']/, file)
    }
    assert.match(readFileSync(join(out, 'main.js'), 'utf8'), /getBuiltinModule\("node:http"\)/)
  })

  test('every file is ASCII, so V8 keeps its source as one byte per character', () => {
    for (const file of readdirSync(out).filter((f) => /\.(c?js)$/.test(f))) {
      const bytes = readFileSync(join(out, file))
      assert.equal(
        bytes.findIndex((byte) => byte > 0x7f),
        -1,
        file,
      )
    }
  })

  test('the one-file copies export what the packages export', () => {
    for (const name of ['undici', 'ws', 'jose']) {
      const copy = require(join(out, `${name}.cjs`)) as Record<string, unknown>
      const original = require(name) as Record<string, unknown>
      assert.equal(typeof copy, typeof original, name)
      assert.deepEqual(Object.keys(copy).sort(), Object.keys(original).sort(), name)
    }
  })
})
