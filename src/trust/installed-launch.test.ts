import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { BarbicanError } from '../common/errors.ts'
import { installedLaunch } from './installed-launch.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const pkgDir = join(root, 'node_modules/@modelcontextprotocol/server-everything')
const version = (
  JSON.parse(readFileSync(join(pkgDir, 'package.json'), 'utf8')) as { version: string }
).version
const ctx = { cwd: root, home: '/nonexistent-home' }

describe('installedLaunch', () => {
  test('runs the installed bin of a plain npx command line with Barbican’s Node', () => {
    const line = {
      command: 'npx',
      args: ['-y', `@modelcontextprotocol/server-everything@${version}`, 'stdio'],
    }
    const launch = installedLaunch('e', line, ctx)
    assert.equal(launch?.command, process.execPath)
    assert.match(launch?.args[0] ?? '', /server-everything\/dist\/index\.js$/)
    assert.deepEqual(launch?.args.slice(1), ['stdio'])
  })

  test('refuses a package that is not installed, or not at the version asked for', () => {
    for (const spec of [
      'barbican-no-such-package@1.0.0',
      '@modelcontextprotocol/server-everything@0.0.1',
    ]) {
      assert.throws(
        () => installedLaunch('e', { command: 'npx', args: ['-y', spec] }, ctx),
        (err: unknown) =>
          err instanceof BarbicanError &&
          err.code === 'ERR_LAUNCH_REFUSED' &&
          /no network to install it/.test(err.message) &&
          /sandbox: none/.test(err.message),
      )
    }
  })

  test('leaves other command lines as written', () => {
    assert.equal(installedLaunch('e', { command: 'node', args: ['x.js'] }, ctx), undefined)
    assert.equal(installedLaunch('e', { command: 'npx', args: ['-p', 'a', 'b'] }, ctx), undefined)
  })
})
