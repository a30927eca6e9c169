/**
 * The example configurations as a new user meets them (test/e2e/examples*.test.ts): the README's
 * `barbican.yaml` as printed, each example copied into a temporary folder (nothing is written
 * into the checkout), `barbican check` and `barbican serve` run there with the environment of a
 * new user's shell. The checks are split over several files: each starts the example's real
 * servers, 15–35 s apiece, and a file has 120 s.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, spawn } from 'node:child_process'
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { after, test } from 'node:test'
import { fileURLToPath } from 'node:url'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')

/** The README's example configuration, as the README prints it. */
export function readmeExample(): string {
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

export function run(args: string[], cwd: string): Promise<{ code: number | null; out: string }> {
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
export function serve(cwd: string): Promise<{ child: ChildProcess; url: string }> {
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

export function stop(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    child.once('exit', () => resolve())
    child.kill('SIGTERM')
  })
}

/** Temporary folders holding `files`, removed after the file's tests. */
export function workspaces(): (files: Record<string, string>) => string {
  const dirs: string[] = []
  after(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true })
  })
  return (files) => {
    const dir = mkdtempSync(join(tmpdir(), 'barbican-example-'))
    dirs.push(dir)
    for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text)
    return dir
  }
}

/** The examples `barbican check` must pass on, by name. */
export type ExampleName =
  | 'the README'
  | 'examples/single'
  | 'examples/multiplex'
  | 'examples/claude-desktop'

/**
 * A test: `barbican check` passes on the example, every folder it serves granted to its server
 * (no FAIL, HELD or "not granted" line).
 */
export function checkPasses(name: ExampleName): void {
  // What the README and the examples' READMEs say to create.
  mkdirSync('/tmp/barbican-files', { recursive: true })
  const workspace = workspaces()
  test(`${name}: check passes, every folder granted`, async () => {
    let dir: string
    let args = ['check']
    if (name === 'the README') dir = workspace({ 'barbican.yaml': readmeExample() })
    else if (name === 'examples/claude-desktop') {
      dir = workspace({})
      const file = join(root, 'examples/claude-desktop/claude_desktop_config.json')
      copyFileSync(file, join(dir, basename(file)))
      args = ['check', '--config', 'claude_desktop_config.json']
    } else {
      dir = workspace({ 'barbican.yaml': readFileSync(join(root, name, 'barbican.yaml'), 'utf8') })
    }
    const { code, out } = await run(args, dir)
    assert.equal(code, 0, out)
    assert.doesNotMatch(out, /^FAIL|HELD|not granted/m, out)
  })
}
