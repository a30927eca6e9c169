/**
 * `node bench/round-trip-cost.ts [--ops N] [--warmup N] [--rounds N] [--strace] [--callgrind]`: what one
 * kernel crossing and one loopback round trip cost the calling process on this machine, the
 * calibration for the gateway's per-call figures (bench/NOTEBOOK.md, "Issue 19's targets,
 * measured"). A child process holds a Redis client (the gateway's, src/store/redis.ts), a `pg`
 * client and an append-only file, and runs N operations of one kind at a time, sequentially,
 * after a warm-up of every kind (2000 each by default, so that V8 has compiled the paths, valgrind
 * or not), when its parent asks (a line on stdin):
 *
 * - `json`: `JSON.parse(JSON.stringify(m))` of a `tools/call` message: user-space work only, no
 *   syscall, so its CPU time over its instruction count is what an instruction costs here;
 * - `turn`: one idle event-loop turn (`await` a `setImmediate`);
 * - `fstat`: one cheap syscall (`fstat(2)` of an open file), no wake-up;
 * - `append`: one `write(2)` of a 300-byte line to a file opened for appending, no fsync (what
 *   the embedded audit journal does per event-loop turn);
 * - `redis-ping`: one Redis PING on loopback;
 * - `pg-select`: one `SELECT 1` on loopback (simple query protocol);
 * - `pg-prepared`: the same as a named, prepared statement (parse once, then bind/execute).
 *
 * Reported per operation, medians over the rounds (kinds rotated per round): the child's CPU
 * (process.cpuUsage, every thread: user and system separately), wall time, and its context
 * switches (every thread). `--strace` also counts the syscalls per operation by kind (strace -f -c
 * attached for that kind's ops only); `--callgrind` counts user-space instructions per operation
 * (the child under valgrind, instrumentation on for that kind's ops only; valgrind sees no kernel
 * work, which is the point: the two together split an operation into instructions and crossings).
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  closeSync,
  fstatSync,
  mkdtempSync,
  openSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { contextSwitches, NODE } from './processes.ts'
import { countSyscalls, type SyscallCounts, totalCalls } from './strace.ts'

const { values } = parseArgs({
  options: {
    ops: { type: 'string', default: '2000' },
    warmup: { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    strace: { type: 'boolean', default: false },
    callgrind: { type: 'boolean', default: false },
    child: { type: 'boolean', default: false },
  },
})
const OPS = Number(values.ops)
const WARMUP = Number(values.warmup)
const POSTGRES = process.env.BENCH_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/test'
const REDIS = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
export const KINDS = [
  'json',
  'turn',
  'fstat',
  'append',
  'redis-ping',
  'pg-select',
  'pg-prepared',
] as const
type Kind = (typeof KINDS)[number]

/** One kind's N operations, as the child measured them. */
interface Measured {
  readonly kind: Kind | 'none'
  readonly userUs: number
  readonly sysUs: number
  readonly wallUs: number
  readonly voluntary: number
  readonly involuntary: number
}

async function child(): Promise<void> {
  const { openRedis } = await import('../src/store/redis.ts')
  const { default: pg } = await import('pg')
  const redis = await openRedis(REDIS)
  const client = new pg.Client({ connectionString: POSTGRES })
  await client.connect()
  const dir = mkdtempSync(join(tmpdir(), 'barbican-round-trip-'))
  const fd = openSync(join(dir, 'journal'), 'a')
  const line = `${JSON.stringify({ t: 'tools/call', tool: 'echo', pad: 'x'.repeat(240) })}\n`
  const message = {
    jsonrpc: '2.0',
    id: 1,
    method: 'tools/call',
    params: { name: 'echo', arguments: { text: 'w1-1' }, _meta: { progressToken: 1 } },
  }
  const one: Record<Kind, () => unknown> = {
    json: () => JSON.parse(JSON.stringify(message)),
    turn: () => new Promise((resolve) => setImmediate(resolve)),
    fstat: () => fstatSync(fd),
    append: () => writeSync(fd, line),
    'redis-ping': () => redis.ping(),
    'pg-select': () => client.query('SELECT 1'),
    'pg-prepared': () => client.query({ name: 'bench_one', text: 'SELECT 1' }),
  }
  const run = async (kind: Kind, n: number) => {
    for (let i = 0; i < n; i++) await one[kind]()
  }
  for (const kind of KINDS) await run(kind, WARMUP)
  // Valgrind serves callgrind_control only while the program runs: a 10 ms timer keeps it awake
  // between measurements (its cost is measured as `none`, zero operations, and subtracted).
  let awake = setInterval(() => {}, 10)
  process.stdout.write('ready\n')
  for await (const text of createInterface({ input: process.stdin })) {
    const kind = text.trim() as Kind | 'none'
    if (kind !== 'none' && !KINDS.includes(kind)) break
    clearInterval(awake)
    const cs0 = contextSwitches(process.pid)
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    if (kind !== 'none') await run(kind, OPS)
    const wallUs = (performance.now() - t0) * 1000
    const cpu = process.cpuUsage(cpu0)
    const cs1 = contextSwitches(process.pid)
    const m: Measured = {
      kind,
      userUs: cpu.user / OPS,
      sysUs: cpu.system / OPS,
      wallUs: wallUs / OPS,
      voluntary: (cs1.voluntary - cs0.voluntary) / OPS,
      involuntary: (cs1.involuntary - cs0.involuntary) / OPS,
    }
    awake = setInterval(() => {}, 10)
    process.stdout.write(`${JSON.stringify(m)}\n`)
  }
  clearInterval(awake)
  closeSync(fd)
  rmSync(dir, { recursive: true, force: true })
  redis.destroy()
  await client.end()
}

/** The child, talking one JSON line per request. */
function startChild(wrapper: readonly string[] = []) {
  const args = [
    ...wrapper,
    NODE,
    import.meta.filename,
    '--child',
    '--ops',
    String(OPS),
    '--warmup',
    String(WARMUP),
  ]
  const proc: ChildProcess = spawn(args[0]!, args.slice(1), {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  })
  const lines = createInterface({ input: proc.stdout! })[Symbol.asyncIterator]()
  const next = async () => {
    const r = await lines.next()
    if (r.done) throw new Error('the measuring child ended')
    return r.value
  }
  return {
    proc,
    ready: next(),
    async measure(kind: Kind | 'none'): Promise<Measured> {
      proc.stdin!.write(`${kind}\n`)
      return JSON.parse(await next()) as Measured
    },
    async stop() {
      const exited = new Promise((resolve) => proc.once('exit', resolve))
      proc.stdin!.end()
      await exited
    },
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length / 2
  return s.length % 2 === 1 ? s[Math.floor(mid)]! : (s[mid - 1]! + s[mid]!) / 2
}
const f1 = (n: number) => n.toFixed(1)

async function timed(): Promise<void> {
  const c = startChild()
  await c.ready
  const samples = new Map<Kind, Measured[]>(KINDS.map((k) => [k, []]))
  try {
    for (let round = 0; round < Number(values.rounds); round++) {
      for (let i = 0; i < KINDS.length; i++) {
        const kind = KINDS[(i + round) % KINDS.length]!
        samples.get(kind)!.push(await c.measure(kind))
      }
    }
  } finally {
    await c.stop()
  }
  console.log(
    `\nper operation, medians of ${values.rounds} rounds of ${OPS} sequential operations (CPU: the calling process, every thread)\n`,
  )
  console.log(
    '| operation | user µs | system µs | CPU µs | wall µs | voluntary switches | involuntary |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const [kind, ms] of samples) {
    const p = (k: keyof Omit<Measured, 'kind'>) => median(ms.map((m) => m[k]))
    console.log(
      `| ${kind} | ${f1(p('userUs'))} | ${f1(p('sysUs'))} | ${f1(median(ms.map((m) => m.userUs + m.sysUs)))} | ${f1(p('wallUs'))} | ${p('voluntary').toFixed(2)} | ${p('involuntary').toFixed(2)} |`,
    )
  }
}

async function traced(): Promise<void> {
  const c = startChild()
  await c.ready
  const rows: [Kind, SyscallCounts][] = []
  try {
    for (const kind of KINDS) {
      rows.push([
        kind,
        await countSyscalls(c.proc.pid!, async () => {
          await c.measure(kind)
        }),
      ])
    }
  } finally {
    await c.stop()
  }
  console.log(`\nsyscalls per operation (strace -f -c, ${OPS} operations of each kind)\n`)
  console.log('| operation | syscalls | of which |')
  console.log('| --- | ---: | --- |')
  for (const [kind, counts] of rows) {
    const top = Object.entries(counts)
      .filter(([, n]) => n / OPS >= 0.01)
      .sort((a, b) => b[1] - a[1])
      .map(([name, n]) => `${name} ${(n / OPS).toFixed(2)}`)
      .join(', ')
    console.log(`| ${kind} | ${(totalCalls(counts) / OPS).toFixed(2)} | ${top} |`)
  }
}

async function counted(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-callgrind-'))
  const c = startChild([
    'valgrind',
    '--tool=callgrind',
    '--instr-atstart=no',
    `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
  ])
  await c.ready
  const perOp = new Map<Kind, number[]>(KINDS.map((k) => [k, []]))
  let dumps = 0
  try {
    const instructions = async (kind: Kind | 'none') => {
      const control = (...args: string[]) => {
        const r = spawnSync('callgrind_control', [...args, String(c.proc.pid)], {
          encoding: 'utf8',
        })
        if (r.status !== 0) throw new Error(`callgrind_control ${args}: ${r.stdout}${r.stderr}`)
        return r.stdout
      }
      control('-i', 'on')
      await c.measure(kind)
      control('-d')
      control('-i', 'off')
      const suffix = `.${++dumps}`
      const dump = readdirSync(dir).find((f) => f.endsWith(suffix))
      if (!dump) throw new Error(`${kind}: no callgrind dump in ${dir}: ${readdirSync(dir)}`)
      const totals = /^totals:\s+(\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))
      if (!totals) throw new Error(`${kind}: no totals in ${dump}`)
      return Number(totals[1])
    }
    for (let round = 0; round < Number(values.rounds); round++) {
      for (const kind of KINDS) {
        // What the toggling itself costs (the keep-awake timer, the request line): measured
        // just before, with zero operations, and subtracted.
        const overhead = await instructions('none')
        perOp.get(kind)!.push(((await instructions(kind)) - overhead) / OPS)
      }
    }
  } finally {
    await c.stop()
    rmSync(dir, { recursive: true, force: true })
  }
  console.log(
    `\nuser-space instructions per operation (callgrind, every thread; ${values.rounds} rounds of ${OPS} operations of each kind: median, and the lowest, with the least GC and compilation)\n`,
  )
  console.log('| operation | instructions (median) | lowest |')
  console.log('| --- | ---: | ---: |')
  for (const [kind, ns] of perOp)
    console.log(`| ${kind} | ${Math.round(median(ns))} | ${Math.round(Math.min(...ns))} |`)
}

if (values.child) await child()
else {
  await timed()
  if (values.strace) await traced()
  if (values.callgrind) await counted()
}
