/**
 * `node bench/backend-instructions.ts [--root DIR] [--only embedded|pg|fleet] [--warmup N]
 * [--calls N] [--concurrency N] [--idle-ms N] [--no-audit] [--no-quota] [--audit-journal]
 * [--drain] [--batch-window-ms N] [--without-major-gc] [--trace-gc] [--parallel-gc] [--keep DIR] [--cpu-prof DIR]`: the gateway's instructions per 2026-07-28 `tools/call`
 * (default c=16), counted by callgrind (bench/NOTEBOOK.md, "Issue 19's targets, measured";
 * ADR 087). The gateway of the checkout at DIR (default this one) runs under `valgrind
 * --tool=callgrind --instr-atstart=no --separate-threads=yes`, with `node --single-threaded-gc`;
 * after the warm-up (default 5000 calls) `callgrind_control -i on` counts the calls, then a dump
 * is read.
 *
 * The figure is the **main thread's**: the JavaScript, the event loop and all of GC (V8's
 * parallel scavenges would otherwise split GC between the main thread and helpers, differently
 * from run to run). V8's compiler threads and libuv's pool are printed apart as "other
 * threads": their work in the counted window is the tail of the warm-up's optimisation, and how
 * much of it lands there depends on scheduling (valgrind runs one thread at a time). The
 * whole-process count moved by ±0.2 M per call between runs; the main thread's, after 5000
 * calls of warm-up, by about ±2 % (after 400 it was still falling: code not yet optimised).
 *
 * Configurations: embedded (SQLite, quota in memory), pg (PostgreSQL store, quota in memory:
 * asked for only by `--only pg`) and fleet (PostgreSQL + Redis, quota in Redis; fresh schema and
 * prefix). Each has a quota on every call unless `--no-quota`. The stdio upstream is not counted.
 * Each figure is also given net of what the gateway runs idle over the same time (measured right
 * after the calls, for as long as they took, at most --idle-ms): under valgrind timers (the
 * fleet's heartbeat, the store polls) fire ~50 times too often per call. Work that calls trigger
 * at most so often (the pins revision read every 250 ms, a quota lease sized for 100 ms of
 * calls) is over-weighted the same way and is not subtracted. `--no-audit` turns the audit log
 * off in every configuration: the difference from a run with it on is the audit store's share.
 * `--audit-journal`: the PostgreSQL configurations journal their records (ADR 090), as the
 * embedded one does, instead of committing before every reply.
 * `--drain`: the count also takes in the commit of every audit record the counted calls made.
 * The warm-up's records are committed before counting starts; after the calls, counting goes on
 * until no journal file is left and the store holds one record per call (bench/audit-drain.ts),
 * and the idle rate is measured after that. Per call is then (calls + their commits) ÷ calls, in
 * every audit mode: committed before each reply, or journalled and committed per window.
 * Under valgrind a window holds ~50 times fewer calls than natively, so each commit carries fewer
 * records: `--batch-window-ms N` (audit.batchWindowMs, both sides; at most 10000) makes the
 * windows long enough for the batches of a native run (the commit at 256 records, c=16). The
 * records per commit in the counted window are printed.
 * Major GC (incremental marking and mark-compact, from `callgrind_annotate --inclusive`) is
 * printed apart: natively both configurations run one per ~7500 calls at c=16, so a window of
 * 800 calls under valgrind holds one or none, and that alone moved a count by 0.2–0.3 M per call.
 * `--without-major-gc`: the difference printed at the end leaves it out (judge it natively,
 * with `--trace-gc`: the same load without valgrind, the gateway under `node --trace-gc
 * --single-threaded-gc`, printing its mark-compacts per 1000 calls and their marking and pauses).
 * `--keep DIR` copies the dumps there: LABEL.calls and LABEL.idle for the main thread,
 * LABEL.calls.threadNN for the others (`callgrind_annotate DIR/LABEL.calls` reads the native
 * functions by name: GC, V8's compiler, the HTTP parser; JIT code shows as addresses).
 * `--cpu-prof DIR` runs the same load without valgrind, the gateway under `node --cpu-prof`
 * (profiles in DIR/LABEL; `node bench/profile-summary.ts` ranks them), as a cross-check by name.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import {
  copyFileSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { watchAudit } from './audit-drain.ts'
import { AUDIT_JOURNAL_OPTION, benchBackends } from './backends.ts'
import { echoCalls, type Target } from './mcp-http.ts'
import { FIXTURE, freePort, NODE, ROOT, stopGroup, waitForCall } from './processes.ts'

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    only: { type: 'string' },
    warmup: { type: 'string', default: '5000' },
    calls: { type: 'string', default: '800' },
    'idle-ms': { type: 'string', default: '30000' },
    concurrency: { type: 'string', default: '16' },
    'no-audit': { type: 'boolean', default: false },
    ...AUDIT_JOURNAL_OPTION,
    drain: { type: 'boolean', default: false },
    'without-major-gc': { type: 'boolean', default: false },
    'trace-gc': { type: 'boolean', default: false },
    'batch-window-ms': { type: 'string' },
    'no-quota': { type: 'boolean', default: false },
    'cpu-prof': { type: 'string' },
    'parallel-gc': { type: 'boolean', default: false },
    keep: { type: 'string' },
  },
})
const root = resolve(values.root)
const warmup = Number(values.warmup)
const calls = Number(values.calls)
const CONCURRENCY = Number(values.concurrency)
const batchWindowMs =
  values['batch-window-ms'] === undefined ? undefined : Number(values['batch-window-ms'])
const QUOTA = {
  ...(values['no-quota']
    ? {}
    : { rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } } }),
  ...(values['no-audit']
    ? { audit: { enabled: false } }
    : batchWindowMs !== undefined
      ? { audit: { batchWindowMs } }
      : {}),
}
const drain = values.drain && !values['no-audit']
const VARIANT = [
  values['no-audit'] ? 'audit off' : '',
  values['no-quota'] ? 'no quota' : '',
  drain ? `drained${batchWindowMs === undefined ? '' : `, window ${batchWindowMs} ms`}` : '',
]
  .filter(Boolean)
  .join(', ')

/** Calls `drive` makes for `n`: every worker makes the same number. */
const made = (n: number) => CONCURRENCY * Math.ceil(n / CONCURRENCY)

const drive = (http: Pool, target: Target, n: number) => echoCalls(http, target, n, CONCURRENCY)

/**
 * Instructions of the write barrier's builtins in a callgrind dump (self cost): ~3 k per call
 * always, ~25 k more while incremental marking runs.
 */
function barriersIn(dump: string): number {
  const annotated = spawnSync('callgrind_annotate', [dump], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  }).stdout
  let sum = 0
  for (const line of annotated?.split('\n') ?? []) {
    if (/Builtins_RecordWrite/.test(line)) {
      sum += Number(/^\s*([\d,]+)/.exec(line)?.[1]?.replaceAll(',', '') ?? 0)
    }
  }
  return sum
}

/** Instructions of major GC in a callgrind dump (0 if callgrind_annotate cannot read it). */
function majorGcIn(dump: string): number {
  const annotated = spawnSync('callgrind_annotate', ['--inclusive=yes', dump], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  }).stdout
  let sum = 0
  for (const line of annotated?.split('\n') ?? []) {
    if (
      /v8::internal::IncrementalMarking::Step\(v8::base::TimeDelta/.test(line) ||
      /v8::internal::Heap::MarkCompact\(\)/.test(line)
    ) {
      sum += Number(/^\s*([\d,]+)/.exec(line)?.[1]?.replaceAll(',', '') ?? 0)
    }
  }
  return sum
}

async function count(label: string, config: Record<string, unknown>): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-callgrind-'))
  const port = await freePort()
  const file = join(dir, 'barbican.json')
  writeFileSync(
    file,
    JSON.stringify({
      listen: `127.0.0.1:${port}`,
      log: { level: 'warn' },
      upstreams: { echo: { command: NODE, args: [FIXTURE, 'stdio'] } },
      ...config,
    }),
  )
  const audit = drain ? await watchAudit(config, dir) : undefined
  const serve = [join(root, 'bin/barbican.js'), 'serve', '--config', file]
  const profileDir =
    values['cpu-prof'] === undefined ? undefined : resolve(values['cpu-prof'], label)
  const traceGc = values['trace-gc']
  const child: ChildProcess = spawn(
    profileDir !== undefined || traceGc ? NODE : 'valgrind',
    traceGc
      ? ['--trace-gc', '--single-threaded-gc', ...serve]
      : profileDir !== undefined
        ? ['--cpu-prof', '--cpu-prof-dir', profileDir, ...serve]
        : [
            '--tool=callgrind',
            '--instr-atstart=no',
            '--separate-threads=yes',
            `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
            NODE,
            // All of GC on the main thread: V8's parallel scavenges otherwise split their work
            // between the main thread and helpers in proportions that vary from run to run.
            ...(values['parallel-gc'] ? [] : ['--single-threaded-gc']),
            ...serve,
          ],
    {
      cwd: root,
      detached: true,
      stdio: ['ignore', traceGc ? 'pipe' : 'ignore', 'ignore'],
      env: { ...process.env, NODE_NO_WARNINGS: '1' },
    },
  )
  let gcTrace = ''
  child.stdout?.on('data', (chunk: Buffer) => {
    gcTrace += chunk.toString('utf8')
  })
  const spawnedAt = performance.now()
  const target: Target = {
    url: `http://127.0.0.1:${port}/mcp`,
    stateful: false,
    stateless2026: true,
  }
  const http = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY })
  try {
    await waitForCall(target, 300_000)
    await drive(http, target, warmup)
    // The warm-up's records are committed before counting starts (not counted).
    await audit?.settle(300_000)
    const warm = await audit?.committed()
    if (traceGc) {
      const from = gcTrace.length
      const started = performance.now()
      await drive(http, target, calls)
      const ms = performance.now() - started
      await audit?.settle()
      await new Promise((resolve) => setTimeout(resolve, 500))
      const lines = gcTrace.slice(from).split('\n')
      const majors = lines.filter((l) => l.includes('Mark-Compact'))
      // "… MB, pooled: … MB, 3.21 / 0.01 ms  (+ 35.6 ms in 0 steps since start of marking": the
      // pause and the incremental marking before it.
      const gcMs = majors.reduce((sum, l) => {
        const pause = Number(/MB, (?:pooled: [\d.]+ MB, )?([\d.]+) \//.exec(l)?.[1] ?? 0)
        const marking = Number(/\(\+ ([\d.]+) ms in/.exec(l)?.[1] ?? 0)
        return sum + pause + marking
      }, 0)
      const scavenges = lines.filter((l) => l.includes('Scavenge')).length
      const n = made(calls)
      console.log(
        `${label}${VARIANT ? ` (${VARIANT})` : ''} c=${CONCURRENCY}, natively: ${n} calls in ` +
          `${ms.toFixed(0)} ms; ${majors.length} mark-compacts (${((majors.length * 1000) / n).toFixed(2)} ` +
          `per 1000 calls, ${((gcMs * 1000) / n).toFixed(2)} µs of marking and pause per call), ` +
          `${scavenges} scavenges`,
      )
      for (const l of majors.slice(0, 2)) console.log(`  ${l.trim()}`)
      return Number.NaN
    }
    if (profileDir !== undefined) {
      const started = performance.now()
      await drive(http, target, calls)
      const ms = performance.now() - started
      const skipMs = Math.round(started - spawnedAt)
      console.log(
        `${label}${VARIANT ? ` (${VARIANT})` : ''} c=${CONCURRENCY}: ${calls} calls in ${ms.toFixed(0)} ms, ` +
          `profile in ${profileDir} (node bench/profile-summary.ts FILE 40 ${skipMs})`,
      )
      return Number.NaN
    }
    spawnSync('callgrind_control', ['-i', 'on', String(child.pid)])
    const started = performance.now()
    await drive(http, target, calls)
    const callsMs = performance.now() - started
    // With --drain, until the last of these calls' records is committed.
    const drained = warm === undefined ? undefined : await audit!.drain(warm, made(calls))
    const busyMs = performance.now() - started
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    // Then as long again with no call (at most idleMs): under valgrind the calls take ~50 times
    // longer than natively, so timer-driven work (heartbeat, pools, sweeps) that runs per second
    // and not per call is counted ~50 times too heavily. Its rate, measured idle, is subtracted.
    const idleMs = Math.min(busyMs, Number(values['idle-ms']))
    await new Promise((resolve) => setTimeout(resolve, idleMs))
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    spawnSync('callgrind_control', ['-i', 'off', String(child.pid)])
    // The dumps of the valgrind'd process, one file per thread: callgrind.out.PID.N-TT, totals
    // since the previous dump. Thread 01 is the main thread.
    const dumpsOf = (n: number): string[] => {
      const dumps = readdirSync(dir).filter((f) =>
        new RegExp(`^callgrind\\.out\\.\\d+\\.${n}-\\d+$`).test(f),
      )
      if (dumps.length === 0) throw new Error(`${label}: no callgrind dump ${n} in ${dir}`)
      return dumps
    }
    const totalIn = (dump: string): number => {
      const totals = /^(?:totals|summary):\s+(\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))
      return totals ? Number(totals[1]) : 0
    }
    const isMain = (dump: string): boolean => dump.endsWith('-01')
    const split = (n: number): { main: number; other: number } => {
      let main = 0
      let other = 0
      for (const dump of dumpsOf(n)) {
        if (isMain(dump)) main += totalIn(dump)
        else other += totalIn(dump)
      }
      return { main, other }
    }
    if (values.keep !== undefined) {
      mkdirSync(values.keep, { recursive: true })
      for (const [n, what] of [
        [1, 'calls'],
        [2, 'idle'],
      ] as const) {
        for (const dump of dumpsOf(n)) {
          const thread = isMain(dump) ? '' : `.thread${dump.slice(dump.lastIndexOf('-') + 1)}`
          copyFileSync(join(dir, dump), join(values.keep, `${label}.${what}${thread}`))
        }
      }
    }
    // Major GC in the calls' window: incremental marking's steps and the mark-compact pause
    // (disjoint in callgrind's inclusive costs). One lands in a window of 800 calls or not: in
    // one run it was 0.23 M per call of a window's count, in the next nothing.
    const majorGc = dumpsOf(1)
      .filter(isMain)
      .reduce((sum, dump) => sum + majorGcIn(join(dir, dump)), 0)
    const barriers = dumpsOf(1)
      .filter(isMain)
      .reduce((sum, dump) => sum + barriersIn(join(dir, dump)), 0)
    const busy = split(1)
    const idle = split(2)
    const idleMain = (idle.main * 1000) / idleMs
    const perCall = busy.main / made(calls)
    const netPerCall = (busy.main - (idleMain * busyMs) / 1000) / made(calls)
    const m = (n: number, digits = 3): string => (n / 1e6).toFixed(digits)
    const drainedText =
      drained === undefined
        ? ''
        : `; ${drained.records} records committed in ${drained.commits} commits ` +
          `(${(drained.records / Math.max(1, drained.commits)).toFixed(1)} per commit), ` +
          `the last ${((busyMs - callsMs) / 1000).toFixed(1)} s after the last reply`
    const majorGcText =
      `, of which major GC ${m(majorGc / made(calls))} M ` +
      `(and write barriers ${m(barriers / made(calls))} M)`
    console.log(
      `${label}${VARIANT ? ` (${VARIANT})` : ''} c=${CONCURRENCY}, warm-up ${warmup}: ` +
        `main thread ${m(perCall)} M instructions per call${majorGcText}, net of idle ${m(netPerCall)} M ` +
        `(idle ${m(idleMain, 2)} M/s over ${(busyMs / 1000).toFixed(1)} s of calls${drained ? ' and commits' : ''}); ` +
        `other threads ${m(busy.other / made(calls))} M per call (idle ${m((idle.other * 1000) / idleMs, 2)} M/s)` +
        drainedText,
    )
    return values['without-major-gc'] ? netPerCall - majorGc / made(calls) : netPerCall
  } finally {
    await http.close()
    await audit?.close()
    await stopGroup(child)
    rmSync(dir, { recursive: true, force: true })
  }
}

const embedded =
  values.only === undefined || values.only === 'embedded'
    ? await count('embedded', QUOTA)
    : undefined
if (values.only !== 'embedded') {
  const backends = await benchBackends({ journal: values['audit-journal'] })
  const journal = values['audit-journal'] ? ' (journalled)' : ''
  try {
    const replica = values.only === 'pg' ? 'pg' : 'pg+redis'
    const label = `${replica}${journal}`
    const config = values.only === 'pg' ? { store: backends.config.store } : backends.config
    const other = await count(label, backends.journalled({ ...QUOTA, ...config }, replica))
    if (embedded !== undefined && values['cpu-prof'] === undefined && !values['trace-gc'])
      console.log(
        `${label} − embedded: main thread ${((other - embedded) / 1e6).toFixed(3)} M per call, net of idle` +
          (values['without-major-gc'] ? ', without major GC' : ''),
      )
  } finally {
    backends.cleanup()
  }
}
