import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { confinementOf, describeConfinement, launchConfined } from './confine.ts'
import { DEFAULT_SANDBOX_LIMITS, type SandboxSpec } from './sandbox.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-confine-unit-')))
const spec = (extra: Partial<SandboxSpec> = {}): SandboxSpec => ({
  stateDir: join(dir, 'state'),
  read: [],
  write: [],
  protect: [],
  limits: DEFAULT_SANDBOX_LIMITS,
  ...extra,
})
const noBwrap = { missing: 'bubblewrap (the `bwrap` program)' }

describe('confinement without bubblewrap', () => {
  test('refuses a program that is not Node, naming both lines that run it anyway', () => {
    assert.throws(
      () => launchConfined('py', { command: '/bin/sh', args: [], env: {} }, spec(), noBwrap),
      (err: unknown) =>
        err instanceof BarbicanError &&
        err.code === 'ERR_LAUNCH_REFUSED' &&
        /lacks bubblewrap/.test(err.message) &&
        /add `sandbox: none` to this entry \(upstreams\.py\)/.test(err.message) &&
        /`sandbox: \{ fallback: unconfined \}` at the top level/.test(err.message),
    )
    assert.equal(confinementOf(spec(), '/bin/sh', noBwrap), 'refused')
    const line = describeConfinement('py', spec(), '/bin/sh', noBwrap)
    assert.match(line, /^refused: this host lacks bubblewrap/)
    assert.match(line, /sandbox: none/)
    assert.match(line, /fallback: unconfined/)
  })

  test('runs it as given, marked unconfined, when sandbox.fallback is unconfined', () => {
    const launch = { command: '/bin/sh', args: ['-c', 'true'], env: { A: '1' } }
    const run = launchConfined('py', launch, spec({ fallback: 'unconfined' }), noBwrap)
    assert.equal(run.mechanism, 'unconfined')
    assert.equal(run.command, '/bin/sh')
    assert.deepEqual(run.args, ['-c', 'true'])
    assert.equal(confinementOf(spec({ fallback: 'unconfined' }), '/bin/sh', noBwrap), 'unconfined')
    assert.match(
      describeConfinement('py', spec({ fallback: 'unconfined' }), '/bin/sh', noBwrap),
      /^unconfined \(sandbox\.fallback: unconfined; this host lacks bubblewrap/,
    )
  })

  test('the fallback never loosens a Node server: it still runs under the permission model', () => {
    const run = launchConfined(
      'js',
      { command: 'node', args: ['x.js'], env: { PATH: dirname(process.execPath) } },
      spec({ fallback: 'unconfined' }),
      noBwrap,
    )
    assert.equal(run.mechanism, 'node-permission')
    assert.equal(confinementOf(spec({ fallback: 'unconfined' }), 'npx', noBwrap), 'node-permission')
  })

  test('runs Node under its permission model, with the same file view', () => {
    const served = join(dir, 'served-np')
    mkdirSync(served, { recursive: true })
    const launch = launchConfined(
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
        () => launchConfined('s', { command: process.execPath, args, env }, spec(), noBwrap),
        /would loosen it/,
      )
    }
  })

  test('says when an upstream opted out', () => {
    assert.match(describeConfinement('s', 'none'), /^none \(sandbox: none/)
    assert.equal(confinementOf('none', 'node', noBwrap), 'none')
  })
})
