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
