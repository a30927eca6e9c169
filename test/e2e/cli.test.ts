/**
 * The `barbican` command as users run it: a Claude Desktop file loads unchanged, `check` names
 * failing upstreams, `serve` refuses an unauthenticated non-loopback bind, and a SIGKILLed
 * gateway leaves no upstream process behind.
 */
import assert from 'node:assert/strict'
import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, realpathSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, test } from 'node:test'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'

const root = fileURLToPath(new URL('../../', import.meta.url))
const bin = join(root, 'bin/barbican.js')
const pkg = (name: string) =>
  join(root, 'node_modules/@modelcontextprotocol', name, 'dist/index.js')
const run = promisify(execFile)

async function barbican(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [bin, ...args], { timeout: 60_000, env })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string }
    return { code: e.code ?? -1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

function tempDir(): string {
  return realpathSync(mkdtempSync(join(tmpdir(), 'barbican-cli-')))
}

/**
 * Pids of live processes whose command line mentions `marker`, the gateway's own aside: a child
 * it has forked but not yet exec'd still shows the gateway's command line, config path included.
 */
function processesMentioning(marker: string): number[] {
  const pids: number[] = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue
    try {
      const cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8')
      const state = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.[0]
      if (cmdline.includes(marker) && !cmdline.includes(bin) && state !== 'Z') {
        pids.push(Number(entry))
      }
    } catch {
      // The process ended while we looked.
    }
  }
  return pids
}

describe('the barbican command', () => {
  test('prints its version', async () => {
    const { code, stdout } = await barbican(['--version'])
    assert.equal(code, 0)
    assert.match(stdout, /^barbican \d+\.\d+\.\d+/)
  })

  test('check loads a Claude Desktop config file unchanged and connects to its server', async () => {
    const dir = tempDir()
    const file = join(dir, 'claude_desktop_config.json')
    writeFileSync(
      file,
      JSON.stringify({
        mcpServers: {
          memory: {
            command: process.execPath,
            args: [pkg('server-memory')],
            env: { MEMORY_FILE_PATH: join(dir, 'memory.jsonl') },
          },
        },
        globalShortcut: 'Ctrl+Space',
      }),
    )
    const { code, stdout } = await barbican(['check', '--config', file])
    assert.equal(code, 0, stdout)
    assert.match(stdout, /\(claude\)/)
    assert.match(stdout, /ok {4}memory: .*\d+ tool\(s\)/)
    // Confined by default, and check says how in a few words (ADR 109): the data file's
    // folder is granted, from the entry's env.
    assert.match(stdout, /\n {6}sandbox: bubblewrap \(no network; writes: state, [^\n]+\)\n/)
    assert.ok(!/not covered/.test(stdout), stdout)
    // --verbose: the mechanism in full, what it leaves open, every grant with its source.
    const verbose = await barbican(['check', '--verbose', '--config', file])
    assert.equal(verbose.code, 0, verbose.stdout)
    assert.match(verbose.stdout, /\n {6}sandbox: bubblewrap .*\+ seccomp.*; not covered: /)
    assert.match(verbose.stdout, /\n {6}grant: write \S+ \(env MEMORY_FILE_PATH/)
  })

  test('an unknown BARBICAN_SANDBOX_MECHANISM stops serve and check before anything starts', async () => {
    const dir = tempDir()
    const file = join(dir, 'barbican.yaml')
    // Even with the fallback that accepts running unconfined: a typo is never less confinement.
    writeFileSync(
      file,
      `sandbox: { fallback: unconfined }\nupstreams:\n  m:\n    command: ${process.execPath}\n    args: [${JSON.stringify(pkg('server-memory'))}]\n`,
    )
    const env = { ...process.env, BARBICAN_SANDBOX_MECHANISM: 'bwrap' }
    for (const args of [['check'], ['serve', '--port', '0']]) {
      const { code, stdout, stderr } = await barbican([...args, '--config', file], env)
      assert.equal(code, 1, `${args[0]}: ${stdout}${stderr}`)
      // serve logs it (JSON here, so the quotes are escaped); check prints it.
      assert.match(
        stderr,
        /BARBICAN_SANDBOX_MECHANISM=\\?"bwrap\\?" is not a sandbox mechanism; expected auto or node-permission/,
      )
      assert.ok(!/ok {4}m:|upstream process started/.test(stdout + stderr), stdout + stderr)
    }
  })

  test('check exits non-zero naming the upstream that cannot start', async () => {
    const dir = tempDir()
    const file = join(dir, 'barbican.yaml')
    writeFileSync(file, 'upstreams:\n  ghost:\n    command: /nonexistent/ghost-server\n')
    const { code, stdout } = await barbican(['check', '--config', file])
    assert.equal(code, 1)
    assert.match(stdout, /FAIL {2}ghost: /)
  })

  test('check reports an invalid config with the exact key', async () => {
    const dir = tempDir()
    const file = join(dir, 'barbican.yaml')
    writeFileSync(file, 'upstreams:\n  bad:\n    command: node\n    args: [1, {}]\n')
    const { code, stderr } = await barbican(['check', '--config', file])
    assert.equal(code, 1)
    assert.match(stderr, /upstreams\.bad\.args\[1\]/)
  })

  test('serve refuses a non-loopback bind without inbound auth', async () => {
    const dir = tempDir()
    const file = join(dir, 'barbican.yaml')
    writeFileSync(
      file,
      `upstreams:\n  memory:\n    command: ${process.execPath}\n    args: ["${pkg('server-memory')}"]\n`,
    )
    const { code, stderr } = await barbican(['serve', '--config', file, '--listen', '0.0.0.0:0'])
    assert.equal(code, 1)
    assert.match(stderr, /not a loopback address/)
  })

  test('killing the gateway with SIGKILL leaves no upstream process behind', async () => {
    const dir = tempDir()
    const file = join(dir, 'barbican.yaml')
    writeFileSync(
      file,
      `upstreams:\n  files:\n    command: ${process.execPath}\n    args: ["${pkg('server-filesystem')}", "${dir}"]\n`,
    )
    const gateway: ChildProcess = spawn(
      process.execPath,
      [bin, 'serve', '--config', file, '--listen', '127.0.0.1:0'],
      {
        stdio: ['ignore', 'ignore', 'pipe'],
      },
    )
    try {
      const deadline = Date.now() + 30_000
      // The upstream is started eagerly; wait until its process exists.
      while (processesMentioning(dir).filter((p) => p !== gateway.pid).length === 0) {
        assert.ok(Date.now() < deadline, 'the upstream never started')
        await new Promise((r) => setTimeout(r, 100))
      }
      const upstreams = processesMentioning(dir).filter((p) => p !== gateway.pid)
      assert.ok(upstreams.length > 0)
      gateway.kill('SIGKILL')
      const gone = Date.now() + 10_000
      while (upstreams.some((p) => processesMentioning(dir).includes(p))) {
        assert.ok(Date.now() < gone, `still running: ${processesMentioning(dir).join(', ')}`)
        await new Promise((r) => setTimeout(r, 100))
      }
    } finally {
      gateway.kill('SIGKILL')
    }
  })

  test('serve without a config starts the embedded demo with real tools from several servers', async () => {
    const cwd = tempDir()
    const gateway = spawn(process.execPath, [bin, 'serve', '--listen', '127.0.0.1:0'], {
      cwd,
      stdio: ['ignore', 'ignore', 'pipe'],
    })
    try {
      const url = await new Promise<string>((resolve, reject) => {
        let seen = ''
        const timer = setTimeout(() => reject(new Error(`no URL announced: ${seen}`)), 30_000)
        gateway.stderr?.on('data', (chunk: Buffer) => {
          seen += chunk.toString()
          const match = /serving .* at (http:\/\/[^\s]+)\/mcp/.exec(seen)
          if (match?.[1]) {
            clearTimeout(timer)
            resolve(match[1])
          }
        })
      })
      const client = new Client({ name: 'demo', version: '1.0.0' })
      await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`)))
      try {
        const { tools } = await client.listTools()
        const prefixes = new Set(tools.map((t) => t.name.split('__')[0]))
        assert.ok(prefixes.size >= 2, `tools from ${[...prefixes].join(', ')}`)
        const echo = await client.callTool({
          name: 'everything__echo',
          arguments: { message: 'demo' },
        })
        assert.match(JSON.stringify(echo), /Echo: demo/)
      } finally {
        await client.close()
      }
    } finally {
      gateway.kill('SIGTERM')
    }
  })
})
