import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { after, describe, test } from 'node:test'
import {
  needsScripts,
  packagesWithScripts,
  SCRIPTS_RECORD,
  scriptsRecord,
  skippedScriptsMessage,
} from './npm-install.ts'

/** A slot as `npm install --ignore-scripts` leaves it: its lock and the packages' manifests. */
function slot(): string {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-npm-install-'))
  const write = (path: string, value: unknown) => {
    mkdirSync(join(dir, path, '..'), { recursive: true })
    writeFileSync(join(dir, path), JSON.stringify(value))
  }
  write('package-lock.json', {
    packages: {
      '': { dependencies: { server: '1.0.0' } },
      'node_modules/server': { version: '1.0.0', hasInstallScript: true },
      'node_modules/native': { version: '2.1.0', hasInstallScript: true },
      'node_modules/gyp-only': { version: '0.3.0', hasInstallScript: true },
      'node_modules/plain': { version: '4.0.0' },
      'node_modules/server/node_modules/native': { version: '2.1.0', hasInstallScript: true },
    },
  })
  write('node_modules/server/package.json', { scripts: { postinstall: 'node hello.js' } })
  write('node_modules/native/package.json', {
    scripts: { install: 'prebuild-install || node-gyp rebuild', test: 'x' },
  })
  write('node_modules/gyp-only/package.json', {})
  writeFileSync(join(dir, 'node_modules/gyp-only/binding.gyp'), '{}')
  write('node_modules/plain/package.json', { scripts: { test: 'x' } })
  return dir
}

describe('install scripts of a confined npx package (ADR 107)', () => {
  const made: string[] = []
  after(() => {
    for (const dir of made) rmSync(dir, { recursive: true, force: true })
  })

  test("npm's lock says which packages have install scripts, once each, with what would run", () => {
    const dir = slot()
    made.push(dir)
    assert.deepEqual(packagesWithScripts(dir), [
      { name: 'gyp-only', version: '0.3.0', scripts: ['install: node-gyp rebuild (binding.gyp)'] },
      {
        name: 'native',
        version: '2.1.0',
        scripts: ['install: prebuild-install || node-gyp rebuild'],
      },
      { name: 'server', version: '1.0.0', scripts: ['postinstall: node hello.js'] },
    ])
  })

  test('a slot without a record counts them all as skipped; allowing one asks for its scripts', () => {
    const dir = slot()
    made.push(dir)
    assert.deepEqual(
      scriptsRecord(dir).skipped.map((p) => p.name),
      ['gyp-only', 'native', 'server'],
    )
    assert.equal(needsScripts(dir, []), false)
    assert.equal(needsScripts(dir, ['native']), true)
    assert.equal(needsScripts(dir, true), true)
    const native = scriptsRecord(dir).skipped.find((p) => p.name === 'native')
    const rest = scriptsRecord(dir).skipped.filter((p) => p.name !== 'native')
    writeFileSync(join(dir, SCRIPTS_RECORD), JSON.stringify({ ran: [native], skipped: rest }))
    assert.equal(needsScripts(dir, ['native']), false, 'what ran is not run again')
  })

  test('the message names each skipped package, what it would run, and the one line', () => {
    const dir = slot()
    made.push(dir)
    const said = skippedScriptsMessage('db', scriptsRecord(dir))
    assert.deepEqual(said?.packages, ['gyp-only', 'native', 'server'])
    assert.equal(said?.fix, 'trust: { allowScripts: ["gyp-only", "native", "server"] }')
    assert.match(
      said!.message,
      /native@2\.1\.0 \(install: prebuild-install \|\| node-gyp rebuild\)/,
    )
    assert.match(said!.message, /add to its entry \("db"\) in the config: trust: \{ allowScripts/)
    assert.equal(skippedScriptsMessage('db', { ran: [], skipped: [] }), undefined)
  })
})
