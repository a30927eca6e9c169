/**
 * The test tiers (docs/decisions/106): every test file runs in exactly one of `npm run test:unit`,
 * `test:integration` and `test:conformance`, and `npm test` runs all three. The tiers are the
 * globs in package.json, so this test reads them there: a file no glob matches would never run,
 * and one matched twice would run twice. A unit test stays in-process, so a file of the unit tier
 * that reaches for a process, a database, a browser or a whole gateway must be renamed
 * `*.integration.test.ts`.
 */
import assert from 'node:assert/strict'
import { globSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, it } from 'node:test'

const root = join(import.meta.dirname, '../..')
const scripts: Record<string, string> = JSON.parse(
  readFileSync(join(root, 'package.json'), 'utf8'),
).scripts
const TIERS = ['test:unit', 'test:integration', 'test:conformance'] as const

/** The files a script's quoted globs name, as `node --test` expands them. */
function filesOf(script: string): string[] {
  const globs = [...script.matchAll(/"([^"]+)"/g)].map((m) => m[1] as string)
  assert.ok(globs.length > 0, `no quoted glob in ${script}`)
  return globs.flatMap((glob) => globSync(glob, { cwd: root }))
}

/**
 * What marks a test as integration when written in the file itself: child processes, the
 * machine's PostgreSQL and Redis, chromium, HAProxy, or a whole gateway on real sockets.
 */
const INTEGRATION_MARKS: readonly RegExp[] = [
  /['"]node:child_process['"]/,
  /support\/(backends|browser|fleet|killed-child|upstream-record)\.ts['"]/,
  /\b(startServer|runServe|startEverything)\(/,
  /from ['"]playwright-core['"]/,
]

describe('test tiers', () => {
  const tiers = new Map(TIERS.map((tier) => [tier, filesOf(scripts[tier] ?? '')]))

  it('npm test runs the check and every tier', () => {
    for (const step of ['check', ...TIERS]) {
      assert.match(scripts.test ?? '', new RegExp(`npm run ${step}(?= |$)`), step)
    }
  })

  it('puts every test file in exactly one tier', () => {
    const all = globSync('{src,test}/**/*.test.ts', { cwd: root }).sort()
    assert.ok(all.length > 200, `only ${all.length} test files found`)
    const wrong = all.flatMap((file) => {
      const homes = TIERS.filter((tier) => tiers.get(tier)?.includes(file))
      return homes.length === 1
        ? []
        : [`${file}: ${homes.length === 0 ? 'no tier' : homes.join(' and ')}`]
    })
    assert.deepEqual(wrong, [])
  })

  it('keeps processes, databases, browsers and gateways out of the unit tier', () => {
    const marked = (tiers.get('test:unit') ?? []).flatMap((file) => {
      const text = readFileSync(join(root, file), 'utf8')
      const mark = INTEGRATION_MARKS.find((re) => re.test(text))
      return mark ? [`${file}: ${mark.source} (rename it *.integration.test.ts)`] : []
    })
    assert.deepEqual(marked, [])
  })

  it('names colocated integration tests *.integration.test.ts', () => {
    for (const file of tiers.get('test:integration') ?? []) {
      assert.match(file, /^(src\/.*\.integration\.test\.ts|test\/(e2e|bin)\/.*\.test\.ts)$/, file)
    }
  })
})
