/**
 * `node bench/backend-round-trips.ts [--calls N] [--audit-journal]`: what a 2026-07-28 `tools/call` costs the
 * fleet backends, counted rather than timed. A gateway on PostgreSQL and Redis (fresh schema
 * and prefix, bench/backends.ts) runs with bench/fixtures/count-round-trips.ts preloaded, which
 * counts its PostgreSQL queries; Redis commands are counted with MONITOR (those naming the run's
 * prefix, not the ones a script runs inside Redis). Warm-up, then N calls at c=1 and at c=16, with a quota and without one; prints the
 * queries and commands per call, by statement (bench/NOTEBOOK.md, PostgreSQL and Redis).
 * `--audit-journal`: the gateway journals its audit records (ADR 090) and commits them per
 * window; after the calls the count waits until the last of their records is committed
 * (bench/audit-drain.ts), so the commits are in it.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { Pool } from 'undici'
import { openRedis } from '../src/store/redis.ts'
import { type AuditWatch, watchAudit } from './audit-drain.ts'
import { AUDIT_JOURNAL_OPTION, benchBackends } from './backends.ts'
import { echoCalls } from './mcp-http.ts'
import { ROOT, type Running, startBarbican } from './processes.ts'

const { values } = parseArgs({
  options: { calls: { type: 'string', default: '2000' }, ...AUDIT_JOURNAL_OPTION },
})
const calls = Number(values.calls)
const REDIS = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379'
const dir = mkdtempSync(join(tmpdir(), 'barbican-round-trips-'))
const countsFile = join(dir, 'counts.json')
process.env.BENCH_ROUND_TRIPS_FILE = countsFile

type Counts = Record<string, number>

async function pgCounts(gateway: Running): Promise<Counts> {
  rmSync(countsFile, { force: true })
  process.kill(gateway.pid, 'SIGUSR2')
  for (let i = 0; i < 200; i++) {
    try {
      return JSON.parse(readFileSync(countsFile, 'utf8')) as Counts
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  throw new Error('the gateway wrote no counts')
}

function perCall(before: Counts, after: Counts, n: number): string[] {
  return Object.keys(after)
    .map((k) => [k, (after[k]! - (before[k] ?? 0)) / n] as const)
    .filter(([, v]) => v > 0)
    .sort((a, b) => b[1] - a[1])
    .map(([k, v]) => `    ${v.toFixed(3)}  ${k}`)
}

const sum = (c: Counts) => Object.values(c).reduce((a, b) => a + b, 0)

async function run(label: string, config: Record<string, unknown>, prefix: string) {
  // Journalled, a window's records are committed after its replies: wait for them.
  const audit: AuditWatch | undefined = values['audit-journal']
    ? await watchAudit(config, dir)
    : undefined
  const gateway = await startBarbican(
    label,
    { stdio: true },
    ['--import', join(ROOT, 'bench/fixtures/count-round-trips.ts')],
    ROOT,
    false,
    { config, stateless2026: true },
  )
  const monitor = await openRedis(REDIS)
  const redisCounts: Counts = {}
  await monitor.monitor((line: string) => {
    // Commands a script runs inside Redis show as `[0 lua]`: no round trip of their own.
    if (!line.includes(prefix) || line.includes(' lua] ')) return
    const name = /"([a-zA-Z]+)"/.exec(line)?.[1]?.toUpperCase() ?? '?'
    redisCounts[name] = (redisCounts[name] ?? 0) + 1
  })
  const http = new Pool(new URL(gateway.target.url).origin, { connections: 16 })
  try {
    for (const c of [1, 16]) {
      const go = (n: number) => echoCalls(http, gateway.target, n, c)
      await go(200)
      await new Promise((resolve) => setTimeout(resolve, 300))
      await audit?.settle()
      const warm = await audit?.committed()
      const pg0 = await pgCounts(gateway)
      const redis0 = { ...redisCounts }
      const t0 = performance.now()
      await go(calls)
      const ms = performance.now() - t0
      const drained =
        warm === undefined ? undefined : await audit!.drain(warm, c * Math.ceil(calls / c))
      // MONITOR lines arrive after the replies: let them in.
      await new Promise((resolve) => setTimeout(resolve, 300))
      const pg1 = await pgCounts(gateway)
      const redis1 = { ...redisCounts }
      const pgPer = (sum(pg1) - sum(pg0)) / calls
      const redisPer = (sum(redis1) - sum(redis0)) / calls
      console.log(
        `${label} c=${c}: ${pgPer.toFixed(3)} PostgreSQL queries, ${redisPer.toFixed(3)} Redis commands per call (${calls} calls in ${ms.toFixed(0)} ms)` +
          (drained === undefined
            ? ''
            : `; their ${drained.records} records committed in ${drained.commits} commits`),
      )
      for (const line of perCall(pg0, pg1, calls)) console.log(`  pg${line}`)
      for (const line of perCall(redis0, redis1, calls)) console.log(`  redis${line}`)
    }
  } finally {
    await http.close()
    await audit?.close()
    monitor.destroy()
    await gateway.stop()
  }
}

const backends = await benchBackends({ journal: values['audit-journal'] })
try {
  const prefix = (backends.config.redis as { prefix: string }).prefix
  const quota = {
    rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } },
  }
  const journal = values['audit-journal'] ? ' (journalled)' : ''
  for (const [label, config] of [
    ['pg+redis+quota', { ...quota, ...backends.config }],
    ['pg+redis', backends.config],
  ] as const) {
    await run(`${label}${journal}`, backends.journalled(config, label), prefix)
  }
} finally {
  backends.cleanup()
  rmSync(dir, { recursive: true, force: true })
}
