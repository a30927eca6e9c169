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
 * that a run where CPU 1 saturated (the ratio then measures CPU 1, not a replica) says so, and
 * whether the run is valid (ADR 087: the gateway fills CPU 0, CPU 1 does not saturate, no call
 * failed), on the medians and round by round: a round in which both configurations were valid
 * gives a ratio of its own. CPU 1 is broken down by tenant (load, upstream, servers, and the
 * share other processes took), so a saturated CPU 1 says why.
 *
 * --load wrk (with --backends): wrk (C, bench/wrk.ts) sends the load instead of bench/load.ts,
 * `--concurrency` connections on one thread, after 1 s of warm-up, for `--duration` rounded to
 * whole seconds; every reply is checked to be the echo. A Node load generator costs about as
 * much CPU per call as the gateway, so under --pin CPU 1 saturated first; wrk costs a fraction.
 * --upstream light (with --pin only): every gateway of the run fronts bench/fixtures/light-echo.ts
 * (stdio JSON-RPC without the SDK) instead of the SDK fixture, which is the other heavy tenant of
 * CPU 1. Both configurations then get the same light upstream, and the figures compare with each
 * other, not with runs on the SDK fixture.
 *
 * On a 2-core machine three replicas cannot show scale-out: they share the two cores with
 * HAProxy and the load generator. What they show is the cost of being a fleet: the relay of
 * the 2 requests in 3 that land off their session's owner, and Redis on the side.
 */
import { fork, spawn, spawnSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { loadavg, tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { AUDIT_JOURNAL_OPTION, benchBackends, POSTGRES } from './backends.ts'
import type { LoadMessage, LoadResult, LoadSpec } from './load.ts'
import type { Target } from './mcp-http.ts'
import { busyBetween, cpuTimes, descendantsOf, pidsNamed, pin } from './pinning.ts'
import { cpuMicros, freePort, NODE, ROOT, type Running, startBarbican } from './processes.ts'
import { startWrk, type WrkResult, wrkScript } from './wrk.ts'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    duration: { type: 'string', default: '3000' },
    concurrency: { type: 'string', default: '16' },
    backends: { type: 'boolean', default: false },
    ...AUDIT_JOURNAL_OPTION,
    pin: { type: 'boolean', default: false },
    load: { type: 'string', default: 'node' },
    upstream: { type: 'string', default: 'sdk' },
  },
})
const PIN = values.pin
const LOAD = values.load
const UPSTREAM = values.upstream
if (LOAD !== 'node' && LOAD !== 'wrk') throw new Error('--load is node or wrk')
// wrk sends one static request: only stateless 2026-07-28 calls need nothing more.
if (LOAD === 'wrk' && !values.backends) throw new Error('--load wrk needs --backends (2026 calls)')
if (UPSTREAM !== 'sdk' && UPSTREAM !== 'light') throw new Error('--upstream is sdk or light')
if (UPSTREAM === 'light' && !PIN) throw new Error('--upstream light is for the pinned run only')
/** What every gateway of the run fronts over stdio. */
const STDIO = {
  stdio: true,
  ...(UPSTREAM === 'light' ? { script: join(ROOT, 'bench/fixtures/light-echo.ts') } : {}),
} as const
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
  if (!BACKENDS) return await startBarbican(name, STDIO, [], ROOT, false, { config: fleet })
  // The PostgreSQL store (audit, pins) joins the fleet's replicas; the lone process stays embedded.
  const url = new URL((BACKENDS.config.store as { postgres: { url: string } }).postgres.url)
  url.searchParams.set('application_name', APPLICATION)
  const store = prefix === undefined ? {} : { store: { postgres: { url: url.toString() } } }
  // With --audit-journal each replica journals in a directory of its own (ADR 090).
  return await startBarbican(name, STDIO, [], ROOT, false, {
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
  /** Failed calls (load.ts: errors; wrk: failed replies and socket errors). */
  readonly errors: number
  readonly firstError?: string
  readonly p50Ms: number
  readonly p99Ms: number
  /** CPU µs per call of the load generator and of the stdio upstream(s). */
  readonly loadUsPerCall: number
  readonly upstreamUsPerCall: number
  /** --pin: busy fraction of each CPU, of the gateway(s) alone, and the servers' CPU per call. */
  readonly cpuBusy?: readonly number[]
  readonly gatewayBusy?: number
  readonly serversUsPerCall?: number
  /** --pin: busy fraction of CPU 1 not accounted for by the bench's processes (others' runs). */
  readonly cpu1Others?: number
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
 * --pin: the deployment's gateways to CPU 0; their descendants (the stdio upstream, under
 * bubblewrap), the load generator (wrk is started
 * on CPU 1 instead), this process, and the servers to CPU 1. Returns the servers' PIDs and a
 * function that restores every mask.
 */
function pinFor(
  d: Deployment,
  load: number | undefined,
): { servers: number[]; restore: () => void } {
  const backends = postgresBackends()
  const redis = pidsNamed('redis-server')
  const servers = [...backends, ...redis]
  process.stderr.write(
    `${d.name}: pinned ${d.pids.length} gateway(s) to CPU 0; ${backends.length} PostgreSQL backend(s), ${redis.length} Redis server(s), the load and the upstream to CPU 1\n`,
  )
  const restores = [
    pin(d.pids, 0),
    pin(
      [
        ...d.pids.flatMap(descendantsOf),
        ...(load === undefined ? [] : [load]),
        process.pid,
        ...servers,
      ],
      1,
    ),
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

/** What one measured window of either load generator produced. */
interface Window extends LoadResult {
  /** The load generator's own CPU over the window (µs). */
  readonly loadCpuUs: number
}

/**
 * One load run on `d`: bench/load.ts or wrk, warm-up first. `opened` is called as the measured
 * window opens (after pinning, which `pinFor` does with the load's PID), and the window's counts
 * come back.
 */
async function load(
  d: Deployment,
  pinFor: (load: number | undefined) => void,
  opened: () => void,
): Promise<Window> {
  const target: Target = BACKENDS
    ? { url: d.url, stateful: false, stateless2026: true }
    : { url: d.url, stateful: true }
  if (LOAD === 'wrk') {
    pinFor(undefined)
    const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-wrk-'))
    try {
      const scriptPath = join(dir, 'call.lua')
      writeFileSync(scriptPath, wrkScript(target))
      const cpu = PIN ? 1 : undefined
      const options = {
        connections: CONCURRENCY,
        scriptPath,
        ...(cpu === undefined ? {} : { cpu }),
      }
      await startWrk(target, { ...options, seconds: 1 }).result
      opened()
      const r: WrkResult = await startWrk(target, {
        ...options,
        seconds: Math.max(1, Math.round(DURATION_MS / 1000)),
      }).result
      return {
        requests: r.requests - r.failures,
        errors: r.failures + r.socketErrors,
        ...(r.firstFailure === '' ? {} : { firstError: r.firstFailure }),
        elapsedMs: r.elapsedMs,
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        loadCpuUs: r.cpuUs,
      }
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  const child = fork(join(ROOT, 'bench/load.ts'), [], {
    execPath: NODE,
    execArgv: [],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    env: { ...process.env, NODE_NO_WARNINGS: '1' },
  })
  const spec: LoadSpec = {
    target,
    concurrency: CONCURRENCY,
    warmupMs: 1000,
    durationMs: DURATION_MS,
  }
  try {
    pinFor(child.pid!)
    let loadCpu0 = 0
    return await new Promise<Window>((resolve, reject) => {
      child.on('message', (message: LoadMessage) => {
        if (message.type === 'measuring') {
          loadCpu0 = cpuMicros(child.pid!).total
          opened()
        } else if (message.type === 'done')
          resolve({ ...message.result, loadCpuUs: cpuMicros(child.pid!).total - loadCpu0 })
        else reject(new Error(message.error))
      })
      child.once('exit', (code) => reject(new Error(`load generator exited (${code})`)))
      child.send(spec)
    })
  } finally {
    child.kill()
  }
}

async function measure(d: Deployment): Promise<Sample> {
  let cpu0 = 0
  let lb0 = 0
  let pinned: { servers: number[]; restore: () => void } | undefined
  let servers0 = 0
  let times0 = cpuTimes()
  let t0 = 0
  // The stdio upstreams, descendants of the gateways; and this process (it only waits).
  const upstreams = d.pids.flatMap(descendantsOf)
  let upstreams0 = 0
  let bench0 = process.cpuUsage()
  try {
    const result = await load(
      d,
      (loadPid) => {
        if (PIN) pinned = pinFor(d, loadPid)
      },
      () => {
        cpu0 = cpuOf(d.pids)
        lb0 = d.balancerPid ? cpuMicros(d.balancerPid).total : 0
        servers0 = pinned ? cpuOf(pinned.servers) : 0
        upstreams0 = cpuOf(upstreams)
        bench0 = process.cpuUsage()
        times0 = cpuTimes()
        t0 = performance.now()
      },
    )
    const cpu = cpuOf(d.pids) - cpu0
    const lb = d.balancerPid ? cpuMicros(d.balancerPid).total - lb0 : 0
    const elapsedUs = (performance.now() - t0) * 1000
    const bench = process.cpuUsage(bench0)
    const upstreamUs = cpuOf(upstreams) - upstreams0
    const serversUs = pinned ? cpuOf(pinned.servers) - servers0 : 0
    const cpuBusy = busyBetween(times0, cpuTimes())
    // What of CPU 1 the bench's own processes account for; the rest is other processes'.
    const ours = (result.loadCpuUs + upstreamUs + serversUs + bench.user + bench.system) / elapsedUs
    return {
      rps: (result.requests * 1000) / result.elapsedMs,
      cpuUsPerCall: cpu / result.requests,
      balancerUsPerCall: lb / result.requests,
      errors: result.errors,
      ...(result.firstError === undefined ? {} : { firstError: result.firstError }),
      p50Ms: result.p50Ms,
      p99Ms: result.p99Ms,
      loadUsPerCall: result.loadCpuUs / result.requests,
      upstreamUsPerCall: upstreamUs / result.requests,
      ...(pinned
        ? {
            cpuBusy,
            gatewayBusy: cpu / elapsedUs,
            serversUsPerCall: serversUs / result.requests,
            cpu1Others: Math.max(0, cpuBusy[1]! - ours),
          }
        : {}),
    }
  } finally {
    pinned?.restore()
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
/** When and under what load the rounds ran (the machine is shared). */
const stamp = () =>
  `${new Date().toISOString().slice(11, 19)} UTC, load average ${loadavg()[0]!.toFixed(2)}`
const started = stamp()
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
  `\n${BACKENDS ? '2026-07-28 tools/call under a quota' : 'legacy tools/call'}, c=${CONCURRENCY}, ${ROUNDS} rounds of ${DURATION_MS} ms (medians)${PIN ? '; gateway pinned to CPU 0, everything else of the bench to CPU 1' : ''}; load: ${LOAD === 'wrk' ? 'wrk' : 'bench/load.ts'}; upstream: ${UPSTREAM === 'light' ? 'bench/fixtures/light-echo.ts' : 'the SDK fixture'}; ${started} → ${stamp()}\n`,
)
for (const d of deployments) {
  const first = samples.get(d.name)!.find((x) => x.firstError !== undefined)?.firstError
  if (first !== undefined) console.log(`${d.name}: first failed call: ${first}`)
}
if (PIN) {
  const pct = (x: number | undefined) => (x === undefined ? '–' : `${(100 * x).toFixed(0)} %`)
  const us = (x: number | undefined) => (x === undefined ? '–' : x.toFixed(1))
  /** CPU 1's tenants per call: the load generator, the upstream, PostgreSQL + Redis. */
  const tenants = (x: {
    loadUsPerCall: number
    upstreamUsPerCall: number
    serversUsPerCall?: number
  }) => `${us(x.loadUsPerCall)} / ${us(x.upstreamUsPerCall)} / ${us(x.serversUsPerCall)}`
  console.log(
    "| configuration | calls/s | × one process | gateway CPU µs/call | gateway busy | CPU 0 busy (all) | CPU 1 busy (others' processes) | CPU 1 µs/call: load / upstream / PostgreSQL + Redis | errors |",
  )
  console.log('| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |')
  const notes: string[] = []
  let valid = true
  for (const d of deployments) {
    const s = samples.get(d.name)!
    const at = (f: (x: Sample) => number | undefined) => median(s.map((x) => f(x) ?? Number.NaN))
    const rps = at((x) => x.rps)
    const cpu1 = at((x) => x.cpuBusy?.[1])
    const others = at((x) => x.cpu1Others)
    const gw = at((x) => x.gatewayBusy)
    const cpu0 = at((x) => x.cpuBusy?.[0])
    const errors = s.reduce((n, x) => n + x.errors, 0)
    const cpu1PerCall = tenants({
      loadUsPerCall: at((x) => x.loadUsPerCall),
      upstreamUsPerCall: at((x) => x.upstreamUsPerCall),
      serversUsPerCall: at((x) => x.serversUsPerCall),
    })
    console.log(
      `| ${d.name} | ${rps.toFixed(0)} | ${(rps / base).toFixed(2)} | ${us(at((x) => x.cpuUsPerCall))} | ${pct(gw)} | ${pct(cpu0)} | ${pct(cpu1)} (${pct(others)}) | ${cpu1PerCall} | ${errors} |`,
    )
    if (errors > 0 || cpu1 >= 0.9 || !(gw >= 0.9)) valid = false
    if (errors > 0) notes.push(`${d.name}: ${errors} calls failed, so the run is not valid.`)
    if (cpu1 >= 0.9)
      notes.push(
        `${d.name}: CPU 1 was saturated (${pct(cpu1)}, of which ${pct(others)} other processes'; per call ${cpu1PerCall} µs for the load, the upstream and the servers): its throughput is bounded by CPU 1, so the ratio is not per-replica throughput.`,
      )
    else if (gw < 0.9)
      notes.push(
        `${d.name}: the gateway used ${pct(gw)} of CPU 0 (${pct(Math.max(0, cpu0 - gw))} went to other processes and interrupts) without CPU 1 saturating: it also waited on its upstream and round trips, so calls/s is not its capacity: for a CPU-bound replica, compare the gateway CPU per call.`,
      )
    else notes.push(`${d.name}: the gateway was the bottleneck (${pct(gw)} of CPU 0).`)
  }
  console.log(`\n${notes.join('\n')}`)
  console.log(
    `\nValid (ADR 087: every gateway filled CPU 0, CPU 1 did not saturate, no call failed; medians): ${valid ? 'yes' : 'no'}`,
  )
  console.log(
    "\n| round | configuration | calls/s | gateway CPU µs/call | gateway busy | CPU 0 busy | CPU 1 busy (others') | CPU 1 µs/call: load / upstream / servers | p50 / p99 ms | errors | valid |",
  )
  console.log('| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |')
  /** The same rule, for one measurement. */
  const validSample = (x: Sample) =>
    x.errors === 0 && (x.cpuBusy?.[1] ?? 1) < 0.9 && (x.gatewayBusy ?? 0) >= 0.9
  const paired: string[] = []
  for (let round = 0; round < ROUNDS; round++) {
    for (const d of deployments) {
      const x = samples.get(d.name)![round]!
      console.log(
        `| ${round + 1} | ${d.name} | ${x.rps.toFixed(0)} | ${us(x.cpuUsPerCall)} | ${pct(x.gatewayBusy)} | ${pct(x.cpuBusy?.[0])} | ${pct(x.cpuBusy?.[1])} (${pct(x.cpu1Others)}) | ${tenants(x)} | ${x.p50Ms.toFixed(2)} / ${x.p99Ms.toFixed(2)} | ${x.errors} | ${validSample(x) ? 'yes' : 'no'} |`,
      )
    }
    // A round in which every configuration was valid gives a ratio on its own.
    const xs = deployments.map((d) => samples.get(d.name)![round]!)
    if (xs.every(validSample))
      paired.push(
        `round ${round + 1}: ${xs.map((x) => (x.rps / xs[0]!.rps).toFixed(2)).join(' / ')}× (CPU ratio ${xs.map((x) => (xs[0]!.cpuUsPerCall / x.cpuUsPerCall).toFixed(2)).join(' / ')})`,
      )
  }
  console.log(
    `\nRounds in which every configuration was valid: ${paired.length} of ${ROUNDS}${paired.length > 0 ? `: ${paired.join('; ')}` : ''}`,
  )
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
