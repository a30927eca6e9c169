/**
 * The example configurations work as written (issue 29 point 8, issue 32): `barbican check`
 * passes on the README's example and on each local example of examples/, every folder they
 * serve granted to the server, none left out; the README's example then serves its tools and its
 * memory keeps what it was told across a restart. Each runs from a copy in a temporary folder,
 * so nothing is written into the checkout. Only the folder the README says to create is created
 * (`mkdir -p /tmp/barbican-files`). The secured and tenants examples name remote servers and an
 * identity provider: src/config/examples.test.ts loads them.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { after, describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { textOf } from '../support/content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')

/** The README's example configuration, as the README prints it. */
function readmeExample(): string {
  const readme = readFileSync(join(root, 'README.md'), 'utf8')
  const block = /```yaml\n(# barbican\.yaml\n[\s\S]*?)```/.exec(readme)?.[1]
  assert.ok(block, 'the README has a barbican.yaml example')
  return block
}

/** The environment without variables the examples read, as a new user's shell has it. */
function userEnv(): NodeJS.ProcessEnv {
  const { DATA_DIR: _d, MEMORY_FILE: _m, MEMORY_FILE_PATH: _p, ...env } = process.env
  return env
}

function run(args: string[], cwd: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { cwd, env: userEnv() })
    let out = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString()
    })
    child.on('close', (code) => resolve({ code, out }))
  })
}

/** Starts `barbican serve` in `cwd` on a free port; resolves with its URL and the process. */
function serve(cwd: string): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, 'serve', '--listen', '127.0.0.1:0'], {
      cwd,
      env: userEnv(),
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    let seen = ''
    const timer = setTimeout(() => reject(new Error(`serve did not start: ${seen}`)), 120_000)
    child.stderr?.on('data', (c: Buffer) => {
      seen += c.toString()
      const url = /"msg":"ready: [^"]* at (http[^ "]+)/.exec(seen)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve({ child, url })
      }
    })
    child.on('exit', () => reject(new Error(`serve exited: ${seen}`)))
  })
}

function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

describe('the example configurations, as written', () => {
  // What the README and the examples' READMEs say to create.
  mkdirSync('/tmp/barbican-files', { recursive: true })
  const dirs: string[] = []
  const workspace = (files: Record<string, string>): string => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-example-'))
    dirs.push(dir)
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
    return dir
  }
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })

  const cases: [string, () => string, string[]][] = [
    ['the README', () => workspace({ 'barbican.yaml': readmeExample() }), ['check']],
    ...['single', 'multiplex'].map((name): [string, () => string, string[]] => [
      `examples/${name}`,
      () =>
        workspace({
          'barbican.yaml': readFileSync(join(root, 'examples', name, 'barbican.yaml'), 'utf8'),
        }),
      ['check'],
    ]),
    [
      'examples/claude-desktop',
      () => {
        const dir = workspace({})
        const file = join(root, 'examples/claude-desktop/claude_desktop_config.json')
        copyFileSync(file, join(dir, basename(file)))
        return dir
      },
      ['check', '--config', 'claude_desktop_config.json'],
    ],
  ]
  for (const [name, make, args] of cases) {
    test(`${name}: check passes, every folder granted`, async () => {
      const { code, out } = await run(args, make())
      assert.equal(code, 0, out)
      assert.doesNotMatch(out, /^FAIL|HELD|not granted/m, out)
    })
  }

  test("the README's example serves its tools, and memory keeps an entity across a restart", async () => {
    const dir = workspace({ 'barbican.yaml': readmeExample() })
    const entity = `example-${process.pid}`
    let server = await serve(dir)
    try {
      const client = new Client({ name: 'examples', version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(server.url)))
      const { tools } = await client.listTools()
      const names = tools.map((t) => t.name)
      for (const tool of [
        'files__read_text_file',
        'files__list_directory',
        'memory__create_entities',
      ]) {
        assert.ok(names.includes(tool), `${tool} in ${names.join(', ')}`)
      }
      const listed = await client.callTool({
        name: 'files__list_directory',
        arguments: { path: '/tmp/barbican-files' },
      })
      assert.notEqual(listed.isError, true, textOf(listed))
      const created = await client.callTool({
        name: 'memory__create_entities',
        arguments: { entities: [{ name: entity, entityType: 'test', observations: ['saved'] }] },
      })
      assert.notEqual(created.isError, true, textOf(created))
      await client.close()
      await stop(server.child)
      server = await serve(dir)
      const again = new Client({ name: 'examples', version: '1.0.0' })
      await again.connect(new StreamableHTTPClientTransport(new URL(server.url)))
      const graph = await again.callTool({ name: 'memory__read_graph', arguments: {} })
      assert.match(textOf(graph), new RegExp(entity))
      await again.close()
    } finally {
      await stop(server.child)
    }
  })
})
