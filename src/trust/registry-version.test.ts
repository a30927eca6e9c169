import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { compareVersions, npxCacheVersion } from './registry-version.ts'

describe('the version a package resolves to, offline', () => {
  test('the npx cache yields the highest exact version installed', () => {
    const cache = mkdtempSync(join(tmpdir(), 'barbican-npx-'))
    const install = (entry: string, name: string, version: string) => {
      const dir = join(cache, entry, 'node_modules', name)
      mkdirSync(dir, { recursive: true })
      writeFileSync(join(dir, 'package.json'), JSON.stringify({ name, version }))
    }
    install('a1', '@scope/pkg', '1.9.0')
    install('b2', '@scope/pkg', '1.10.0')
    install('c3', '@scope/pkg', '1.10.0-rc.1')
    install('d4', 'other', '9.9.9')
    assert.equal(npxCacheVersion('@scope/pkg', cache), '1.10.0')
    assert.equal(npxCacheVersion('missing', cache), undefined)
    assert.equal(npxCacheVersion('@scope/pkg', join(cache, 'nowhere')), undefined)
  })

  test('versions compare by number, a prerelease below its release', () => {
    assert.ok(compareVersions('1.10.0', '1.9.0') > 0)
    assert.ok(compareVersions('2.0.0-rc.1', '2.0.0') < 0)
    assert.equal(compareVersions('1.2.3', '1.2.3'), 0)
  })
})
