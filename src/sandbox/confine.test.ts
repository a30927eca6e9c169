import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { describe, test } from 'node:test'
import { BarbicanError } from '../common/errors.ts'
import { inferGrants } from '../config/sandbox-grants.ts'
import {
  confinementOf,
  describeConfinement,
  describeConfinementInFull,
  launchConfined,
  mechanismGrantLines,
} from './confine.ts'
import {
  DEFAULT_SANDBOX_LIMITS,
  MECHANISM_ENV,
  mechanismSettingError,
  type SandboxSpec,
  sandboxFacility,
} from './sandbox.ts'

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
    assert.equal(
      describeConfinement('py', spec({ fallback: 'unconfined' }), '/bin/sh', noBwrap),
      'unconfined (sandbox.fallback: unconfined)',
    )
    assert.match(
      describeConfinementInFull('py', spec({ fallback: 'unconfined' }), '/bin/sh', noBwrap),
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
      describeConfinementInFull('s', spec(), 'node', noBwrap),
      /^node-permission .*not covered: network/,
    )
    assert.match(
      describeConfinement('s', spec(), 'node', noBwrap),
      /^node-permission \(network not confined; writes: state(; runs as root)?\)$/,
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

describe('the sandbox line (ADR 109)', () => {
  const bwrap = {
    bwrap: '/usr/bin/bwrap',
    prlimit: '/usr/bin/prlimit',
    setpriv: '/usr/bin/setpriv',
  }

  test('is short: mechanism, network, where it writes, what it reads', () => {
    const data = join(dir, 'short-data')
    const ref = join(dir, 'short-ref')
    mkdirSync(data, { recursive: true })
    mkdirSync(ref, { recursive: true })
    const grants = inferGrants(
      { command: 'node', args: ['x.js', data], env: { DB: 'postgres://127.0.0.1:5432/d' } },
      { protect: [], explicit: { read: [ref], write: [] } },
    )
    const line = describeConfinement(
      's',
      spec({ grants, connect: grants.connect, read: [ref] }),
      'node',
      bwrap,
    )
    assert.equal(
      line,
      `bubblewrap (network: 127.0.0.1:5432; writes: state, ${data}; reads: ${ref})`,
    )
    assert.ok(line.length < 200, line)
    assert.equal(
      describeConfinement('s', spec(), 'node', bwrap),
      'bubblewrap (no network; writes: state)',
    )
    assert.equal(
      describeConfinement(
        's',
        spec({ network: { allow: ['api.github.com'], maxConnections: 32 } }),
        'node',
        bwrap,
      ),
      'bubblewrap (network: api.github.com; writes: state)',
    )
  })

  test('counts the paths not granted and points at check --verbose', () => {
    const grants = inferGrants({ command: 'node', args: ['x.js', '/'], env: {} }, { protect: [] })
    assert.match(
      describeConfinement('s', spec({ grants }), 'node', bwrap),
      /; 1 path\(s\) not granted, see check --verbose\)$/,
    )
  })

  test('in full, names the mechanism, its state and what it leaves open', () => {
    const line = describeConfinementInFull('s', spec(), 'node', bwrap)
    assert.match(line, /^bubblewrap \(mount, pid, net, ipc, uts namespaces\) \+ prlimit/)
    assert.match(line, /state .*; not covered: /)
  })
})

describe("check --verbose's grants of the mechanism itself (ADR 145)", () => {
  test('the fallback lists every path it reads beyond the entry, the existence probes included', () => {
    const lines = mechanismGrantLines(spec(), 'node', noBwrap)
    for (const probe of ['/proc/sys/fs/binfmt_misc/WSLInterop', '/run/WSL', '/.dockerenv']) {
      assert.ok(
        lines.includes(
          `grant: read ${probe} (node-permission: an existence probe of popular packages, this path alone, ADR 108)`,
        ),
        lines.join('\n'),
      )
    }
    assert.ok(lines.some((l) => l.startsWith(`grant: write ${join(dir, 'state')}/.tmp `)))
  })

  test("bubblewrap's: the system, the state directory, the package, a private /tmp; no probes", () => {
    const bwrap = {
      bwrap: '/usr/bin/bwrap',
      prlimit: '/usr/bin/prlimit',
      setpriv: '/usr/bin/setpriv',
    }
    const lines = mechanismGrantLines(spec(), 'node', bwrap)
    assert.ok(lines.some((l) => /^grant: read \/usr, \/etc.*\(bubblewrap: /.test(l)))
    assert.ok(
      lines.includes('grant: write /tmp (bubblewrap: private to the sandbox, empty at each start)'),
    )
    assert.ok(!lines.some((l) => l.includes('WSL')))
  })

  test('an unconfined entry gets no such lines', () => {
    assert.deepEqual(mechanismGrantLines('none', 'node', noBwrap), [])
    assert.deepEqual(mechanismGrantLines(spec({ fallback: 'unconfined' }), '/bin/sh', noBwrap), [])
  })
})

describe('a BARBICAN_SANDBOX_MECHANISM value Barbican does not know', () => {
  const bad = {
    missing: 'BARBICAN_SANDBOX_MECHANISM="bwrap" is not a sandbox mechanism',
    invalid: true as const,
  }

  test('refuses every confined launch: Node ones, and with sandbox.fallback: unconfined', () => {
    for (const [command, extra] of [
      ['/bin/sh', { fallback: 'unconfined' as const }],
      ['node', {}],
      ['node', { fallback: 'unconfined' as const }],
    ] as const) {
      assert.equal(confinementOf(spec(extra), command, bad), 'refused')
      assert.throws(
        () =>
          launchConfined(
            's',
            { command, args: ['x.js'], env: { PATH: dirname(process.execPath) } },
            spec(extra),
            bad,
          ),
        (err: unknown) =>
          err instanceof BarbicanError &&
          err.code === 'ERR_LAUNCH_REFUSED' &&
          /"bwrap" is not a sandbox mechanism/.test(err.message),
      )
      assert.match(describeConfinement('s', spec(extra), command, bad), /^refused: .*"bwrap"/)
    }
  })

  test('is an error naming the value and the good ones, before anything starts', () => {
    const err = mechanismSettingError({ BARBICAN_SANDBOX_MECHANISM: 'bwrap' })
    assert.equal(err?.code, 'ERR_CONFIG_INVALID')
    assert.match(
      String(err?.message),
      /BARBICAN_SANDBOX_MECHANISM="bwrap".*expected auto or node-permission/,
    )
    for (const ok of [undefined, '', 'auto', 'node-permission']) {
      assert.equal(mechanismSettingError({ BARBICAN_SANDBOX_MECHANISM: ok }), undefined, ok)
    }
  })

  test('sandboxFacility marks it invalid, whatever the host has', () => {
    const previous = process.env[MECHANISM_ENV]
    process.env[MECHANISM_ENV] = 'none'
    try {
      const found = sandboxFacility()
      assert.ok('missing' in found && found.invalid === true)
    } finally {
      if (previous === undefined) delete process.env[MECHANISM_ENV]
      else process.env[MECHANISM_ENV] = previous
    }
  })
})
