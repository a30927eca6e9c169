import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { describeConfinement } from './confine.ts'
import { DEFAULT_SANDBOX_LIMITS, packageRootOf, type SandboxSpec, sandboxView } from './sandbox.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-sandbox-unit-')))
const spec = (extra: Partial<SandboxSpec> = {}): SandboxSpec => ({
  stateDir: join(dir, 'state'),
  read: [],
  write: [],
  protect: [],
  limits: DEFAULT_SANDBOX_LIMITS,
  ...extra,
})

describe('sandbox', () => {
  test('binds code read-only with its package, folders in args read-write', () => {
    const pkg = join(dir, 'pkg')
    mkdirSync(join(pkg, 'node_modules/dep/lib'), { recursive: true })
    writeFileSync(join(pkg, 'node_modules/dep/lib/index.js'), '')
    const served = join(dir, 'served')
    mkdirSync(served)
    const view = sandboxView(
      {
        command: 'x',
        args: [join(pkg, 'node_modules/dep/lib/index.js'), served, '--flag'],
        env: {},
      },
      process.execPath,
      spec(),
    )
    assert.equal(
      packageRootOf(join(pkg, 'node_modules/dep/lib/index.js')),
      join(pkg, 'node_modules'),
    )
    assert.ok(view.readOnly.includes(join(pkg, 'node_modules')))
    assert.ok(view.readWrite.includes(served))
    assert.ok(view.readWrite.includes(join(dir, 'state')))
  })

  test("masks Barbican's own files inside a granted folder", () => {
    const granted = join(dir, 'granted')
    mkdirSync(granted)
    writeFileSync(join(granted, 'barbican.yaml'), 'secret: 1')
    const view = sandboxView(
      { command: 'x', args: [], env: {} },
      process.execPath,
      spec({ read: [granted], protect: [join(granted, 'barbican.yaml'), '/nonexistent/x'] }),
    )
    assert.deepEqual(view.masked, [join(granted, 'barbican.yaml')])
  })

  test('says when an upstream runs unconfined', () => {
    assert.match(describeConfinement('s', 'none'), /^none \(sandbox: none/)
  })
})
