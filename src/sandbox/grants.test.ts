import assert from 'node:assert/strict'
import { mkdirSync, mkdtempSync, realpathSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { type GrantContext, type GrantEntry, inferGrants } from '../config/sandbox-grants.ts'
import { describeGrant, describeGrants, describeRefused, grantRefusal } from './grants.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-grants-unit-')))
const home = join(dir, 'home')
const data = join(dir, 'data')
const config = join(dir, 'project')
mkdirSync(home, { recursive: true })
mkdirSync(data, { recursive: true })
mkdirSync(join(config, '.barbican', 'state', 'memory'), { recursive: true })
writeFileSync(join(data, 'notes.txt'), 'x')
writeFileSync(join(config, 'barbican.yaml'), 'upstreams: {}\n')
const context: GrantContext = {
  protect: [
    join(config, 'barbican.yaml'),
    join(config, 'barbican.lock'),
    join(config, '.barbican'),
  ],
  home,
  stateDir: join(config, '.barbican', 'state', 'memory'),
}
const entry = (extra: Partial<GrantEntry>): GrantEntry => ({
  command: 'server',
  args: [],
  env: {},
  cwd: dir,
  ...extra,
})
const infer = (extra: Partial<GrantEntry>, more: Partial<GrantContext> = {}) =>
  inferGrants(entry(extra), { ...context, ...more })

describe('grants inferred from the entry', () => {
  test('a folder in args is granted read-write, named by its argument', () => {
    const grants = infer({ args: ['-y', 'pkg@1.0.0', data] })
    assert.deepEqual(grants.paths, [{ path: data, access: 'write', source: 'arg 3', tmp: true }])
    assert.equal(describeGrant(grants.paths[0]!), `write ${data} (arg 3, the host's /tmp)`)
  })

  test('an existing file is granted itself, read-write; a new file its folder', () => {
    const file = join(data, 'notes.txt')
    const existing = infer({ env: { NOTES: file } })
    assert.deepEqual(
      existing.paths.map((g) => [g.path, g.access, g.source]),
      [[file, 'write', 'env NOTES']],
    )
    const fresh = infer({ env: { MEMORY_FILE_PATH: join(data, 'new', '..', 'memory.jsonl') } })
    assert.deepEqual(
      fresh.paths.map((g) => [g.path, g.access, g.source]),
      [[data, 'write', 'env MEMORY_FILE_PATH']],
    )
  })

  test('a new file whose folder does not exist either is said, not granted', () => {
    const grants = infer({ args: [join(dir, 'nowhere', 'x.db')] })
    assert.deepEqual(grants.paths, [])
    assert.match(describeRefused(grants)[0]!, /nowhere\/x\.db \(arg 1\): neither it nor its folder/)
    assert.equal(grantRefusal('s', grants), undefined)
  })

  test('--option=PATH is the path; options themselves are not', () => {
    const grants = infer({ args: ['--root', `--db-path=${join(data, 'notes.txt')}`] })
    assert.deepEqual(
      grants.paths.map((g) => [g.path, g.source]),
      [[join(data, 'notes.txt'), 'arg 2']],
    )
  })

  test('~ paths resolve against the home; relative ones only when they exist', () => {
    mkdirSync(join(home, 'notes'), { recursive: true })
    const grants = infer({ args: ['~/notes', 'data', './data', 'text/plain'] })
    assert.deepEqual(
      grants.paths.map((g) => [g.path, g.source]),
      [
        [join(home, 'notes'), 'arg 1'],
        [data, 'arg 3'],
      ],
    )
  })

  test('paths in the system read-only parts stay read-only', () => {
    const grants = infer({ args: ['/usr/share'], env: { CA: '/etc/hostname' } })
    assert.deepEqual(
      grants.paths.map((g) => [g.path, g.access]),
      [
        ['/usr/share', 'read'],
        ['/etc/hostname', 'read'],
      ],
    )
  })

  test('homes, / and system folders are refused as grants, without refusing the entry', () => {
    const grants = infer({ args: [home, '/', '/etc', '/root', '/home/alice', '/tmp'] })
    assert.deepEqual(grants.paths, [])
    const said = describeRefused(grants)
    assert.equal(said.length, 6)
    assert.match(said[0]!, /\(arg 1\): a home directory, too broad .* sandbox\.fs\.write/)
    assert.match(said[1]!, /^\/ \(arg 2\): the whole file system/)
    assert.match(said[2]!, /^\/etc \(arg 3\): a system folder/)
    assert.equal(grantRefusal('s', grants), undefined)
  })

  test('a file that would be created in a home is not granted its folder', () => {
    const grants = infer({ env: { DB: join(home, 'new.db') } })
    assert.deepEqual(grants.paths, [])
    assert.match(describeRefused(grants)[0]!, /a home directory \(the folder of .*new\.db/)
  })

  test('sandbox.fs may still list a home: it is granted as written, with its source', () => {
    const grants = infer({ args: [home] }, { explicit: { read: ['/srv/ref'], write: [home] } })
    assert.deepEqual(
      grants.paths.map((g) => [g.path, g.access, g.source]),
      [
        ['/srv/ref', 'read', 'sandbox.fs.read'],
        [home, 'write', 'sandbox.fs.write'],
      ],
    )
  })

  test("Barbican's own files refuse the entry, naming the path", () => {
    for (const path of [
      join(config, 'barbican.yaml'),
      join(config, '.barbican'),
      join(config, '.barbican', 'barbican.db'),
      join(config, '.barbican', 'state', 'other', 'x'),
    ]) {
      const grants = infer({ env: { FILE: path } })
      assert.deepEqual(grants.paths, [])
      const why = grantRefusal('memory', grants)
      assert.ok(why?.includes(`upstream "memory" names ${path} (env FILE)`), why)
      assert.match(why!, /never granted Barbican's config, store, keys, lockfile or \.barbican/)
    }
  })

  test("a symlink to Barbican's own file refuses the entry too", () => {
    const link = join(data, 'innocent.yaml')
    symlinkSync(join(config, 'barbican.yaml'), link)
    assert.ok(grantRefusal('s', infer({ args: [link] })))
  })

  test('a path inside its own state directory needs no grant', () => {
    const grants = infer({ env: { MEMORY_FILE_PATH: join(context.stateDir!, 'memory.jsonl') } })
    assert.deepEqual(grants.paths, [])
    assert.deepEqual(grants.refused, [])
  })

  test("an interpreter's script is code, read-only, not a grant; later files are data", () => {
    const script = join(data, 'server.js')
    writeFileSync(script, '')
    const grants = infer({
      command: 'node',
      args: ['--max-old-space-size=64', script, join(data, 'notes.txt')],
    })
    assert.deepEqual(grants.code, [script])
    assert.deepEqual(
      grants.paths.map((g) => g.path),
      [join(data, 'notes.txt')],
    )
    // Not an interpreter: its first file is data it was given.
    assert.deepEqual(
      infer({ command: 'mcp-server-sqlite', args: [script] }).paths.map((g) => g.path),
      [script],
    )
  })

  test('a file inside node_modules or site-packages is code', () => {
    const bin = join(data, 'node_modules', 'pkg', 'bin.js')
    mkdirSync(join(data, 'node_modules', 'pkg'), { recursive: true })
    writeFileSync(bin, '')
    const grants = infer({ command: 'tool', args: ['run', bin] })
    assert.deepEqual(grants.code, [bin])
    assert.deepEqual(grants.paths, [])
  })

  test('a command inside a virtualenv brings its prefix in, read-only', () => {
    const venv = join(dir, 'venv')
    mkdirSync(join(venv, 'bin'), { recursive: true })
    writeFileSync(join(venv, 'pyvenv.cfg'), 'home = /usr/bin\n')
    symlinkSync('/usr/bin/env', join(venv, 'bin', 'python'))
    const grants = infer({ command: join(venv, 'bin', 'python'), args: ['-m', 'server'] })
    assert.deepEqual(grants.prefixes, [{ path: venv, access: 'read', source: 'command' }])
    assert.deepEqual(describeGrants(grants), [`read ${venv} (command)`])
  })

  test('a bare command found on PATH inside a prefix with bin/ and lib/ brings it in', () => {
    const prefix = join(dir, 'python-3.12')
    mkdirSync(join(prefix, 'bin'), { recursive: true })
    mkdirSync(join(prefix, 'lib'), { recursive: true })
    writeFileSync(join(prefix, 'bin', 'mcp-tool'), '#!/bin/sh\n', { mode: 0o755 })
    const grants = infer({ command: 'mcp-tool', env: { PATH: join(prefix, 'bin') } })
    assert.deepEqual(
      grants.prefixes.map((g) => g.path),
      [prefix],
    )
    // A bin/ without lib/ or pyvenv.cfg is no prefix.
    assert.deepEqual(infer({ command: '/usr/bin/env' }).prefixes, [])
  })

  test('URL-shaped values grant host:port, with the default port of their scheme', () => {
    const grants = infer({
      args: ['postgresql://user:secret@127.0.0.1/db', '--url=https://api.example.com/v1'],
      env: {
        REDIS_URL: 'redis://localhost:6380/0',
        PAGE: 'http://[::1]:8080/',
        NOT_A_URL: 'hello',
        MONGO: 'mongodb+srv://cluster.example.net/x',
        ODD: 'custom://host/x',
      },
    })
    assert.deepEqual(
      grants.connect.map((c) => describeGrant(c)),
      [
        'connect 127.0.0.1:5432 (arg 1)',
        'connect api.example.com:443 (arg 2)',
        'connect localhost:6380 (env REDIS_URL)',
        'connect [::1]:8080 (env PAGE)',
        'connect cluster.example.net:27017 (env MONGO)',
      ],
    )
    // Credentials in the URL are never repeated.
    assert.ok(!describeGrants(grants).join(' ').includes('secret'))
    assert.deepEqual(grants.paths, [])
  })

  test('the same host:port or path twice is granted once, from its first source', () => {
    const grants = infer({
      args: [data, 'redis://127.0.0.1'],
      env: { DIR: data, URL: 'redis://127.0.0.1:6379' },
    })
    assert.deepEqual(describeGrants(grants), [
      `write ${data} (arg 1, the host's /tmp)`,
      'connect 127.0.0.1:6379 (arg 2)',
    ])
  })

  test('kernel file systems and PATH-like lists are not paths', () => {
    const grants = infer({ args: ['/dev/null', '/proc/self'], env: { PATH: '/usr/bin:/bin' } })
    assert.deepEqual(grants.paths, [])
    assert.deepEqual(grants.refused, [])
  })

  test('a path outside /tmp is not marked as the host /tmp', () => {
    const grants = infer({ args: ['/usr/share'] })
    assert.equal(grants.paths[0]?.tmp, undefined)
  })
})

describe('grant lines for check and the start-up log', () => {
  test('name each grant and each refusal with its source', async () => {
    const { grantLines } = await import('./grants.ts')
    const grants = infer({ args: [data, '/'], env: { DB: 'postgres://127.0.0.1/x' } })
    assert.deepEqual(grantLines({ grants }), [
      `grant: write ${data} (arg 1, the host's /tmp)`,
      'grant: connect 127.0.0.1:5432 (env DB)',
      'not granted: / (arg 2): the whole file system, too broad to grant from an entry; list it in sandbox.fs.write to grant it',
    ])
    assert.deepEqual(grantLines('none'), [])
  })
})
