/**
 * `node bench/fleet.ts`: one Barbican (the embedded default), one replica joined to a fleet on
 * Redis, and three replicas behind HAProxy (round-robin, no stickiness), each in front of the
 * stdio echo fixture, under the same legacy Streamable HTTP load (bench/load.ts). Per
 * configuration, alternating over rounds: calls per second, and the replicas' CPU per call (all
 * replicas summed; HAProxy's own CPU apart). Medians over the rounds.
 *
 * Options: --rounds N (3), --duration MS (3000), --concurrency N (16), --backends (2026-07-28
 * stateless calls under a quota instead of legacy sessions; the replicas on PostgreSQL and
 * Redis, fresh schema and prefix: bench/backends.ts; the single process embedded with the same
 * quota. Three replicas then also append to one audit chain), --audit-journal (with --backends:
 * each replica journals its audit records in a directory of its own, ADR 090).
 *
 * --pin (with or without --backends): per-replica throughput with a core of its own. Only the
 * one process and the one replica run; while each is measured its gateway (every thread) is
 * pinned to CPU 0, and its stdio upstream, the load generator, this process, the PostgreSQL
 * backends serving it (found by application_name) and Redis to CPU 1, each given back its
 * previous affinity afterwards. Reported besides: how busy each CPU and the gateway were, so
 * that a run where CPU 1 saturated (the ratio then measures CPU 1, not a replica) says so.
 *
 * On a 2-core machine three replicas cannot show scale-out: they share the two cores with
 * HAProxy and the load generator. What they show is the cost of being a fleet: the relay of
 * the 2 requests in 3 that land off their session's owner, and Redis on the side.
 */
import { fork, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { AUDIT_JOURNAL_OPTION, benchBackends, POSTGRES } from './backends.ts'
import type { LoadMessage, LoadResult, LoadSpec } from './load.ts'
import { busyBetween, childrenOf, cpuTimes, pidsNamed, pin } from './pinning.ts'
import { cpuMicros, freePort, NODE, ROOT, type Running, startBarbican } from './processes.ts'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '16' },
    backends: { type: 'boolean', default: false },
    ...AUDIT_JOURNAL_OPTION,
    pin: { type: 'boolean', default: false },
  },
})
const PIN = values.pin
const BACKENDS = values.backends
  ? await benchBackends({ journal: values['audit-journal'] })
  : undefined
if (BACKENDS) process.once('exit', () => BACKENDS.cleanup())
/** With --backends: every call takes this quota (never refused). */
const QUOTA = {
  rateLimits: { bench: { per: ['subject'], limit: 1_000_000_000, windowMs: 60_000 } },
}
const ROUNDS = Number(values.rounds)
const DURATION_MS = Number(values.duration)
const CONCURRENCY = Number(values.concurrency)
const REDIS = process.env.BARBICAN_REDIS_URL ?? 'redis://127.0.0.1:6379'
const HAPROXY = ['/usr/sbin/haproxy', '/usr/bin/haproxy'].find((p) => existsSync(p))
/** How the pinned mode finds the PostgreSQL backends that serve the bench's replicas. */
const APPLICATION = `barbican-bench-${randomBytes(4).toString('hex')}`

interface Deployment {
  readonly name: string
  readonly url: string
  /** The gateway processes whose CPU counts. */
  readonly pids: readonly number[]
  readonly balancerPid?: number
  stop(): Promise<void>
}

/**
 * A Barbican in front of the stdio fixture; with a `prefix`, joined to the fleet on Redis under
 * it (the config's `redis`: BARBICAN_REDIS_URL alone would use the default prefix).
 */
async function replica(name: string, prefix: string | undefined): Promise<Running> {
  const fleet = prefix === undefined ? {} : { redis: { url: REDIS, prefix } }
  if (!BACKENDS)
    return await startBarbican(name, { stdio: true }, [], ROOT, false, { config: fleet })
  // The PostgreSQL store (audit, pins) joins the fleet's replicas; the lone process stays embedded.
  const url = new URL((BACKENDS.config.store as { postgres: { url: string } }).postgres.url)
  url.searchParams.set('application_name', APPLICATION)
  const store = prefix === undefined ? {} : { store: { postgres: { url: url.toString() } } }
  // With --audit-journal each replica journals in a directory of its own (ADR 090).
  return await startBarbican(name, { stdio: true }, [], ROOT, false, {
    config: BACKENDS.journalled({ ...QUOTA, ...store, ...fleet }, name),
    stateless2026: true,
  })
}

async function single(): Promise<Deployment> {
  const r = await replica('single', undefined)
  return { name: 'one process (embedded)', url: r.target.url, pids: [r.pid], stop: r.stop }
}

async function joined(): Promise<Deployment> {
  const r = await replica('replica', `bench-${randomBytes(4).toString('hex')}:`)
  const name = BACKENDS ? 'one replica on PostgreSQL + Redis' : 'one replica on Redis'
  return { name, url: r.target.url, pids: [r.pid], stop: r.stop }
}

async function fleet(): Promise<Deployment> {
  if (!HAPROXY) throw new Error('HAProxy is needed for the three-replica configuration')
  const prefix = `bench-${randomBytes(4).toString('hex')}:`
  const replicas: Running[] = []
  for (const n of [1, 2, 3]) replicas.push(await replica(`replica-${n}`, prefix))
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-fleet-'))
  const config = join(dir, 'haproxy.cfg')
  writeFileSync(
    config,
    [
      'global',
      '  maxconn 4000',
      'defaults',
      '  mode http',
      '  timeout connect 2s',
      '  timeout client 60s',
      '  timeout server 60s',
      'frontend mcp',
      `  bind 127.0.0.1:${port}`,
      '  default_backend replicas',
      'backend replicas',
      '  balance roundrobin',
      ...replicas.map((r, i) => `  server r${i} ${new URL(r.target.url).host}`),
      '',
    ].join('\n'),
  )
  const balancer = spawn(HAPROXY, ['-f', config, '-db'], { stdio: 'ignore' })
  await new Promise((resolve) => setTimeout(resolve, 300))
  return {
    name: 'three replicas + HAProxy',
    url: `http://127.0.0.1:${port}/mcp`,
    pids: replicas.map((r) => r.pid),
    ...(balancer.pid === undefined ? {} : { balancerPid: balancer.pid }),
    async stop() {
      balancer.kill('SIGKILL')
      await Promise.all(replicas.map((r) => r.stop()))
    },
  }
}

interface Sample {
  readonly rps: number
  readonly cpuUsPerCall: number
  readonly balancerUsPerCall: number
  readonly errors: number
  /** --pin: busy fraction of each CPU, of the gateway(s) alone, and the servers' CPU per call. */
  readonly cpuBusy?: readonly number[]
  readonly gatewayBusy?: number
  readonly serversUsPerCall?: number
}

/** The PostgreSQL backends serving the bench's replicas (by application_name). */
function postgresBackends(): number[] {
  const r = spawnSync(
    'psql',
    [
      POSTGRES,
      '-Atc',
      `SELECT pid FROM pg_stat_activity WHERE application_name = '${APPLICATION}'`,
    ],
    { encoding: 'utf8' },
  )
  return r.stdout
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map(Number)
}

/**
 * --pin: the deployment's gateways to CPU 0; their children, the load generator, this process,
 * and the servers to CPU 1. Returns the servers' PIDs and a function that restores every mask.
 */
function pinFor(d: Deployment, load: number): { servers: number[]; restore: () => void } {
  const backends = postgresBackends()
  const redis = pidsNamed('redis-server')
  const servers = [...backends, ...redis]
  process.stderr.write(
    `${d.name}: pinned ${d.pids.length} gateway(s) to CPU 0; ${backends.length} PostgreSQL backend(s), ${redis.length} Redis server(s), the load and the upstream to CPU 1\n`,
  )
  const restores = [
    pin(d.pids, 0),
    pin([...d.pids.flatMap(childrenOf), load, process.pid, ...servers], 1),
  ]
  return {
    servers,
    restore: () => {
      for (const restore of restores.reverse()) restore()
    },
  }
}

/** CPU µs so far of the processes (0 for one that is gone). */
const cpuOf = (pids: readonly number[]) =>
  pids.reduce((sum, pid) => {
    try {
      return sum + cpuMicros(pid).total
    } catch {
      return sum
    }
  }, 0)

async function measure(d: Deployment): Promise<Sample> {
  const child = fork(join(ROOT, 'bench/load.ts'), [], {
    execPath: NODE,
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  })
  const spec: LoadSpec = {
    target: BACKENDS
      ? { url: d.url, stateful: false, stateless2026: true }
      : { url: d.url, stateful: true },
    concurrency: CONCURRENCY,
    warmupMs: 1000,
    durationMs: DURATION_MS,
  }
  let cpu0 = 0
  let lb0 = 0
  const pinned = PIN ? pinFor(d, child.pid!) : undefined
  let servers0 = 0
  let times0 = cpuTimes()
  let t0 = 0
  try {
    const result = await new Promise<LoadResult>((resolve, reject) => {
      child.on('message', (message: LoadMessage) => {
        if (message.type === 'measuring') {
          cpu0 = cpuOf(d.pids)
          lb0 = d.balancerPid ? cpuMicros(d.balancerPid).total : 0
          servers0 = pinned ? cpuOf(pinned.servers) : 0
          times0 = cpuTimes()
          t0 = performance.now()
        } else if (message.type === 'done') resolve(message.result)
        else reject(new Error(message.error))
      })
      child.once('exit', (code) => reject(new Error(`load generator exited (${code})`)))
      child.send(spec)
    })
    const cpu = cpuOf(d.pids) - cpu0
    const lb = d.balancerPid ? cpuMicros(d.balancerPid).total - lb0 : 0
    const elapsedUs = (performance.now() - t0) * 1000
    return {
      rps: (result.requests * 1000) / result.elapsedMs,
      cpuUsPerCall: cpu / result.requests,
      balancerUsPerCall: lb / result.requests,
      errors: result.errors,
      ...(pinned
        ? {
            cpuBusy: busyBetween(times0, cpuTimes()),
            gatewayBusy: cpu / elapsedUs,
            serversUsPerCall: (cpuOf(pinned.servers) - servers0) / result.requests,
          }
        : {}),
    }
  } finally {
    pinned?.restore()
    child.kill()
  }
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? Number.NaN
}

const deployments = PIN
  ? [await single(), await joined()]
  : [await single(), await joined(), await fleet()]
const samples = new Map<string, Sample[]>(deployments.map((d) => [d.name, []]))
try {
  for (let round = 0; round < ROUNDS; round++) {
    // Rotated per round, so drift on a shared machine spreads over every configuration.
    const order = deployments.map((_, i) => deployments[(i + round) % deployments.length]!)
    for (const d of order) samples.get(d.name)!.push(await measure(d))
  }
} finally {
  await Promise.all(deployments.map((d) => d.stop()))
}
const base = median(samples.get(deployments[0]!.name)!.map((s) => s.rps))
console.log(
  `\n${BACKENDS ? '2026-07-28 tools/call under a quota' : 'legacy tools/call'}, c=${CONCURRENCY}, ${ROUNDS} rounds of ${DURATION_MS} ms (medians)${PIN ? '; gateway pinned to CPU 0, everything else of the bench to CPU 1' : ''}\n`,
)
if (PIN) {
  const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(0)} %`)
  console.log(
    '| configuration | calls/s | × one process | gateway CPU µs/call | gateway busy | CPU 0 busy (all) | CPU 1 busy | PostgreSQL + Redis CPU µs/call | errors |',
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  const notes: string[] = []
  for (const d of deployments) {
    const s = samples.get(d.name)!
    const rps = median(s.map((x) => x.rps))
    const cpu1 = median(s.map((x) => x.cpuBusy?.[1] ?? Number.NaN))
    const gw = median(s.map((x) => x.gatewayBusy ?? Number.NaN))
    const cpu0 = median(s.map((x) => x.cpuBusy?.[0] ?? Number.NaN))
    console.log(
      `| ${d.name} | ${rps.toFixed(0)} | ${(rps / base).toFixed(2)} | ${median(s.map((x) => x.cpuUsPerCall)).toFixed(1)} | ${pct(gw)} | ${pct(cpu0)} | ${pct(cpu1)} | ${median(s.map((x) => x.serversUsPerCall ?? Number.NaN)).toFixed(1)} | ${s.reduce((n, x) => n + x.errors, 0)} |`,
    )
    if (cpu1 >= 0.9)
      notes.push(
        `${d.name}: CPU 1 was saturated (${pct(cpu1)}): its throughput is bounded by CPU 1 (load, upstream, servers), so the ratio is not per-replica throughput.`,
      )
    else if (gw < 0.9)
      notes.push(
        `${d.name}: the gateway used ${pct(gw)} of CPU 0 (${pct(Math.max(0, cpu0 - gw))} went to other processes and interrupts) without CPU 1 saturating: it also waited on its upstream and round trips, so calls/s is not its capacity: for a CPU-bound replica, compare the gateway CPU per call.`,
      )
    else notes.push(`${d.name}: the gateway was the bottleneck (${pct(gw)} of CPU 0).`)
  }
  console.log(`\n${notes.join('\n')}`)
} else {
  console.log(
    '| configuration | calls/s | × one process | gateway CPU µs/call | HAProxy µs/call | errors |',
  )
  console.log('| --- | --- | --- | --- | --- | --- |')
  for (const d of deployments) {
    const s = samples.get(d.name)!
    const rps = median(s.map((x) => x.rps))
    console.log(
      `| ${d.name} | ${rps.toFixed(0)} | ${(rps / base).toFixed(2)} | ${median(s.map((x) => x.cpuUsPerCall)).toFixed(1)} | ${median(s.map((x) => x.balancerUsPerCall)).toFixed(1)} | ${s.reduce((n, x) => n + x.errors, 0)} |`,
    )
  }
}
