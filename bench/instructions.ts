/**
 * `node bench/instructions.ts [--calls N] [--warmup N] [--only a,b] [--root DIR]`: instructions
 * per legacy `tools/call` (c=16, each worker on its own session) of the gateway in the
 * configurations of `npm run bench` — as users run it (`-default`) and stripped — counted by
 * callgrind, which counts the same on a loaded machine as on a quiet one (issue 33: CPU time on
 * this shared machine moved 2× between runs). The gateway runs under `valgrind --tool=callgrind
 * --instr-atstart=no --separate-threads=yes` with `node --single-threaded-gc`; after the warm-up
 * `callgrind_control -i on` counts N calls, a dump is taken, then the same span idle is
 * counted and dumped, so each figure is also given net of what the gateway does idle (timers:
 * the audit window, the trust revision read; under valgrind they fire ~50× as often per call).
 * All threads are summed (the main thread alone is printed too). The upstream is not counted.
 * The warm-up is 12,000 calls: after 3,000, V8 was still optimising on its worker threads, and
 * that compile work (0.6–0.9 M instructions per call, varying run to run) swamped the per-call
 * work (docs/performance.md, second pass).
 * `--keep DIR`: the callgrind files are moved to DIR/<configuration>/ for callgrind_annotate
 * (`callgrind_annotate --inclusive=yes DIR/barbican-http-default/callgrind.out.*.1-01`).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import {
  checkEcho,
  type HttpSession,
  initializeSession,
  type Target,
  toolCall,
} from './mcp-http.ts'
import {
  FIXTURE,
  freePort,
  NODE,
  ROOT,
  type Running,
  startDirect,
  strippedKeys,
  waitForCall,
} from './processes.ts'

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '800' },
    warmup: { type: 'string', default: '12000' },
    only: { type: 'string' },
    keep: { type: 'string' },
    root: { type: 'string', default: ROOT },
  },
})
const CALLS = Number(values.calls)
const WARMUP = Number(values.warmup)
const C = 16
const root = values.root
const stripped = strippedKeys(root)

/** The config file of each configuration, given the upstream's URL (→ HTTP) or none. */
const CONFIGURATIONS: Record<string, { http: boolean; file(url?: string): object }> = {
  'barbican-http-default': {
    http: true,
    file: (url) => ({ mcpServers: { echo: { type: 'http', url } } }),
  },
  'barbican-stdio-default': {
    http: false,
    file: () => ({ mcpServers: { echo: { command: NODE, args: [FIXTURE, 'stdio'] } } }),
  },
  // As bench/processes.ts strips them: only the keys the checkout knows (a182ff4 has none).
  'barbican-http': {
    http: true,
    file: (url) => ({
      log: { level: 'warn' },
      ...stripped.gateway,
      upstreams: { echo: { url, transport: 'streamable-http' } },
    }),
  },
  'barbican-stdio': {
    http: false,
    file: () => ({
      log: { level: 'warn' },
      ...stripped.gateway,
      upstreams: { echo: { command: NODE, args: [FIXTURE, 'stdio'], ...stripped.stdio } },
    }),
  },
}

async function calls(http: Pool, target: Target, sessions: HttpSession[], n: number) {
  let id = 0
  await Promise.all(
    sessions.map(async (session, w) => {
      for (let i = 0; i < n / sessions.length; i++) {
        const text = `w${w}-${i}`
        const me = ++id
        checkEcho(await toolCall(http, target, session, me, text), me, text)
      }
    }),
  )
}

/** Instructions in the dumps numbered `n` (every thread), and the main thread's alone. */
function totals(dir: string, n: number): { all: number; main: number } {
  let all = 0
  let main = 0
  for (const file of readdirSync(dir)) {
    if (!file.startsWith('callgrind.out.') || !file.includes(`.${n}-`)) continue
    const text = readFileSync(join(dir, file), 'utf8')
    const total = Number(/^(?:totals|summary): (\d+)/m.exec(text)?.[1] ?? 0)
    all += total
    if (file.endsWith('-01')) main += total
  }
  return { all, main }
}

async function count(name: string): Promise<string> {
  const config = CONFIGURATIONS[name]!
  const upstream: Running | undefined = config.http ? await startDirect(true) : undefined
  const dir = mkdtempSync(join(tmpdir(), 'barbican-instructions-'))
  const file = join(dir, config.http ? 'barbican.json' : 'claude_desktop_config.json')
  writeFileSync(file, JSON.stringify(config.file(upstream?.target.url)))
  const port = await freePort()
  const child: ChildProcess = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      '--separate-threads=yes',
      `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
      NODE,
      '--single-threaded-gc',
      join(root, 'bin/barbican.js'),
      'serve',
      '--config',
      file,
      '--listen',
      `127.0.0.1:${port}`,
    ],
    { cwd: root, detached: true, stdio: 'ignore', env: { ...process.env, NODE_NO_WARNINGS: '1' } },
  )
  const target: Target = { url: `http://127.0.0.1:${port}/mcp`, stateful: true }
  const http = new Pool(`http://127.0.0.1:${port}`, { connections: C })
  try {
    await waitForCall(target, 300_000)
    const sessions = await Promise.all(
      Array.from({ length: C }, () => initializeSession(http, target)),
    )
    await calls(http, target, sessions, WARMUP)
    spawnSync('callgrind_control', ['-i', 'on', String(child.pid)])
    const started = performance.now()
    await calls(http, target, sessions, CALLS)
    const ms = performance.now() - started
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    await new Promise((resolve) => setTimeout(resolve, ms))
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    const busy = totals(dir, 1)
    const idle = totals(dir, 2)
    const m = (n: number) => (n / CALLS / 1e6).toFixed(3)
    return `| ${name} | ${m(busy.all)} | ${m(busy.all - idle.all)} | ${m(busy.main)} | ${m(idle.all)} |`
  } finally {
    await http.close()
    try {
      process.kill(-child.pid!, 'SIGKILL')
    } catch {}
    await upstream?.stop()
    if (values.keep !== undefined) {
      mkdirSync(values.keep, { recursive: true })
      renameSync(dir, join(values.keep, name))
    } else rmSync(dir, { recursive: true, force: true })
  }
}

const chosen = Object.keys(CONFIGURATIONS).filter(
  (name) => !values.only || values.only.split(',').includes(name),
)
console.log(
  `\nInstructions per tools/call (millions), callgrind, ${CALLS} calls at c=${C} after ${WARMUP}; checkout ${root}\n`,
)
console.log('| configuration | all threads | net of idle | main thread | idle, same span |')
console.log('| --- | ---: | ---: | ---: | ---: |')
for (const name of chosen) console.log(await count(name))
