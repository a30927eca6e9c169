/**
 * The processes under test: each runs as its own child (in its own process group, so stopping it
 * also stops whatever it spawned), and its CPU time and resident memory are read from /proc, so
 * every figure belongs to exactly one process.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Pool } from 'undici'
import { checkEcho, closeSession, initializeSession, type Target, toolCall } from './mcp-http.ts'

export const ROOT = fileURLToPath(new URL('..', import.meta.url))
export const NODE = process.execPath
export const FIXTURE = join(ROOT, 'bench/fixtures/echo-server.ts')
const CLOCK_TICKS_PER_SECOND = 100

/** One running process under test. */
export interface Running {
  readonly name: string
  readonly pid: number
  readonly target: Target
  /** Milliseconds from spawn to the first successful `tools/call`. */
  readonly readyMs: number
  /**
   * The upstream server a gateway configuration relays to, when it runs as a process of its
   * own (→ HTTP); a stdio upstream is a descendant of `pid` and counted by `descendantsCpuMicros`.
   */
  readonly upstreamPid?: number | undefined
  stop(): Promise<void>
}

/** CPU time the process has used so far, in microseconds: user, system (kernel) and both. */
export function cpuMicros(pid: number): { user: number; system: number; total: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8')
  // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
  const user = (Number(fields[11]) * 1_000_000) / CLOCK_TICKS_PER_SECOND
  const system = (Number(fields[12]) * 1_000_000) / CLOCK_TICKS_PER_SECOND
  return { user, system, total: user + system }
}

/**
 * CPU time used so far by every live descendant of `pid` (not `pid` itself), in microseconds:
 * a stdio upstream and its sandbox's helpers. Descendants that exited meanwhile are not counted.
 */
export function descendantsCpuMicros(pid: number): number {
  let total = 0
  for (const child of childrenOf(pid)) {
    try {
      total += cpuMicros(child).total + descendantsCpuMicros(child)
    } catch {
      // Exited between the listing and the read.
    }
  }
  return total
}

function childrenOf(pid: number): number[] {
  const out: number[] = []
  try {
    for (const task of readdirSync(`/proc/${pid}/task`)) {
      const text = readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim()
      if (text !== '') for (const child of text.split(' ')) out.push(Number(child))
    }
  } catch {
    // The process exited.
  }
  return out
}

/** Resident set size now, in bytes. */
export function rssBytes(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const match = /^VmRSS:\s+(\d+) kB/m.exec(status)
  return match ? Number(match[1]) * 1024 : Number.NaN
}

/** A free loopback port (bound and released at once). */
export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/**
 * Waits until one initialize + `tools/call` round trip on `target` succeeds, polling every few
 * milliseconds; returns when it did, or throws after `timeoutMs`.
 */
export async function waitForCall(target: Target, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last: unknown
  while (Date.now() < deadline) {
    const pool = new Pool(new URL(target.url).origin, { connections: 1 })
    try {
      const session = target.stateful ? await initializeSession(pool, target) : undefined
      const reply = await toolCall(pool, target, session, 1, 'ready')
      checkEcho(reply, 1, 'ready')
      await closeSession(pool, target, session).catch(() => {})
      return
    } catch (error) {
      last = error
      await new Promise((resolve) => setTimeout(resolve, 5))
    } finally {
      await pool.destroy()
    }
  }
  throw new Error(`${target.url} did not answer within ${timeoutMs} ms: ${String(last)}`)
}

/**
 * Process groups started here and still running. Detached groups outlive this process unless
 * killed, so an interrupted or crashed run kills them on the way out.
 */
const live = new Set<number>()
process.once('exit', () => {
  for (const pid of live) {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {}
  }
})
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => process.exit(130))
}

/** Spawns `args` with Node in its own process group; stderr is kept for failure reports. */
export function spawnNode(args: readonly string[], nodeOptions: readonly string[] = []) {
  const child = spawn(NODE, [...nodeOptions, ...args], {
    cwd: ROOT,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  })
  const pid = child.pid
  if (pid !== undefined) {
    live.add(pid)
    child.once('exit', () => live.delete(pid))
  }
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    if (stderr.length < 8_000) stderr += chunk.toString('utf8')
  })
  child.stdout?.resume()
  return { child, stderr: () => stderr }
}

/** Stops a process group: SIGTERM, then SIGKILL if it has not exited after two seconds. */
export async function stopGroup(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const pid = child.pid
  try {
    process.kill(-pid, 'SIGTERM')
  } catch {
    return
  }
  const timer = setTimeout(() => {
    try {
      process.kill(-pid, 'SIGKILL')
    } catch {}
  }, 2_000)
  await exited
  clearTimeout(timer)
  // Whatever the leader left behind in its group (a peer's child server) goes too.
  try {
    process.kill(-pid, 'SIGKILL')
  } catch {}
}

/** Spawns a process that serves `target` and waits for its first successful call. */
export async function startServing(
  name: string,
  args: readonly string[],
  target: Target,
  options: { nodeOptions?: readonly string[]; cleanup?: () => void } = {},
): Promise<Running> {
  const started = performance.now()
  const { child, stderr } = spawnNode(args, options.nodeOptions)
  const died = new Promise<never>((_, reject) =>
    child.once('exit', (code) => reject(new Error(`${name} exited (${code}): ${stderr()}`))),
  )
  died.catch(() => {})
  try {
    await Promise.race([waitForCall(target, 30_000), died])
  } catch (error) {
    await stopGroup(child)
    options.cleanup?.()
    throw error
  }
  const readyMs = performance.now() - started
  return {
    name,
    pid: child.pid!,
    target,
    readyMs,
    async stop() {
      await stopGroup(child)
      options.cleanup?.()
    },
  }
}

/** The direct SDK server over Streamable HTTP. */
export async function startDirect(stateful: boolean): Promise<Running> {
  const port = await freePort()
  const mode = stateful ? 'http-stateful' : 'http-stateless'
  return await startServing(
    stateful ? 'direct-stateful' : 'direct-stateless',
    [FIXTURE, mode, String(port)],
    { url: `http://127.0.0.1:${port}/mcp`, stateful },
  )
}

/** Plain node:http answering the echo call itself: the floor of one HTTP hop in Node. */
export async function startFloor(): Promise<Running> {
  const port = await freePort()
  return await startServing('node-http-floor', [FIXTURE, 'http-floor', String(port)], {
    url: `http://127.0.0.1:${port}/mcp`,
    stateful: false,
  })
}

/** The 40-line pass-through proxy (bench/fixtures/passthrough-proxy.ts) in front of `url`. */
export async function startPassthrough(url: string): Promise<Running> {
  const port = await freePort()
  return await startServing(
    'passthrough-proxy',
    [join(ROOT, 'bench/fixtures/passthrough-proxy.ts'), url, String(port)],
    { url: `http://127.0.0.1:${port}/mcp`, stateful: true },
  )
}

/**
 * What Barbican fronts: the fixture over HTTP at `url`, or launched over stdio (`script`: another
 * stdio fixture than the SDK one, e.g. bench/fixtures/light-echo.ts).
 */
export type BarbicanUpstream =
  | { readonly url: string }
  | { readonly stdio: true; readonly script?: string }

/** The API key the `+auth` configurations require (a fixed test value, loopback only). */
const BENCH_API_KEY = 'bk_bench-only-key-not-a-secret-0000000000000'

/** Inbound auth for the `+auth` configurations: one API key and a permission rule to evaluate. */
const AUTH_CONFIG = {
  apiKeys: {
    keys: [
      {
        id: 'bench',
        hash: `sha256:${createHash('sha256').update(BENCH_API_KEY).digest('hex')}`,
        subject: 'bench',
      },
    ],
  },
  permissions: [{ subjects: ['bench'], tools: ['echo', 'other_*'] }],
}

/**
 * Barbican (`bin/barbican.js serve`) in front of one upstream, from a generated config. `root`
 * is the checkout to run (another one, e.g. an export of the previous commit, for before/after
 * comparisons within the same rounds).
 */
export async function startBarbican(
  name: string,
  upstream: BarbicanUpstream,
  nodeOptions: readonly string[] = [],
  root: string = ROOT,
  auth = false,
  /** More top-level config keys (store, redis, rateLimits), and calls in 2026-07-28 form. */
  extra: { readonly config?: Record<string, unknown>; readonly stateless2026?: boolean } = {},
): Promise<Running> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-'))
  const config = join(dir, 'barbican.json')
  const entry =
    'url' in upstream
      ? { url: upstream.url, transport: 'streamable-http' }
      : upstream.script === undefined
        ? { command: NODE, args: [FIXTURE, 'stdio'] }
        : { command: NODE, args: [upstream.script] }
  const stripped = strippedKeys(root)
  writeFileSync(
    config,
    JSON.stringify({
      listen: `127.0.0.1:${port}`,
      log: { level: 'warn' },
      limits: sessionLimits(root),
      ...stripped.gateway,
      upstreams: { echo: { ...entry, ...('command' in entry ? stripped.stdio : {}) } },
      ...(auth ? { auth: AUTH_CONFIG } : {}),
      ...extra.config,
    }),
  )
  return await startServing(
    name,
    [join(root, 'bin/barbican.js'), 'serve', '--config', config],
    {
      url: `http://127.0.0.1:${port}/mcp`,
      stateful: extra.stateless2026 !== true,
      ...(extra.stateless2026 ? { stateless2026: true } : {}),
      ...(auth ? { headers: { authorization: `Bearer ${BENCH_API_KEY}` } } : {}),
    },
    { nodeOptions, cleanup: () => rmSync(dir, { recursive: true, force: true }) },
  )
}

/**
 * Barbican as users run it (issue 33): `barbican serve` with a plain Claude Desktop file and
 * nothing else, so every default holds: call lines at `info` on stderr (a pipe here, JSON lines),
 * the audit log and metrics on, the stdio upstream confined. Only the address is given, on the
 * command line, because the default port may be taken on a shared machine. stderr is read and
 * dropped by the bench, as a supervisor's pipe would take it.
 */
export async function startBarbicanAsUsers(
  name: string,
  upstream: BarbicanUpstream,
  nodeOptions: readonly string[] = [],
  root: string = ROOT,
): Promise<Running> {
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-'))
  const config = join(dir, 'claude_desktop_config.json')
  const entry =
    'url' in upstream
      ? { type: 'http', url: upstream.url }
      : { command: NODE, args: [upstream.script ?? FIXTURE, ...(upstream.script ? [] : ['stdio'])] }
  writeFileSync(config, JSON.stringify({ mcpServers: { echo: entry } }, null, 2))
  return await startServing(
    name,
    [join(root, 'bin/barbican.js'), 'serve', '--config', config, '--listen', `127.0.0.1:${port}`],
    { url: `http://127.0.0.1:${port}/mcp`, stateful: true },
    { nodeOptions, cleanup: () => rmSync(dir, { recursive: true, force: true }) },
  )
}

/**
 * What the stripped configurations turn off, where the checkout knows the key: the audit log,
 * metrics and the sandbox arrived with wave 2, and an older checkout's schema refuses them. With
 * `log.level: warn` this is the gateway as it was before wave 2 (the reference for issue 33.4).
 */
export function strippedKeys(root: string): {
  gateway: Record<string, unknown>
  stdio: Record<string, unknown>
} {
  const schema = join(root, 'schema/config.json')
  const properties = existsSync(schema)
    ? ((JSON.parse(readFileSync(schema, 'utf8')) as { properties?: Record<string, unknown> })
        .properties ?? {})
    : {}
  return {
    gateway: {
      ...('audit' in properties ? { audit: { enabled: false } } : {}),
      ...('metrics' in properties ? { metrics: { enabled: false } } : {}),
    },
    stdio: 'sandbox' in properties ? { sandbox: 'none' } : {},
  }
}

/** mcp-proxy: spawns the stdio fixture and serves it over Streamable HTTP (sessions). */
export async function startMcpProxy(): Promise<Running> {
  const port = await freePort()
  return await startServing(
    'mcp-proxy',
    [
      join(ROOT, 'node_modules/mcp-proxy/dist/bin/mcp-proxy.mjs'),
      '--port',
      String(port),
      '--host',
      '127.0.0.1',
      '--server',
      'stream',
      '--',
      NODE,
      FIXTURE,
      'stdio',
    ],
    { url: `http://127.0.0.1:${port}/mcp`, stateful: true },
  )
}

/** supergateway: stdio → Streamable HTTP, stateful (it spawns one stdio child per session). */
export async function startSupergateway(): Promise<Running> {
  const port = await freePort()
  return await startServing(
    'supergateway',
    [
      join(ROOT, 'node_modules/supergateway/dist/index.js'),
      '--stdio',
      `${NODE} ${FIXTURE} stdio`,
      '--outputTransport',
      'streamableHttp',
      '--stateful',
      '--sessionTimeout',
      '60000',
      '--port',
      String(port),
      '--logLevel',
      'none',
    ],
    { url: `http://127.0.0.1:${port}/mcp`, stateful: true },
  )
}

/**
 * Room for the idle-sessions micro-benchmark, whose 10k sessions all come from one address: a
 * checkout that bounds sessions per identity (ADR 021) gets that bound raised too. An older
 * checkout's schema would refuse the key, so it is set only where the schema knows it.
 */
function sessionLimits(root: string): Record<string, number> {
  const schema = join(root, 'schema/config.json')
  const perIdentity =
    existsSync(schema) && readFileSync(schema, 'utf8').includes('maxSessionsPerIdentity')
  return perIdentity
    ? { maxSessions: 20_000, maxSessionsPerIdentity: 20_000 }
    : { maxSessions: 20_000 }
}

/**
 * Context switches so far, summed over every thread of the process: voluntary ones (the thread
 * blocked: epoll_wait, a futex, a read that had to wait, so each is one sleep and one wake-up)
 * and involuntary ones (preempted by the scheduler).
 */
export function contextSwitches(pid: number): { voluntary: number; involuntary: number } {
  let voluntary = 0
  let involuntary = 0
  let tasks: string[] = []
  try {
    tasks = readdirSync(`/proc/${pid}/task`)
  } catch {}
  for (const tid of tasks) {
    try {
      const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8')
      voluntary += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0)
      involuntary += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(status)?.[1] ?? 0)
    } catch {
      // A thread that ended meanwhile.
    }
  }
  return { voluntary, involuntary }
}
