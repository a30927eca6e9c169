/**
 * `node bench/kernel-crossings.ts [--calls N] [--traced-calls N] [--rounds N] [--audit-journal]
 * [--no-audit]`: the kernel crossings a 2026-07-28 `tools/call` costs the gateway, embedded
 * against PostgreSQL + Redis (both with a quota on every call, as `npm run bench -- --backends`),
 * at c=1 and c=16; `--no-audit` turns the audit log off in both, leaving the audit store's share
 * out. Per call:
 *
 * - the gateway's CPU, user and system (/proc/PID/stat), and its context switches summed over its
 *   threads (/proc/PID/task/*\/status): voluntary (a thread slept and was woken) and involuntary;
 *   N calls per round, configurations alternating, medians over the rounds;
 * - its syscalls by kind, counted by `strace -f -c -p` attached for another run of calls (strace
 *   slows the gateway many times over: its counts are used, never its times).
 *
 * The stdio upstream, the load (sent from this process) and the servers are not counted. With
 * bench/round-trip-cost.ts (what one syscall, wake-up and round trip costs here) this explains the
 * CPU difference as counted crossings × their measured cost, beside the user-space instructions
 * of bench/backend-instructions.ts (bench/NOTEBOOK.md, "Issue 19's targets, measured").
 */
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { AUDIT_JOURNAL_OPTION, benchBackends } from './backends.ts'
import { echoCalls } from './mcp-http.ts'
import { contextSwitches, cpuMicros, ROOT, type Running, startBarbican } from './processes.ts'
import { countSyscalls, type SyscallCounts, totalCalls } from './strace.ts'

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '2000' },
    'traced-calls': { type: 'string', default: '800' },
    rounds: { type: 'string', default: '3' },
    ...AUDIT_JOURNAL_OPTION,
    'no-audit': { type: 'boolean', default: false },
  },
})
const CALLS = Number(values.calls)
const TRACED = Number(values['traced-calls'])
const ROUNDS = Number(values.rounds)
const QUOTA = {
  rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } },
  ...(values['no-audit'] ? { audit: { enabled: false } } : {}),
}

interface Timed {
  readonly userUs: number
  readonly sysUs: number
  readonly voluntary: number
  readonly involuntary: number
  readonly rps: number
}

async function timedRun(g: Running, http: Pool, c: number): Promise<Timed> {
  const cpu0 = cpuMicros(g.pid)
  const cs0 = contextSwitches(g.pid)
  const t0 = performance.now()
  await echoCalls(http, g.target, CALLS, c)
  const ms = performance.now() - t0
  const cpu1 = cpuMicros(g.pid)
  const cs1 = contextSwitches(g.pid)
  return {
    userUs: (cpu1.user - cpu0.user) / CALLS,
    sysUs: (cpu1.system - cpu0.system) / CALLS,
    voluntary: (cs1.voluntary - cs0.voluntary) / CALLS,
    involuntary: (cs1.involuntary - cs0.involuntary) / CALLS,
    rps: (CALLS * 1000) / ms,
  }
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const mid = s.length / 2
  return s.length % 2 === 1 ? s[Math.floor(mid)]! : (s[mid - 1]! + s[mid]!) / 2
}

const backends = await benchBackends({ journal: values['audit-journal'] })
const gateways: Running[] = []
try {
  gateways.push(
    await startBarbican('embedded', { stdio: true }, [], ROOT, false, {
      config: QUOTA,
      stateless2026: true,
    }),
    await startBarbican('pg+redis', { stdio: true }, [], ROOT, false, {
      config: backends.journalled({ ...QUOTA, ...backends.config }, 'pg+redis'),
      stateless2026: true,
    }),
  )
  const pools = new Map(gateways.map((g) => [g, new Pool(new URL(g.target.url).origin)]))
  for (const [g, http] of pools) await echoCalls(http, g.target, 400, 16)
  const timed = new Map<string, Timed[]>()
  const traced = new Map<string, SyscallCounts>()
  for (const c of [1, 16]) {
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 === 0 ? gateways : [...gateways].reverse()
      for (const g of order) {
        const key = `${g.name} c=${c}`
        timed.set(key, [...(timed.get(key) ?? []), await timedRun(g, pools.get(g)!, c)])
      }
    }
    for (const g of gateways) {
      const http = pools.get(g)!
      traced.set(
        `${g.name} c=${c}`,
        await countSyscalls(g.pid, () => echoCalls(http, g.target, TRACED, c)),
      )
    }
  }
  for (const http of pools.values()) await http.close()

  const f1 = (n: number) => n.toFixed(1)
  const f2 = (n: number) => n.toFixed(2)
  console.log(
    `\n2026-07-28 tools/call, a quota on every call, audit on ${backends.mode}; gateway process only. CPU and switches: medians of ${ROUNDS} alternating rounds of ${CALLS} calls; syscalls: strace -f -c over ${TRACED} more calls\n`,
  )
  console.log(
    '| configuration | c | req/s | user µs | system µs | voluntary switches | involuntary | syscalls | of which |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
  const row = new Map<string, { t: Record<keyof Timed, number>; sys: SyscallCounts }>()
  for (const c of [1, 16]) {
    for (const g of gateways) {
      const key = `${g.name} c=${c}`
      const ts = timed.get(key)!
      const t = {
        userUs: median(ts.map((x) => x.userUs)),
        sysUs: median(ts.map((x) => x.sysUs)),
        voluntary: median(ts.map((x) => x.voluntary)),
        involuntary: median(ts.map((x) => x.involuntary)),
        rps: median(ts.map((x) => x.rps)),
      }
      const sys = traced.get(key)!
      row.set(key, { t, sys })
      const top = Object.entries(sys)
        .filter(([, n]) => n / TRACED >= 0.05)
        .sort((a, b) => b[1] - a[1])
        .map(([name, n]) => `${name} ${f2(n / TRACED)}`)
        .join(', ')
      console.log(
        `| ${g.name} | ${c} | ${t.rps.toFixed(0)} | ${f1(t.userUs)} | ${f1(t.sysUs)} | ${f2(t.voluntary)} | ${f2(t.involuntary)} | ${f2(totalCalls(sys) / TRACED)} | ${top} |`,
      )
    }
  }
  console.log(
    '\n| pg+redis − embedded | c | CPU µs | user µs | system µs | voluntary switches | involuntary | syscalls |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  for (const c of [1, 16]) {
    const a = row.get(`embedded c=${c}`)!
    const b = row.get(`pg+redis c=${c}`)!
    const dUser = b.t.userUs - a.t.userUs
    const dSys = b.t.sysUs - a.t.sysUs
    const dCalls = (totalCalls(b.sys) - totalCalls(a.sys)) / TRACED
    console.log(
      `| | ${c} | ${f1(dUser + dSys)} | ${f1(dUser)} | ${f1(dSys)} | ${f2(b.t.voluntary - a.t.voluntary)} | ${f2(b.t.involuntary - a.t.involuntary)} | ${f2(dCalls)} |`,
    )
  }
} finally {
  for (const g of gateways) await g.stop()
  backends.cleanup()
}
