/**
 * What a fresh clone needs and nothing more: `git clone … && npm ci && npm test` with nothing
 * beside the checkout. The MCP schemas the tests validate against are in the repository, nothing
 * reads a folder outside it, and the lockfile lists every platform's optional binaries (npm ci
 * refuses a lockfile that lacks one that the package it belongs to declares).
 */
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { REVISIONS } from '../../src/protocol/revisions.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
/** Spelt in two parts so that this file does not name it itself. */
const OUTSIDE = `..${'/'}shared`

function trackedFiles(): string[] {
  return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8' })
    .split('\0')
    .filter((file) => file !== '' && existsSync(join(ROOT, file)))
}

describe('a fresh clone', () => {
  test('has the official schema of every revision Barbican speaks', () => {
    for (const revision of REVISIONS) {
      const file = join(ROOT, 'test/fixtures/spec', revision, 'schema.json')
      assert.ok(existsSync(file), `${file} is missing`)
      const schema = JSON.parse(readFileSync(file, 'utf8')) as { $schema?: unknown }
      assert.match(String(schema.$schema), /json-schema\.org/, file)
    }
    assert.ok(existsSync(join(ROOT, 'test/fixtures/spec/2026-07-28/examples')))
    assert.match(readFileSync(join(ROOT, 'test/fixtures/spec/README.md'), 'utf8'), /MIT/)
  })

  test(`no file of the repository names ${OUTSIDE}`, () => {
    const offenders = trackedFiles().filter((file) =>
      readFileSync(join(ROOT, file), 'latin1').includes(OUTSIDE),
    )
    assert.deepEqual(offenders, [])
  })

  test("the lockfile lists every locked package's optional dependencies, for every platform", () => {
    type Locked = { optionalDependencies?: Record<string, string> }
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, Locked>
    }
    const missing: string[] = []
    for (const [path, entry] of Object.entries(lock.packages)) {
      for (const name of Object.keys(entry.optionalDependencies ?? {})) {
        // npm resolves a dependency from the package's own node_modules up to the root.
        const candidates = [`${path ? `${path}/` : ''}node_modules/${name}`]
        for (let at = path; at.includes('node_modules/'); ) {
          at = at.slice(0, at.lastIndexOf('node_modules/')).replace(/\/$/, '')
          candidates.push(`${at ? `${at}/` : ''}node_modules/${name}`)
        }
        if (!candidates.some((c) => c in lock.packages)) missing.push(`${path} → ${name}`)
      }
    }
    assert.deepEqual(missing, [])
  })
})
