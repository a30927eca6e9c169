/**
 * How the real-server suite (test/e2e/real-servers-*.test.ts, issue 29 point 7) runs Barbican as
 * a user does: a Claude Desktop file written as each server's README documents it, `barbican
 * import` to turn it into barbican.yaml, then `barbican serve` as a child process with no sandbox
 * settings. The mechanism is chosen per run with BARBICAN_SANDBOX_MECHANISM (docs/sandbox.md), so
 * each case runs under bubblewrap and again under the Node.js permission model fallback.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { findExecutable, MECHANISM_ENV } from '../../src/sandbox/sandbox.ts'
import { textOf } from './content.ts'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')

/** The two ways a stdio server is confined on Linux: bubblewrap, and the fallback without it. */
export type Mechanism = 'bubblewrap' | 'node-permission'

/**
 * Both mechanisms, bubblewrap only where the host has it (CI's does: .ci/run installs it).
 * `REAL_SERVERS_MECHANISM=bubblewrap` (or `node-permission`) runs one, to debug a case.
 */
export const MECHANISMS: readonly Mechanism[] = (
  findExecutable('bwrap') === undefined ? ['node-permission'] : ['bubblewrap', 'node-permission']
).filter((m) => [undefined, m].includes(process.env.REAL_SERVERS_MECHANISM)) as Mechanism[]

/** A version of a package, as its devDependency pins it (the suite runs what CI installed). */
export function pinnedVersion(name: string): string {
  const manifest = join(root, 'node_modules', name, 'package.json')
  return (JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }).version
}

/**
 * A fresh project folder, as a user's: readable by others, since a root Barbican's confined
 * servers run as their own uid and must cross it (mkdtemp makes it 0700).
 */
export function workspace(prefix: string): { dir: string; remove(): void } {
  const dir = realpathSync(mkdtempSync(join(tmpdir(), `barbican-real-${prefix}-`)))
  chmodSync(dir, 0o755)
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) }
}

export type ClaudeEntry = {
  readonly command: string
  readonly args?: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  /** Barbican's extra key in a client's entry: `none` runs that server unconfined. */
  readonly sandbox?: 'none'
}

/** Writes `claude_desktop_config.json` in `dir` with these servers, and returns its path. */
export function writeClaudeConfig(dir: string, servers: Record<string, ClaudeEntry>): string {
  const file = join(dir, 'claude_desktop_config.json')
  writeFileSync(file, `${JSON.stringify({ mcpServers: servers }, null, 2)}\n`)
  return file
}

export interface Finished {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
}

/** Runs `barbican ARGS…` in `cwd` as a child process, to its end. */
export function barbican(
  args: readonly string[],
  cwd: string,
  env: NodeJS.ProcessEnv = {},
): Promise<Finished> {
  const child = spawn(process.execPath, [bin, ...args], {
    cwd,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  return new Promise((resolve) => {
    child.once('close', (code) => resolve({ code, stdout, stderr }))
  })
}

/**
 * `barbican import claude_desktop_config.json` in `dir`: the realistic path from a client's file
 * to a gateway (it pins floating npx versions; the entries here already name exact ones, so what
 * runs is what CI tested). Returns the path of the barbican.yaml it wrote and what it printed.
 */
export async function importConfig(dir: string): Promise<{ file: string; printed: string }> {
  const file = join(dir, 'barbican.yaml')
  const run = await barbican(['import', 'claude_desktop_config.json', '--output', file], dir)
  if (run.code !== 0) throw new Error(`barbican import failed (${run.code}): ${run.stderr}`)
  return { file, printed: run.stdout + run.stderr }
}

/** A `barbican serve` child process, its URL once ready, and everything it logged. */
export interface Gateway {
  readonly url: string
  /** Everything the gateway wrote on stderr so far (JSON lines, since it is piped). */
  log(): string
  /** SIGTERM, then waits for it to exit (SIGKILL after 15 s). */
  stop(): Promise<void>
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve()
    else child.once('exit', () => resolve())
  })
}

/**
 * Starts `barbican serve --config FILE` on an ephemeral port with `mechanism`, and resolves once
 * it logs that it is ready (every upstream tried, ready or failed).
 */
export async function serve(
  file: string,
  mechanism: Mechanism,
  env: NodeJS.ProcessEnv = {},
  /** How long to wait for `ready`: an install whose scripts build a native module takes minutes. */
  readyTimeoutMs = 120_000,
): Promise<Gateway> {
  const mechanismEnv = mechanism === 'bubblewrap' ? 'auto' : 'node-permission'
  const child = spawn(
    process.execPath,
    [bin, 'serve', '--config', file, '--listen', '127.0.0.1:0'],
    {
      cwd: join(file, '..'),
      env: { ...process.env, ...env, [MECHANISM_ENV]: mechanismEnv },
      stdio: ['ignore', 'ignore', 'pipe'],
    },
  )
  let text = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    text += chunk.toString()
  })
  const stop = async () => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    child.kill('SIGTERM')
    await exited(child)
    clearTimeout(timer)
  }
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(`barbican serve never got ready:\n${text}`))
    }, readyTimeoutMs)
    const check = () => {
      const match = /"msg":"ready: [^"]* at (http[^ "]+)/.exec(text)
      if (match) {
        cleanup()
        resolve(match[1] as string)
      }
    }
    const early = (code: number | null) => {
      cleanup()
      reject(new Error(`barbican serve exited (${code}) before it was ready:\n${text}`))
    }
    const cleanup = () => {
      clearTimeout(timer)
      child.stderr?.off('data', check)
      child.off('exit', early)
    }
    child.stderr?.on('data', check)
    child.once('exit', early)
    check()
  }).catch(async (error: unknown) => {
    await stop()
    throw error
  })
  return { url, log: () => text, stop }
}

/** A client session through the gateway: calls that fail say what the gateway logged. */
export interface Session {
  /** Calls `tool` and returns its text; an error, or a result marked `isError`, throws. */
  call(tool: string, args?: Record<string, unknown>): Promise<string>
  close(): Promise<void>
}

/** An MCP client (the SDK's, over Streamable HTTP) connected to the gateway's `/mcp`. */
export async function connect(gateway: Gateway): Promise<Session> {
  const client = new Client({ name: 'real-servers', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(gateway.url)))
  // What the gateway said about its upstreams, for a failure's message.
  const said = () => logLines(gateway, /"level":"(warn|error)"/).join('\n')
  return {
    async call(tool, args = {}) {
      const result = await client
        .callTool({ name: tool, arguments: args }, undefined, { timeout: 120_000 })
        .catch((error: unknown) => {
          throw new Error(`${tool}: ${String(error)}\ngateway warnings:\n${said()}`)
        })
      const text = textOf(result)
      if (result.isError === true) {
        throw new Error(`${tool} failed: ${text}\ngateway warnings:\n${said()}`)
      }
      return text
    },
    close: () => client.close(),
  }
}

/** The log lines (parsed JSON) whose message matches `pattern`, to show what Barbican said. */
export function logLines(gateway: Gateway, pattern: RegExp): string[] {
  return gateway
    .log()
    .split('\n')
    .filter((line) => pattern.test(line))
}

/** The MCP Python SDK version the Python case installs (pinned, as a user's requirements file). */
export const PYTHON_MCP = 'mcp==2.3.0'

/**
 * A virtualenv with the official MCP Python SDK, at `.cache/python-mcp` in the checkout, made on
 * demand when missing (.ci/run makes it beforehand, so CI pays this once). Built from the
 * system's python3, whose interpreter lives in /usr like a distribution's. Returns the venv's
 * `bin/python`, the command a user puts in their client's config.
 */
export function pythonWithMcp(): string {
  const venv = join(root, '.cache/python-mcp')
  const python = join(venv, 'bin/python')
  const ready = () =>
    spawnSync(python, ['-c', 'import mcp.server'], { stdio: 'ignore' }).status === 0
  if (ready()) return python
  const system = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3'
  const steps: [string, string[]][] = [
    [system, ['-m', 'venv', '--clear', venv]],
    // One try per index: an unreachable index of pip's configuration must not cost minutes.
    [join(venv, 'bin/pip'), ['install', '-q', '--retries', '0', PYTHON_MCP]],
  ]
  for (const [command, args] of steps) {
    const run = spawnSync(command, args, { encoding: 'utf8', timeout: 600_000 })
    if (run.status !== 0) throw new Error(`${command} ${args.join(' ')}: ${run.stderr}`)
  }
  if (!ready()) throw new Error(`${venv} has no usable mcp package`)
  return python
}
