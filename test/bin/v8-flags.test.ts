import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { test } from 'node:test'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))

// V8 flags are process-wide: only the operator sets them (NODE_OPTIONS, docs/performance.md).
test('no code that Barbican runs sets a V8 flag', () => {
  const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', 'src', 'bin'], {
    cwd: ROOT,
    encoding: 'utf8',
  })
    .split('\n')
    .filter((file) => /\.(ts|js)$/.test(file) && !file.endsWith('.test.ts'))
  assert.ok(files.length > 50, `only ${files.length} files found`)
  const setting = files.filter((file) =>
    /setFlagsFromString|--liftoff|--semi-space/.test(readFileSync(join(ROOT, file), 'utf8')),
  )
  assert.deepEqual(setting, [])
})
