/**
 * `npm run bench`: Barbican against the direct SDK server and the npm peers, on loopback.
 *
 * Every configuration runs as its own process; each round visits every concurrency and, within
 * it, every configuration (in an order rotated per round, so drift on a shared machine spreads
 * evenly). Ratios compare a configuration with the direct stateful server measured in the same
 * round; the report gives medians over the rounds. Results go to bench/results/latest.{md,json}.
 *
 * Options: --quick (about a minute: c=1 and 16, 0.5 s rounds, smaller micro-benchmarks), --rounds N, --duration MS, --only a,b (configurations),
 * --no-micro (skip sessions, tools/list and cold start), --profile (Barbican writes a
 * --cpu-prof profile to bench/results/profiles when it stops), --compare DIR (also run the
 * Barbican checkout in DIR, as `barbican-…@base`, in the same rounds: before/after a change;
 * `--compare . --compare-node-options=--max-semi-space-size=32` compares Node flags instead),
 * --auth (also Barbican → stdio with inbound API-key auth and a permission rule on), --backends
 * (also 2026-07-28 calls through Barbican → stdio, embedded and on PostgreSQL + Redis),
 * --audit-journal (with --backends: the PostgreSQL configuration journals its audit records in
 * a directory of its own, ADR 090, instead of committing before every reply), --docs
 * (also copy the report into docs/performance.md, between its `bench:latest` markers),
 * --no-build (run Barbican from its TypeScript sources instead of building dist/ first).
 */
import { fork, spawnSync } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { AUDIT_JOURNAL_OPTION, benchBackends } from './backends.ts'
import { governance } from './governance.ts'
import type { LoadMessage, LoadResult, LoadSpec } from './load.ts'
import { coldStart, idleSessions, mergedToolsList } from './micro.ts'
import {
  cpuMicros,
  descendantsCpuMicros,
  NODE,
  ROOT,
  type Running,
  rssBytes,
  startBarbican,
  startBarbicanAsUsers,
  startDirect,
  startFloor,
  startMcpProxy,
  startPassthrough,
  startSupergateway,
} from './processes.ts'
import { differences, type Report, renderMarkdown, type Sample, summarise } from './report.ts'
import { sandboxCost } from './sandbox.ts'

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    duration: { type: 'string' },
    only: { type: 'string' },
    concurrency: { type: 'string' },
    micro: { type: 'boolean', default: true },
    'no-micro': { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    compare: { type: 'string' },
    'compare-node-options': { type: 'string' },
    auth: { type: 'boolean', default: false },
    backends: { type: 'boolean', default: false },
    ...AUDIT_JOURNAL_OPTION,
    docs: { type: 'boolean', default: false },
    build: { type: 'boolean', default: true },
    'no-build': { type: 'boolean', default: false },
    out: { type: 'string', default: join(ROOT, 'bench/results') },
  },
})
const quick = values.quick
const rounds = Number(values.rounds ?? 3)
const durationMs = Number(values.duration ?? (quick ? 500 : 3_000))
const warmupMs = quick ? 200 : 700
const concurrencies = (values.concurrency ?? (quick ? '1,16' : '1,16,64')).split(',').map(Number)
const micro = values.micro && !values['no-micro']
const profileDir = join(values.out, 'profiles')
const barbicanNodeOptions = values.profile ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : []

/** A configuration under test: how to start it; `pid` is the process whose cost is measured. */
interface Configuration {
  readonly name: string
  readonly description: string
  start(): Promise<Running>
}

/** Barbican in front of a fresh SDK server over Streamable HTTP, from the checkout at `root`. */
function barbicanHttp(
  name: string,
  root?: string,
  nodeOptions: readonly string[] = barbicanNodeOptions,
  start: typeof startBarbicanAsUsers = startBarbican,
): () => Promise<Running> {
  return async () => {
    const upstream = await startDirect(true)
    const gateway = await start(name, { url: upstream.target.url }, nodeOptions, root)
    return {
      ...gateway,
      upstreamPid: upstream.pid,
      async stop() {
        await gateway.stop()
        await upstream.stop()
      },
    }
  }
}

const CONFIGURATIONS: Configuration[] = [
  {
    name: 'direct-stateful',
    description: 'SDK v1 server, Streamable HTTP with sessions (the baseline)',
    start: () => startDirect(true),
  },
  {
    name: 'direct-stateless',
    description: 'SDK v1 server, Streamable HTTP stateless (a server and transport per request)',
    start: () => startDirect(false),
  },
  {
    name: 'barbican-http-default',
    description:
      'Barbican as users run it: `barbican serve` with a plain Claude Desktop file naming the SDK server by URL (call lines at info, audit and metrics on)',
    start: barbicanHttp('barbican-http-default', ROOT, barbicanNodeOptions, startBarbicanAsUsers),
  },
  {
    name: 'barbican-stdio-default',
    description:
      'Barbican as users run it: a plain Claude Desktop file naming the SDK server as a command (call lines at info, audit and metrics on, the server confined by the sandbox)',
    start: () =>
      startBarbicanAsUsers('barbican-stdio-default', { stdio: true }, barbicanNodeOptions),
  },
  {
    name: 'barbican-http',
    description:
      'stripped reference: Barbican → the SDK server over Streamable HTTP, log level warn, audit and metrics off',
    start: barbicanHttp('barbican-http'),
  },
  {
    name: 'barbican-stdio',
    description:
      'stripped reference: Barbican → the SDK server over stdio, log level warn, audit and metrics off, `sandbox: none`',
    start: () => startBarbican('barbican-stdio', { stdio: true }, barbicanNodeOptions),
  },
  {
    name: 'node-http-floor',
    description:
      'plain node:http answering the call itself, no SDK (reference: the least one HTTP hop costs in Node)',
    start: startFloor,
  },
  {
    name: 'passthrough-proxy',
    description:
      'a 40-line undici pass-through proxy → the SDK server over HTTP (reference: a relay doing no work)',
    start: async () => {
      const upstream = await startDirect(true)
      const proxy = await startPassthrough(upstream.target.url)
      return {
        ...proxy,
        upstreamPid: upstream.pid,
        async stop() {
          await proxy.stop()
          await upstream.stop()
        },
      }
    },
  },
  {
    name: 'mcp-proxy',
    description: 'mcp-proxy 6.7.19 → the SDK server over stdio',
    start: startMcpProxy,
  },
  {
    name: 'supergateway',
    description: 'supergateway 4.0.0 --stateful → the SDK server over stdio (a child per session)',
    start: startSupergateway,
  },
]

if (values.auth) {
  CONFIGURATIONS.splice(4, 0, {
    name: 'barbican-stdio+auth',
    description: 'barbican-stdio with inbound API-key auth and a permission rule',
    start: () =>
      startBarbican('barbican-stdio+auth', { stdio: true }, barbicanNodeOptions, ROOT, true),
  })
}

/** The one quota of the `--backends` configurations: every call takes it, none is refused. */
const BENCH_QUOTA = {
  rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } },
}

if (values.backends) {
  // The same gateway and quota, embedded (SQLite, memory counters) and with the fleet backends
  // (PostgreSQL in a fresh schema, Redis under a fresh prefix), both answering 2026-07-28 calls.
  const quota = BENCH_QUOTA
  const backends = await benchBackends({ journal: values['audit-journal'] })
  CONFIGURATIONS.splice(
    4,
    0,
    {
      name: 'barbican-stdio-2026',
      description: 'Barbican → stdio, 2026-07-28 stateless calls, a quota, embedded state',
      start: () =>
        startBarbican('barbican-stdio-2026', { stdio: true }, barbicanNodeOptions, ROOT, false, {
          config: quota,
          stateless2026: true,
        }),
    },
    {
      name: 'barbican-stdio-2026+pg+redis',
      description:
        'barbican-stdio-2026 with store.postgres and redis (audit, pins in PostgreSQL; quota in ' +
        `Redis)${values['audit-journal'] ? '; audit journalled (audit.journalDir)' : ''}`,
      start: () =>
        startBarbican(
          'barbican-stdio-2026+pg+redis',
          { stdio: true },
          barbicanNodeOptions,
          ROOT,
          false,
          {
            config: backends.journalled({ ...quota, ...backends.config }, 'pg+redis'),
            stateless2026: true,
          },
        ),
    },
  )
  process.once('exit', () => backends.cleanup())
}

if (values.compare !== undefined) {
  const root = values.compare
  const baseNodeOptions = [
    ...barbicanNodeOptions,
    ...(values['compare-node-options']?.split(' ').filter((o) => o !== '') ?? []),
  ]
  CONFIGURATIONS.push(
    {
      name: 'barbican-http@base',
      description: `barbican-http, from the checkout in ${root}`,
      start: barbicanHttp('barbican-http@base', root, baseNodeOptions),
    },
    {
      name: 'barbican-stdio@base',
      description: `barbican-stdio, from the checkout in ${root}`,
      start: () => startBarbican('barbican-stdio@base', { stdio: true }, baseNodeOptions, root),
    },
  )
  if (values.backends) {
    // Its own schema and prefix: the two never share an audit chain or a counter.
    const backends = await benchBackends({ journal: values['audit-journal'] })
    CONFIGURATIONS.push({
      name: 'barbican-stdio-2026+pg+redis@base',
      description: `barbican-stdio-2026+pg+redis, from the checkout in ${root}`,
      start: () =>
        startBarbican(
          'barbican-stdio-2026+pg+redis@base',
          { stdio: true },
          baseNodeOptions,
          root,
          false,
          {
            config: backends.journalled({ ...BENCH_QUOTA, ...backends.config }, 'base'),
            stateless2026: true,
          },
        ),
    })
    process.once('exit', () => backends.cleanup())
  }
  if (values.auth) {
    CONFIGURATIONS.push({
      name: 'barbican-stdio+auth@base',
      description: `barbican-stdio+auth, from the checkout in ${root}`,
      start: () =>
        startBarbican('barbican-stdio+auth@base', { stdio: true }, baseNodeOptions, root, true),
    })
  }
}

/** Runs the load generator against `running` once and measures the process meanwhile. */
async function measure(running: Running, concurrency: number): Promise<Sample> {
  const child = fork(join(ROOT, 'bench/load.ts'), [], {
    execPath: NODE,
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  })
  const spec: LoadSpec = { target: running.target, concurrency, warmupMs, durationMs }
  let cpuStart = { user: 0, system: 0, total: 0 }
  // The rest of the machine's CPU per call: the upstream (its own process → HTTP, the gateway's
  // descendants → stdio) and the load generator, so a throughput ratio can be read as CPU.
  const upstreamCpu = () =>
    running.upstreamPid !== undefined
      ? cpuMicros(running.upstreamPid).total
      : descendantsCpuMicros(running.pid)
  let upstreamStart = 0
  let loadStart = 0
  let upstreamUs = Number.NaN
  let loadUs = Number.NaN
  let peakRss = 0
  const sampler = setInterval(() => {
    peakRss = Math.max(peakRss, rssBytes(running.pid))
  }, 250)
  try {
    const result = await new Promise<LoadResult>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`${running.name} c=${concurrency}: load generator timed out`)),
        warmupMs + durationMs + 120_000,
      )
      child.on('message', (message: LoadMessage) => {
        if (message.type === 'measuring') {
          cpuStart = cpuMicros(running.pid)
          upstreamStart = upstreamCpu()
          loadStart = cpuMicros(child.pid!).total
        } else {
          if (message.type === 'done') {
            upstreamUs = upstreamCpu() - upstreamStart
            loadUs = cpuMicros(child.pid!).total - loadStart
          }
          clearTimeout(timer)
          if (message.type === 'done') resolve(message.result)
          else reject(new Error(`${running.name} c=${concurrency}: ${message.error}`))
        }
      })
      child.once('exit', (code) => {
        clearTimeout(timer)
        reject(new Error(`load generator exited (${code})`))
      })
      child.send(spec)
    })
    const cpuEnd = cpuMicros(running.pid)
    const cpu = cpuEnd.total - cpuStart.total
    const kernel = cpuEnd.system - cpuStart.system
    peakRss = Math.max(peakRss, rssBytes(running.pid))
    if (result.errors > 0) {
      process.stderr.write(
        `  ${running.name} c=${concurrency}: ${result.errors} failed replies (${result.firstError})\n`,
      )
    }
    return {
      rps: (result.requests * 1000) / result.elapsedMs,
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      cpuUsPerCall: result.requests > 0 ? cpu / result.requests : Number.NaN,
      kernelUsPerCall: result.requests > 0 ? kernel / result.requests : Number.NaN,
      upstreamCpuUsPerCall: result.requests > 0 ? upstreamUs / result.requests : Number.NaN,
      loadCpuUsPerCall: result.requests > 0 ? loadUs / result.requests : Number.NaN,
      rssLoadMb: peakRss / 2 ** 20,
      requests: result.requests,
      errors: result.errors,
    }
  } finally {
    clearInterval(sampler)
    child.kill()
  }
}

/** Replaces the text between the `bench:latest` markers of docs/performance.md. */
function updateDocs(markdown: string): void {
  const path = join(ROOT, 'docs/performance.md')
  const doc = readFileSync(path, 'utf8')
  const start = '<!-- bench:latest:start -->'
  const end = '<!-- bench:latest:end -->'
  const from = doc.indexOf(start)
  const to = doc.indexOf(end)
  if (from < 0 || to < from) throw new Error(`${path} has no bench:latest markers`)
  // The report's own title becomes a subsection of the page.
  const body = markdown.replace(/^# (.*)\n/, '**$1**\n').replace(/^## /gm, '#### ')
  writeFileSync(path, `${doc.slice(0, from + start.length)}\n${body}\n${doc.slice(to)}`)
}

/**
 * Builds dist/ in each checkout under test, as `npm install` does for users, so that Barbican
 * runs what an install runs (bin/barbican.js falls back to the sources if one changes meanwhile).
 */
function buildCheckouts(): void {
  if (!values.build || values['no-build']) return
  for (const root of new Set([ROOT, values.compare ?? ROOT])) {
    const script = join(root, 'scripts/build.js')
    if (!existsSync(script)) continue
    process.stderr.write(`building ${root}/dist\n`)
    const result = spawnSync(NODE, [script, '--strict'], { cwd: root, stdio: 'inherit' })
    if (result.status !== 0) process.stderr.write('build failed: Barbican runs from its sources\n')
  }
}

async function main(): Promise<void> {
  buildCheckouts()
  const only = values.only?.split(',')
  const chosen = CONFIGURATIONS.filter((c) => !only || only.includes(c.name))
  mkdirSync(values.out, { recursive: true })
  const startedAt = new Date()
  const running: Running[] = []
  const idleRssMb: Record<string, number> = {}
  try {
    for (const config of chosen) {
      process.stderr.write(`starting ${config.name}\n`)
      running.push(await config.start())
    }
    await new Promise((resolve) => setTimeout(resolve, 1_000))
    for (const r of running) idleRssMb[r.name] = rssBytes(r.pid) / 2 ** 20

    const samples: Record<string, Record<number, Sample[]>> = {}
    for (let round = 0; round < rounds; round++) {
      for (const c of concurrencies) {
        const order = running.map((_, i) => running[(i + round) % running.length]!)
        for (const r of order) {
          const sample = await measure(r, c)
          const byConfig = samples[r.name] ?? {}
          samples[r.name] = byConfig
          byConfig[c] = [...(byConfig[c] ?? []), sample]
          process.stderr.write(
            `round ${round + 1}/${rounds} c=${c} ${r.name}: ${sample.rps.toFixed(0)} req/s, p50 ${sample.p50Ms.toFixed(2)} ms, ${sample.cpuUsPerCall.toFixed(0)} µs CPU/call\n`,
          )
        }
      }
    }
    for (const r of running.splice(0)) await r.stop()

    const report: Report = {
      startedAt: startedAt.toISOString(),
      node: process.version,
      cpus: (await import('node:os')).cpus().length,
      options: { rounds, durationMs, warmupMs, concurrencies, quick },
      configurations: chosen.map((c) => ({ name: c.name, description: c.description })),
      idleRssMb,
      throughput: summarise(samples, 'direct-stateful'),
    }
    if (values.backends) {
      report.backends = differences(samples, 'barbican-stdio-2026+pg+redis', 'barbican-stdio-2026')
    }
    if (micro) {
      process.stderr.write('micro: merged tools/list 50 × 100\n')
      report.toolsList = await mergedToolsList(50, 100, quick ? 200 : 1_000)
      process.stderr.write('micro: idle sessions\n')
      report.sessions = await idleSessions(quick ? 2_000 : 10_000)
      process.stderr.write('micro: cold start\n')
      report.coldStart = await coldStart(quick ? 1 : 3)
      if (process.platform === 'linux') {
        process.stderr.write('micro: sandbox start and call cost\n')
        report.sandbox = await sandboxCost(quick ? 3 : 9, quick ? 100 : 300)
      }
      process.stderr.write('micro: governance and accounting\n')
      report.governance = await governance({
        calls: quick ? 5_000 : 20_000,
        concurrencies: quick ? [16] : [1, 16],
        rounds: quick ? 1 : 3,
        progress: (line) => process.stderr.write(line),
      })
    }
    writeFileSync(join(values.out, 'latest.json'), `${JSON.stringify(report, null, 2)}\n`)
    writeFileSync(join(values.out, 'latest.md'), renderMarkdown(report))
    if (values.docs) updateDocs(renderMarkdown(report))
    process.stdout.write(renderMarkdown(report))
  } finally {
    for (const r of running) await r.stop()
  }
}

await main()
