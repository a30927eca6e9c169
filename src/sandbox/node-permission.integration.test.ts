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
import { launchConfined } from './confine.ts'
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

/** A probe that appends to each path given, then to $TARGET, and says what happened. */
const WRITER = `import { appendFileSync } from 'node:fs'
import { userInfo } from 'node:os'
for (const path of [...process.argv.slice(2), process.env.TARGET].filter(Boolean)) {
  try { appendFileSync(path, 'x'); console.log('wrote ' + path) }
  catch (err) { console.log('refused ' + path + ' ' + err.code) }
}
console.log('user ' + process.env.USER + ' ' + process.env.LOGNAME + ' ' + userInfo().username)
console.log('home ' + process.env.HOME)
`

describe('the Node.js permission model takes the grants bubblewrap takes (grants.ts)', () => {
  const noBwrap = { missing: 'bubblewrap (forced by the test)' }
  const writer = join(dir, 'writer.mjs')
  writeFileSync(writer, WRITER)
  const spec = (name: string): SandboxSpec => ({
    stateDir: join(dir, `${name}-state`),
    read: [],
    write: [],
    protect: [join(dir, 'barbican.yaml')],
    limits: DEFAULT_SANDBOX_LIMITS,
  })

  test("paths in args and env are writable, under /tmp the host's; its HOME and USER", () => {
    const argData = join(dir, 'arg-data')
    const envData = join(dir, 'env-data')
    mkdirSync(argData)
    mkdirSync(envData)
    const shared = realpathSync(mkdtempSync('/tmp/barbican-nodeperm-tmp-'))
    const s = spec('inferred')
    const launch = launchConfined(
      'inferred',
      {
        command: process.execPath,
        args: [writer, join(argData, 'a.txt'), join(shared, 'm.jsonl')],
        env: { TARGET: join(envData, 'memory.jsonl') },
      },
      s,
      noBwrap,
    )
    assert.equal(launch.mechanism, 'node-permission')
    const lines = run(launch)
    // A file not there yet grants its folder (arg 2, arg 3, env TARGET), as under bubblewrap.
    assert.deepEqual(lines.slice(0, 3), [
      `wrote ${join(argData, 'a.txt')}`,
      `wrote ${join(shared, 'm.jsonl')}`,
      `wrote ${join(envData, 'memory.jsonl')}`,
    ])
    // The host's /tmp, not a private one: the file is there after the server ended.
    assert.equal(readFileSync(join(shared, 'm.jsonl'), 'utf8'), 'x')
    assert.equal(readFileSync(join(envData, 'memory.jsonl'), 'utf8'), 'x')
    assert.match(lines[3]!, /^user \S+ \S+ \S+$/)
    const [, user, logname, name] = lines[3]!.split(' ')
    assert.equal(user, logname)
    assert.equal(user, name, 'USER is the name of its uid')
    assert.equal(lines[4], `home ${s.stateDir}`)
  })

  test('a path it was not given is refused', () => {
    const outside = join(realpathSync(mkdtempSync(join(tmpdir(), 'barbican-nodeperm-out-'))), 'f')
    const launch = launchConfined(
      'outside',
      { command: process.execPath, args: [writer], env: { NOT_A_PATH: 'x' } },
      spec('outside'),
      noBwrap,
    )
    // Appending through a name it computes at run time (a shell or file-manager server).
    const probe = { ...launch, env: { ...launch.env, TARGET: outside } }
    assert.equal(run(probe)[0], `refused ${outside} ERR_ACCESS_DENIED`)
  })

  test("an entry naming Barbican's own file is refused before the model is asked", () => {
    assert.throws(
      () =>
        launchConfined(
          'own',
          { command: process.execPath, args: [writer, join(dir, 'barbican.yaml')], env: {} },
          spec('own'),
          noBwrap,
        ),
      /names .*barbican\.yaml \(arg 2\).*Barbican's own/,
    )
  })

  test('a USER the entry declares is kept', () => {
    const launch = launchConfined(
      'declared',
      { command: process.execPath, args: [writer], env: { USER: 'svc' } },
      spec('declared'),
      noBwrap,
    )
    assert.equal(launch.env.USER, 'svc')
    assert.equal(launch.env.LOGNAME, 'svc')
  })
})
