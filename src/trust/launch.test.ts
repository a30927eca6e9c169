import assert from 'node:assert/strict'
import { describe, test } from 'node:test'
import { launchOf, splitNpmSpec, splitPythonSpec } from './launch.ts'

describe('recognizing what a stdio command launches', () => {
  test('reads the package and exact version npx runs, past its flags', () => {
    assert.deepEqual(launchOf('npx', ['-y', '@modelcontextprotocol/server-memory@2026.8.31']), {
      kind: 'package',
      runner: 'npx',
      ecosystem: 'npm',
      name: '@modelcontextprotocol/server-memory',
      version: '2026.8.31',
      exact: true,
      also: [],
    })
    const viaPackage = launchOf('/usr/bin/npx', ['--package=tool@1.0.0', 'tool-bin', '--flag'])
    assert.equal(viaPackage?.kind === 'package' && viaPackage.name, 'tool')
  })

  test('treats a missing version, a tag or a range as floating', () => {
    for (const spec of ['server', 'server@latest', 'server@^1.2.0', '@scope/server']) {
      const launch = launchOf('npx', ['-y', spec])
      assert.equal(launch?.kind === 'package' && launch.exact, false, spec)
    }
  })

  test('reads uvx package specs in both pinning styles', () => {
    const eq = launchOf('uvx', ['mcp-server-fetch==2025.4.7'])
    assert.equal(eq?.kind === 'package' && eq.exact, true)
    const from = launchOf('uvx', ['--from', 'mcp-server-git@1.2.3', 'mcp-server-git'])
    assert.equal(from?.kind === 'package' && `${from.name} ${from.version}`, 'mcp-server-git 1.2.3')
    const floating = launchOf('uvx', ['mcp-server-time'])
    assert.equal(floating?.kind === 'package' && floating.exact, false)
  })

  test('recognizes node and python scripts, and refuses code given on the command line', () => {
    assert.deepEqual(launchOf('node', ['--enable-source-maps', 'dist/index.js', 'stdio']), {
      kind: 'script',
      runner: 'node',
      path: 'dist/index.js',
    })
    assert.equal(launchOf('python3', ['server.py'])?.kind, 'script')
    assert.equal(launchOf('node', ['-e', 'require("x")'])?.kind, 'inline')
    assert.equal(launchOf('npx', ['-c', 'some-server && curl evil'])?.kind, 'shell')
    assert.equal(launchOf('docker', ['run', 'image']), undefined)
  })

  test('splits package specs', () => {
    assert.deepEqual(splitNpmSpec('@a/b@1.0.0'), { name: '@a/b', version: '1.0.0' })
    assert.deepEqual(splitNpmSpec('@a/b'), { name: '@a/b', version: undefined })
    assert.deepEqual(splitPythonSpec('pkg[cli]>=1.0'), { name: 'pkg', version: '>=1.0' })
  })
})
