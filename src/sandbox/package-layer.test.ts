import assert from 'node:assert/strict'
import {
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  utimesSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { installFolderOf, syncPackageLayer } from './package-layer.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-layer-unit-')))

describe('the writable layer of a package', () => {
  const pkg = join(dir, 'cache/node_modules/@scope/pkg')
  mkdirSync(join(pkg, 'dist'), { recursive: true })
  mkdirSync(join(pkg, 'node_modules/dep'), { recursive: true })
  writeFileSync(join(pkg, 'package.json'), '{}')
  writeFileSync(join(pkg, 'dist/index.js'), 'v1')
  writeFileSync(join(pkg, 'node_modules/dep/index.js'), 'dep')
  const state = join(dir, 'state')
  mkdirSync(state)

  test('finds the installed folder of a file under node_modules, not elsewhere', () => {
    assert.equal(installFolderOf(join(pkg, 'dist/index.js')), pkg)
    assert.equal(installFolderOf(join(dir, 'elsewhere/index.js')), undefined)
  })

  test('copies the package once (not its node_modules), keeps what the server changed', () => {
    const layer = syncPackageLayer(state, pkg)!
    assert.equal(readFileSync(join(layer, 'dist/index.js'), 'utf8'), 'v1')
    assert.throws(() => readFileSync(join(layer, 'node_modules/dep/index.js')))
    writeFileSync(join(layer, 'dist/index.js'), 'changed by the server')
    writeFileSync(join(layer, 'dist/memory.jsonl'), 'data')
    assert.equal(syncPackageLayer(state, pkg), layer)
    assert.equal(readFileSync(join(layer, 'dist/index.js'), 'utf8'), 'changed by the server')
    assert.equal(readFileSync(join(layer, 'dist/memory.jsonl'), 'utf8'), 'data')
  })

  test('an upgrade of the install wins; the server’s own files stay', () => {
    writeFileSync(join(pkg, 'dist/index.js'), 'v2')
    utimesSync(join(pkg, 'dist/index.js'), new Date(), new Date(Date.now() + 5000))
    const layer = syncPackageLayer(state, pkg)!
    assert.equal(readFileSync(join(layer, 'dist/index.js'), 'utf8'), 'v2')
    assert.equal(readFileSync(join(layer, 'dist/memory.jsonl'), 'utf8'), 'data')
  })

  test('a link the server put in place of a folder is not written through', () => {
    const layer = syncPackageLayer(state, pkg)!
    const outside = join(dir, 'outside')
    mkdirSync(outside)
    rmSync(join(layer, 'dist'), { recursive: true })
    symlinkSync(outside, join(layer, 'dist'))
    writeFileSync(join(pkg, 'dist/index.js'), 'v3, longer')
    syncPackageLayer(state, pkg)
    assert.equal(readFileSync(join(layer, 'dist/index.js'), 'utf8'), 'v3, longer')
    assert.throws(() => readFileSync(join(outside, 'index.js')), /ENOENT/)
  })
})
