/**
 * `node bench/backend-instructions.ts [--root DIR] [--only embedded|pg|fleet] [--warmup N]
 * [--calls N] [--idle-ms N] [--no-audit] [--audit-journal] [--keep DIR]`: the gateway's
 * instructions per 2026-07-28 `tools/call` at c=16, counted by
 * callgrind (docs/performance.md, "Gateway CPU, counted in instructions"). The gateway of the
 * checkout at DIR (default this one) runs under `valgrind --tool=callgrind --instr-atstart=no`;
 * after the warm-up `callgrind_control -i on` counts the calls, then a dump is read. Two
 * configurations, each with a quota on every call: embedded (SQLite, quota in memory), pg
 * (PostgreSQL store, quota in memory: asked for only by `--only pg`) and fleet (PostgreSQL +
 * Redis, quota in Redis; fresh schema and prefix). The stdio upstream is not counted. Each
 * figure is also given net of what the gateway runs idle over the same time (measured right
 * after the calls, for as long as they took, at most --idle-ms). `--no-audit` turns the audit log
 * off in every configuration: the difference from a run with it on is the audit store's share.
 * `--audit-journal`: the PostgreSQL configurations journal their records (ADR 090), as the
 * embedded one does, instead of committing before every reply.
 * `--keep DIR` copies the dumps there (`callgrind_annotate DIR/LABEL.calls` reads the calls'
 * native functions by name; JIT code shows as addresses).
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
import { AUDIT_JOURNAL_OPTION, benchBackends } from './backends.ts'
import { checkEcho, type Target, toolCall } from './mcp-http.ts'
import { FIXTURE, freePort, NODE, ROOT, stopGroup, waitForCall } from './processes.ts'

const { values } = parseArgs({
  options: {
    root: { type: 'string', default: ROOT },
    only: { type: 'string' },
    warmup: { type: 'string', default: '400' },
    calls: { type: 'string', default: '800' },
    'idle-ms': { type: 'string', default: '30000' },
    'no-audit': { type: 'boolean', default: false },
    ...AUDIT_JOURNAL_OPTION,
    keep: { type: 'string' },
  },
})
const root = resolve(values.root)
const warmup = Number(values.warmup)
const calls = Number(values.calls)
const CONCURRENCY = 16
const QUOTA = {
  rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } },
  ...(values['no-audit'] ? { audit: { enabled: false } } : {}),
}

async function drive(http: Pool, target: Target, n: number): Promise<void> {
  let id = 0
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async (_, w) => {
      for (let i = 0; i < n / CONCURRENCY; i++) {
        const text = `w${w}-${i}`
        const me = ++id
        checkEcho(await toolCall(http, target, undefined, me, text), me, text)
      }
    }),
  )
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
  const child: ChildProcess = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      '--instr-atstart=no',
      `--callgrind-out-file=${join(dir, 'callgrind.out.%p')}`,
      NODE,
      join(root, 'bin/barbican.js'),
      'serve',
      '--config',
      file,
    ],
    { cwd: root, detached: true, stdio: 'ignore', env: { ...process.env, NODE_NO_WARNINGS: '1' } },
  )
  const target: Target = {
    url: `http://127.0.0.1:${port}/mcp`,
    stateful: false,
    stateless2026: true,
  }
  const http = new Pool(`http://127.0.0.1:${port}`, { connections: CONCURRENCY })
  try {
    await waitForCall(target, 300_000)
    await drive(http, target, warmup)
    spawnSync('callgrind_control', ['-i', 'on', String(child.pid)])
    const started = performance.now()
    await drive(http, target, calls)
    const busyMs = performance.now() - started
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    // Then as long again with no call (at most idleMs): under valgrind the calls take ~50 times
    // longer than natively, so timer-driven work (heartbeat, pools, sweeps) that runs per second
    // and not per call is counted ~50 times too heavily. Its rate, measured idle, is subtracted.
    const idleMs = Math.min(busyMs, Number(values['idle-ms']))
    await new Promise((resolve) => setTimeout(resolve, idleMs))
    spawnSync('callgrind_control', ['-d', String(child.pid)])
    spawnSync('callgrind_control', ['-i', 'off', String(child.pid)])
    // The dumps of the valgrind'd process: callgrind.out.PID.N, totals since the previous dump.
    const totalOf = (n: number): number => {
      const dump = readdirSync(dir).find((f) =>
        new RegExp(`^callgrind\\.out\\.\\d+\\.${n}$`).test(f),
      )
      if (!dump) throw new Error(`${label}: no callgrind dump ${n} in ${dir}`)
      const totals = /^totals:\s+(\d+)/m.exec(readFileSync(join(dir, dump), 'utf8'))
      if (!totals) throw new Error(`${label}: no totals in ${dump}`)
      return Number(totals[1])
    }
    if (values.keep !== undefined) {
      mkdirSync(values.keep, { recursive: true })
      for (const [n, what] of [
        [1, 'calls'],
        [2, 'idle'],
      ] as const) {
        const dump = readdirSync(dir).find((f) => f.endsWith(`.${n}`))
        if (dump) copyFileSync(join(dir, dump), join(values.keep, `${label}.${what}`))
      }
    }
    const perCall = totalOf(1) / calls
    const idlePerSecond = (totalOf(2) * 1000) / idleMs
    const netPerCall = (totalOf(1) - (idlePerSecond * busyMs) / 1000) / calls
    console.log(
      `${label}${values['no-audit'] ? ' (audit off)' : ''} c=${CONCURRENCY}: ${(perCall / 1e6).toFixed(3)} M instructions per call; ` +
        `idle ${(idlePerSecond / 1e6).toFixed(2)} M/s over ${(busyMs / 1000).toFixed(1)} s of calls; ` +
        `net of idle ${(netPerCall / 1e6).toFixed(3)} M per call`,
    )
    return perCall
  } finally {
    await http.close()
    await stopGroup(child)
    rmSync(dir, { recursive: true, force: true })
  }
}

if (values.only === undefined || values.only === 'embedded') await count('embedded', QUOTA)
if (values.only !== 'embedded') {
  const backends = await benchBackends({ journal: values['audit-journal'] })
  const journal = values['audit-journal'] ? ' (journalled)' : ''
  try {
    if (values.only === 'pg')
      await count(
        `pg${journal}`,
        backends.journalled({ ...QUOTA, store: backends.config.store }, 'pg'),
      )
    else
      await count(
        `pg+redis${journal}`,
        backends.journalled({ ...QUOTA, ...backends.config }, 'pg+redis'),
      )
  } finally {
    backends.cleanup()
  }
}
