import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import {
  confinedLaunch,
  DEFAULT_SANDBOX_LIMITS,
  describeConfinement,
  packageRootOf,
  type SandboxSpec,
  sandboxView,
} from './sandbox.ts'

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
  const noBwrap = { missing: 'bubblewrap (the `bwrap` program)' }

  test('refuses a program that is not Node without bubblewrap, naming it and sandbox: none', () => {
    assert.throws(
      () => confinedLaunch('s', { command: '/bin/sh', args: [], env: {} }, spec(), noBwrap),
      (err: unknown) =>
        err instanceof BarbicanError &&
        err.code === 'ERR_LAUNCH_REFUSED' &&
        /lacks bubblewrap/.test(err.message) &&
        /sandbox: none/.test(err.message),
    )
    assert.match(
      describeConfinement('s', spec(), '/bin/sh', noBwrap),
      /^refused: this host lacks bubblewrap/,
    )
  })

  test('runs Node under its permission model without bubblewrap, with the same file view', () => {
    const served = join(dir, 'served-np')
    mkdirSync(served, { recursive: true })
    const launch = confinedLaunch(
      's',
      {
        command: 'node',
        args: ['--max-old-space-size=64', 'x.js', served],
        env: { PATH: dirname(process.execPath) },
      },
      spec(),
      noBwrap,
    )
    assert.equal(launch.mechanism, 'node-permission')
    assert.equal(launch.command, process.execPath)
    assert.equal(launch.args[0], '--permission')
    assert.ok(launch.args.includes(`--allow-fs-write=${served}`))
    assert.ok(launch.args.includes(`--allow-fs-write=${join(dir, 'state')}`))
    assert.ok(launch.args.includes(`--allow-fs-write=${join(dir, 'state/.tmp')}`))
    assert.ok(!launch.args.some((a) => /^--allow-(child-process|worker|addons|wasi)/.test(a)))
    assert.deepEqual(launch.args.slice(-3), ['--max-old-space-size=64', 'x.js', served])
    assert.equal(launch.env.HOME, join(dir, 'state'))
    assert.match(
      describeConfinement('s', spec(), 'node', noBwrap),
      /^node-permission .*not covered: network/,
    )
  })

  test('refuses Node options that would loosen the permission model', () => {
    for (const [args, env] of [
      [['--allow-child-process', 'x.js'], {}],
      [['x.js'], { NODE_OPTIONS: '--allow-worker' }],
    ] as const) {
      assert.throws(
        () => confinedLaunch('s', { command: process.execPath, args, env }, spec(), noBwrap),
        /would loosen it/,
      )
    }
  })

  test("refuses the fallback when a granted folder holds Barbican's files it cannot hide", () => {
    const granted = join(dir, 'granted-np')
    mkdirSync(granted, { recursive: true })
    writeFileSync(join(granted, 'barbican.yaml'), 'secret: 1')
    assert.throws(
      () =>
        confinedLaunch(
          's',
          { command: process.execPath, args: [granted], env: {} },
          spec({ protect: [join(granted, 'barbican.yaml')] }),
          noBwrap,
        ),
      /cannot hide/,
    )
  })

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
