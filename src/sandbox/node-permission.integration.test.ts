import assert from 'node:assert/strict'
import { spawnSync } from 'node:child_process'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { grantEntries, nodePermissionLaunch } from './node-permission.ts'
import { DEFAULT_SANDBOX_LIMITS, type Launch, type SandboxSpec } from './sandbox.ts'

const dir = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-nodeperm-unit-')))

/** Runs a launch to its end; its stdout, one line per finding. */
function run(launch: Launch): string[] {
  const out = spawnSync(launch.command, [...launch.args], {
    env: { ...launch.env },
    cwd: launch.cwd,
    encoding: 'utf8',
    timeout: 60_000,
  })
  assert.equal(out.status, 0, out.stderr)
  return out.stdout.trim().split('\n')
}

/** A probe that tries to read each path given and says what happened. */
const READER = `import { readFileSync } from 'node:fs'
for (const path of process.argv.slice(2)) {
  try { readFileSync(path); console.log('read ' + path) }
  catch (err) { console.log('refused ' + path + ' ' + err.code) }
}
`

/** A project with its server beside the config, the store and a secret, as people lay it out. */
function project(name: string): { root: string; spec: SandboxSpec } {
  const root = join(dir, name)
  mkdirSync(join(root, '.barbican/state'), { recursive: true })
  mkdirSync(join(root, 'lib'), { recursive: true })
  writeFileSync(join(root, 'package.json'), '{"type":"module"}')
  writeFileSync(join(root, 'server.js'), READER)
  writeFileSync(join(root, 'lib/data.txt'), 'data')
  writeFileSync(join(root, 'mcp.json'), '{"mcpServers":{}}')
  writeFileSync(join(root, '.barbican/barbican.db'), 'store')
  writeFileSync(join(root, '.env'), 'TOKEN=secret')
  writeFileSync(join(root, 'deploy.pem'), 'key')
  const spec: SandboxSpec = {
    stateDir: join(root, '.barbican/state/local'),
    read: [],
    write: [],
    protect: [
      join(root, 'mcp.json'),
      join(root, 'barbican.lock'),
      join(root, '.barbican/barbican.db'),
    ],
    limits: DEFAULT_SANDBOX_LIMITS,
  }
  return { root, spec }
}

describe('the Node.js permission model grants a folder entry by entry', () => {
  test('leaves out the config, .barbican/ and secret files, and nothing else', () => {
    const { root, spec } = project('grants')
    assert.deepEqual(grantEntries(root, spec.protect).sort(), [
      join(root, 'lib'),
      join(root, 'package.json'),
      join(root, 'server.js'),
    ])
    // A folder with nothing to hide stays one grant.
    assert.deepEqual(grantEntries(join(root, 'lib'), spec.protect), [join(root, 'lib')])
  })

  test('splits down to a protected path that does not exist yet (a store made later)', () => {
    const { root } = project('deep')
    mkdirSync(join(root, 'data/other'), { recursive: true })
    const grants = grantEntries(root, [join(root, 'data/store.db')])
    assert.ok(grants.includes(join(root, 'data/other')))
    assert.ok(!grants.includes(join(root, 'data')))
    assert.ok(!grants.some((g) => g.endsWith('store.db')))
  })

  test('a project-local server beside its config runs and cannot read what was left out', () => {
    const { root, spec } = project('local')
    const launch = nodePermissionLaunch(
      'local',
      {
        command: process.execPath,
        args: [
          './server.js',
          join(root, 'lib/data.txt'),
          join(root, 'package.json'),
          join(root, 'mcp.json'),
          join(root, '.barbican/barbican.db'),
          join(root, '.env'),
          join(root, 'deploy.pem'),
        ],
        env: {},
        cwd: root,
      },
      spec,
    )
    assert.ok(launch)
    assert.deepEqual(run(launch), [
      `read ${join(root, 'lib/data.txt')}`,
      `read ${join(root, 'package.json')}`,
      `refused ${join(root, 'mcp.json')} ERR_ACCESS_DENIED`,
      `refused ${join(root, '.barbican/barbican.db')} ERR_ACCESS_DENIED`,
      `refused ${join(root, '.env')} ERR_ACCESS_DENIED`,
      `refused ${join(root, 'deploy.pem')} ERR_ACCESS_DENIED`,
    ])
  })

  test("refuses a grant that names one of Barbican's own files", () => {
    const { root, spec } = project('named')
    assert.throws(
      () =>
        nodePermissionLaunch(
          'named',
          { command: process.execPath, args: ['./server.js'], env: {}, cwd: root },
          { ...spec, read: [join(root, 'mcp.json')] },
        ),
      /would be granted .*mcp\.json, a file of Barbican's own/,
    )
  })
})

/** An installed package that counts its runs in a file next to its own code. */
function installedWriter(): { install: string; script: string } {
  const install = join(dir, 'install/node_modules')
  const pkg = join(install, '@acme/writer')
  mkdirSync(pkg, { recursive: true })
  mkdirSync(join(install, 'dep'), { recursive: true })
  writeFileSync(
    join(install, 'dep/package.json'),
    '{"name":"dep","type":"module","main":"index.js"}',
  )
  writeFileSync(join(install, 'dep/index.js'), "export const greeting = 'from dep'\n")
  writeFileSync(
    join(pkg, 'package.json'),
    '{"name":"@acme/writer","version":"1.2.3","type":"module"}',
  )
  writeFileSync(
    join(pkg, 'index.js'),
    `import { appendFileSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { greeting } from 'dep'
const file = join(dirname(fileURLToPath(import.meta.url)), 'runs.txt')
appendFileSync(file, 'run\\n')
console.log(greeting + ' ' + readFileSync(file, 'utf8').trim().split('\\n').length)
`,
  )
  return { install, script: join(pkg, 'index.js') }
}

describe('an installed package under the Node.js permission model', () => {
  test('runs from its copy in the state directory: writes persist, the install is untouched', () => {
    const { install, script } = installedWriter()
    const stateDir = join(dir, 'writer-state')
    const spec: SandboxSpec = {
      stateDir,
      read: [],
      write: [],
      protect: [],
      limits: DEFAULT_SANDBOX_LIMITS,
    }
    const launch = () =>
      nodePermissionLaunch('writer', { command: process.execPath, args: [script], env: {} }, spec)!
    assert.deepEqual(run(launch()), ['from dep 1'])
    assert.deepEqual(run(launch()), ['from dep 2'])
    assert.ok(!existsSync(join(install, '@acme/writer/runs.txt')), 'the install was written')
    const copies = launch().args.at(-1)!
    assert.ok(copies.startsWith(join(stateDir, '.package')), copies)
    assert.equal(readFileSync(join(copies, '../runs.txt'), 'utf8'), 'run\nrun\n')
    // It may not write the shared install even by its real path.
    assert.ok(
      !launch().args.some((a) => a.startsWith('--allow-fs-write=') && a.includes('install')),
    )
  })
})
