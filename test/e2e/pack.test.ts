/**
 * The package users install: `npm pack`, then `npm install ./barbican-X.tgz` into an empty folder,
 * then the installed `barbican` run by Node 22 — with neither src/ nor devDependencies. The pack
 * runs in a copy of the checkout so that its build (the `prepack` script) leaves this checkout's
 * dist/ alone while other tests use it.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, execFileSync, spawn, spawnSync } from 'node:child_process'
import {
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { after, before, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { COMMANDS } from '../../src/cli/help.ts'

const ROOT = fileURLToPath(new URL('../../', import.meta.url))
const MEMORY = join(ROOT, 'node_modules/@modelcontextprotocol/server-memory/dist/index.js')
const run = promisify(execFile)
/** npm's own variables from an enclosing `npm test` would steer the nested npm commands. */
const ENV = Object.fromEntries(
  Object.entries(process.env).filter(([name]) => !/^npm_/i.test(name)),
) as NodeJS.ProcessEnv

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', args, { cwd, env: ENV, encoding: 'utf8', timeout: 300_000 })
}

/** Installs the tarball into `app` with the npm (and Node) `env`'s PATH finds; stderr's lines. */
function npmInstall(tarball: string, app: string, env: NodeJS.ProcessEnv): string[] {
  const r = spawnSync('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', tarball], {
    cwd: app,
    env,
    encoding: 'utf8',
    timeout: 300_000,
  })
  assert.equal(r.status, 0, r.stderr)
  return r.stderr.split('\n').filter((line) => line !== '')
}

/** The system's own Node when it is older than 22 (Debian 12/13 ship 18/20), else undefined. */
function oldSystemNode(): string | undefined {
  for (const node of ['/usr/bin/node', '/usr/local/bin/node']) {
    if (!existsSync(node) || realpathSync(node) === realpathSync(process.execPath)) continue
    const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim()
    if (Number(/^v(\d+)/.exec(version)?.[1]) < 22) return node
  }
  return undefined
}

describe('the npm package', () => {
  let work: string
  let tarball: string
  let installed: string
  let bin: string
  let config: string
  let installWarnings: string[]

  before(() => {
    work = realpathSync(mkdtempSync(join(tmpdir(), 'barbican-pack-')))
    const checkout = join(work, 'checkout')
    const files = execFileSync('git', ['ls-files', '-co', '--exclude-standard', '-z'], {
      cwd: ROOT,
      encoding: 'utf8',
    })
      .split('\0')
      .filter((file) => file !== '' && !file.startsWith('dist/') && existsSync(join(ROOT, file)))
    for (const file of files) {
      mkdirSync(join(checkout, dirname(file)), { recursive: true })
      cpSync(join(ROOT, file), join(checkout, file))
    }
    symlinkSync(join(ROOT, 'node_modules'), join(checkout, 'node_modules'))
    const [packed] = JSON.parse(npm(['pack', '--json', '--pack-destination', work], checkout)) as {
      filename: string
    }[]
    tarball = join(work, packed!.filename)
    const app = join(work, 'app')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), '{"name":"app","private":true}\n')
    // The dependencies are in npm's cache since this checkout installed them.
    installWarnings = npmInstall(tarball, app, ENV).filter((line) => /\bwarn\b/i.test(line))
    installed = join(app, 'node_modules/barbican')
    bin = join(installed, 'bin/barbican.js')
    config = join(work, 'barbican.yaml')
    writeFileSync(
      config,
      `upstreams:\n  memory:\n    command: ${process.execPath}\n    args: ["${MEMORY}"]\n` +
        `    env: { MEMORY_FILE_PATH: "${join(work, 'memory.jsonl')}" }\n` +
        // Code mode loads QuickJS from its package, outside the bundle.
        'servers:\n  default: {}\n  code: { tools: { mode: code } }\n',
    )
  })
  after(() => rmSync(work, { recursive: true, force: true }))

  async function barbican(args: string[]) {
    return run(process.execPath, [bin, ...args], { cwd: work, timeout: 60_000, env: ENV })
  }

  test('installs the built command without sources or devDependencies', () => {
    assert.ok(existsSync(join(installed, 'dist/main.js')))
    assert.ok(existsSync(join(installed, 'schema/config.json')))
    assert.equal(existsSync(join(installed, 'src')), false)
    assert.equal(existsSync(join(installed, 'test')), false)
    assert.deepEqual(
      readdirSync(join(installed, 'dist')).filter((f) => /\.(ts|map)$/.test(f)),
      [],
    )
    const manifest = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      devDependencies: Record<string, string>
      private?: boolean
      bin: Record<string, string>
    }
    assert.equal(manifest.private, undefined)
    assert.deepEqual(manifest.bin, { barbican: 'bin/barbican.js' })
    const modules = join(dirname(installed))
    for (const dev of Object.keys(manifest.devDependencies)) {
      assert.equal(existsSync(join(modules, dev)), false, `${dev} was installed`)
    }
    assert.ok(existsSync(join(modules, '.bin/barbican')))
  })

  test('installs without a warning or an install script on Node 22', () => {
    assert.deepEqual(installWarnings, [])
    const { scripts = {} } = JSON.parse(readFileSync(join(installed, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>
    }
    for (const hook of ['preinstall', 'install', 'postinstall', 'prepare']) {
      assert.equal(scripts[hook], undefined, hook)
    }
  })

  test('on an older system Node, installs and says how to run it with Node 22', (t) => {
    const node = oldSystemNode()
    if (node === undefined) {
      t.skip('no system Node older than 22 on this machine')
      return
    }
    const app = join(work, 'app-old-node')
    mkdirSync(app)
    writeFileSync(join(app, 'package.json'), '{"name":"app","private":true}\n')
    // Only the system's directories: its npm runs on its own Node, as on a fresh machine.
    const env = { ...ENV, PATH: `${dirname(node)}:/usr/bin:/bin` }
    const warnings = npmInstall(tarball, app, env).filter((line) => /\bwarn\b/i.test(line))
    // npm names the engines it finds too old, and nothing else.
    assert.deepEqual(
      warnings.filter((line) => !/EBADENGINE/.test(line)),
      [],
    )
    const r = spawnSync(node, [join(app, 'node_modules/barbican/bin/barbican.js'), '--help'], {
      cwd: app,
      env,
      encoding: 'utf8',
    })
    assert.equal(r.status, 1)
    assert.match(
      r.stderr,
      /Node\.js 2\d\.\d+\.\d+ is too old; Barbican needs Node\.js 22\.18 or newer/,
    )
    assert.match(r.stderr, /npx -p node@22 barbican --help\n/)
    assert.doesNotMatch(r.stderr, /checkout/)
    // The advice works as written: npx fetches Node 22 (npm's cache has it since this checkout
    // installed its pinned Node) and runs the installed command with it.
    const advised = spawnSync(
      'npx',
      ['--yes', '--prefer-offline', '-p', 'node@22', 'barbican', '--help'],
      {
        cwd: app,
        env,
        encoding: 'utf8',
        timeout: 300_000,
      },
    )
    assert.equal(advised.status, 0, advised.stderr)
    assert.match(advised.stdout, /^Usage: barbican <command>/)
  })

  test('--version and --help, and --help for every command with an example', async () => {
    const version = await barbican(['--version'])
    assert.match(version.stdout, /^barbican \d+\.\d+\.\d+/)
    const help = await barbican(['--help'])
    assert.match(help.stdout, /^Usage: barbican <command>/)
    for (const command of COMMANDS) {
      const { stdout } = await barbican([command, '--help'])
      assert.match(stdout, new RegExp(`^Usage: barbican ${command}`))
      assert.match(stdout, /\nExample[^:\n]*:\n {2}\S/, command)
    }
  })

  test('check connects to the upstream of a config file', async () => {
    const { stdout } = await barbican(['check', '--config', config])
    assert.match(stdout, /ok {4}memory: .*\d+ tool\(s\)/)
  })

  test('serve answers MCP over HTTP with the upstream of a config file', async () => {
    const gateway: ChildProcess = spawn(
      process.execPath,
      [bin, 'serve', '--config', config, '--listen', '127.0.0.1:0'],
      { cwd: work, env: ENV, stdio: ['ignore', 'ignore', 'pipe'] },
    )
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let seen = ''
        const timer = setTimeout(() => reject(new Error(`no URL announced: ${seen}`)), 30_000)
        gateway.stderr?.on('data', (chunk: Buffer) => {
          seen += chunk.toString()
          const match = /serving .* at (http:\/\/[^\s]+\/mcp)/.exec(seen)
          if (match?.[1]) {
            clearTimeout(timer)
            resolve(match[1])
          }
        })
      })
      const client = new Client({ name: 'pack', version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(url)))
      try {
        const { tools } = await client.listTools()
        assert.ok(
          tools.some((t) => t.name === 'read_graph'),
          JSON.stringify(tools),
        )
      } finally {
        await client.close()
      }
      const coder = new Client({ name: 'pack', version: '1.0.0' })
      await coder.connect(new StreamableHTTPClientTransport(new URL(`${url}/code`)))
      try {
        const result = await coder.callTool({
          name: 'run_code',
          arguments: { code: 'const g = await memory.read_graph({}); return Object.keys(g)' },
        })
        assert.deepEqual(result.content, [{ type: 'text', text: '["entities","relations"]' }])
      } finally {
        await coder.close()
      }
    } finally {
      gateway.kill('SIGTERM')
    }
  })

  test('stdio serves MCP on stdin/stdout', async () => {
    const client = new Client({ name: 'pack', version: '1.0.0' })
    await client.connect(
      new StdioClientTransport({
        command: process.execPath,
        args: [bin, 'stdio', '--config', config],
        cwd: work,
        env: ENV as Record<string, string>,
        stderr: 'ignore',
      }),
    )
    try {
      const { tools } = await client.listTools()
      assert.ok(
        tools.some((t) => t.name === 'read_graph'),
        JSON.stringify(tools),
      )
    } finally {
      await client.close()
    }
  })
})
