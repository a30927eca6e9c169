/**
 * Turns the rounds' samples into medians and ratios, checks them against the performance
 * targets, and renders the markdown table that docs/performance.md shows.
 */
import type { GovernanceResult } from './governance.ts'
import type { ColdStartResult, SessionsResult, ToolsListResult } from './micro.ts'
import type { SandboxCost } from './sandbox.ts'

/** One load run of one configuration at one concurrency. */
export interface Sample {
  readonly rps: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly cpuUsPerCall: number
  /** The part of cpuUsPerCall spent in the kernel (system time: syscalls, loopback TCP, pipes). */
  readonly kernelUsPerCall: number
  /**
   * CPU of the upstream server per call (its own process, or the gateway's descendants for a
   * stdio upstream; 0 for a server measured directly) and of the load generator: with the
   * gateway's, what the machine spends per call.
   */
  readonly upstreamCpuUsPerCall?: number
  readonly loadCpuUsPerCall?: number
  readonly rssLoadMb: number
  readonly requests: number
  readonly errors: number
}

/** Medians over the rounds for one configuration at one concurrency. */
export interface Summary {
  readonly configuration: string
  readonly concurrency: number
  readonly rounds: number
  readonly rps: number
  readonly p50Ms: number
  readonly p99Ms: number
  readonly cpuUsPerCall: number
  readonly kernelUsPerCall: number
  readonly upstreamCpuUsPerCall: number
  readonly loadCpuUsPerCall: number
  readonly rssLoadMb: number
  readonly errors: number
  /** Median of the per-round ratio to the baseline's throughput. */
  readonly ratio: number
  /** Median of the per-round p50 minus the baseline's p50. */
  readonly addedP50Ms: number
  /** Median of the per-round ratio to the best npm peer's throughput. */
  readonly vsBestPeer: number
}

/**
 * One configuration over a baseline at one concurrency (`npm run bench -- --backends`: PostgreSQL
 * + Redis over embedded): each difference and ratio is taken within a round, then the median over
 * the rounds is given; user is CPU minus kernel.
 */
export interface Difference {
  readonly configuration: string
  readonly baseline: string
  readonly concurrency: number
  readonly rounds: number
  readonly baseUserUs: number
  readonly baseKernelUs: number
  readonly userUs: number
  readonly kernelUs: number
  readonly addedUserUs: number
  readonly addedKernelUs: number
  readonly addedCpuUs: number
  readonly ratio: number
}

/** `configuration` minus `baseline` per concurrency, round by round (both must have run). */
export function differences(
  samples: Readonly<Record<string, Readonly<Record<number, readonly Sample[]>>>>,
  configuration: string,
  baseline: string,
): Difference[] {
  const out: Difference[] = []
  for (const [c, runs] of Object.entries(samples[configuration] ?? {})) {
    const base = samples[baseline]?.[Number(c)]
    if (!base) continue
    const user = (s: Sample) => s.cpuUsPerCall - s.kernelUsPerCall
    const within = (f: (r: Sample, b: Sample) => number) =>
      median(runs.map((r, i) => (base[i] ? f(r, base[i]) : Number.NaN)))
    out.push({
      configuration,
      baseline,
      concurrency: Number(c),
      rounds: runs.length,
      baseUserUs: median(base.map(user)),
      baseKernelUs: median(base.map((s) => s.kernelUsPerCall)),
      userUs: median(runs.map(user)),
      kernelUs: median(runs.map((s) => s.kernelUsPerCall)),
      addedUserUs: within((r, b) => user(r) - user(b)),
      addedKernelUs: within((r, b) => r.kernelUsPerCall - b.kernelUsPerCall),
      addedCpuUs: within((r, b) => r.cpuUsPerCall - b.cpuUsPerCall),
      ratio: within((r, b) => r.rps / b.rps),
    })
  }
  return out
}

export interface Report {
  readonly startedAt: string
  readonly node: string
  readonly cpus: number
  readonly options: {
    readonly rounds: number
    readonly durationMs: number
    readonly warmupMs: number
    readonly concurrencies: readonly number[]
    readonly quick: boolean
  }
  readonly configurations: readonly { readonly name: string; readonly description: string }[]
  readonly idleRssMb: Readonly<Record<string, number>>
  readonly throughput: readonly Summary[]
  toolsList?: ToolsListResult
  sessions?: SessionsResult
  coldStart?: ColdStartResult
  /** bench/sandbox.ts: start and call cost of a stdio upstream by confinement. */
  sandbox?: readonly SandboxCost[]
  governance?: GovernanceResult
  /** With --backends: PostgreSQL + Redis over embedded (issue 19's targets). */
  backends?: readonly Difference[]
}

const PEERS = ['mcp-proxy', 'supergateway']

function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v))
  if (finite.length === 0) return Number.NaN
  const sorted = [...finite].sort((a, b) => a - b)
  const mid = sorted.length / 2
  return sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/** The largest measured value; NaN when none was measured (a peer left out with --only). */
function bestOf(values: readonly (number | undefined)[]): number {
  const measured = values.filter((v): v is number => v !== undefined && Number.isFinite(v))
  return measured.length === 0 ? Number.NaN : Math.max(...measured)
}

/** Medians per configuration and concurrency, with ratios taken round by round. */
export function summarise(
  samples: Readonly<Record<string, Readonly<Record<number, readonly Sample[]>>>>,
  baseline: string,
): Summary[] {
  const out: Summary[] = []
  for (const [configuration, byConcurrency] of Object.entries(samples)) {
    for (const [c, runs] of Object.entries(byConcurrency)) {
      const base = samples[baseline]?.[Number(c)] ?? []
      const peers = PEERS.map((p) => samples[p]?.[Number(c)] ?? [])
      const pick = (key: keyof Sample) => median(runs.map((r) => r[key] ?? Number.NaN))
      out.push({
        configuration,
        concurrency: Number(c),
        rounds: runs.length,
        rps: pick('rps'),
        p50Ms: pick('p50Ms'),
        p99Ms: pick('p99Ms'),
        cpuUsPerCall: pick('cpuUsPerCall'),
        kernelUsPerCall: pick('kernelUsPerCall'),
        upstreamCpuUsPerCall: pick('upstreamCpuUsPerCall'),
        loadCpuUsPerCall: pick('loadCpuUsPerCall'),
        rssLoadMb: pick('rssLoadMb'),
        errors: runs.reduce((sum, r) => sum + r.errors, 0),
        ratio: median(runs.map((r, i) => r.rps / (base[i]?.rps ?? Number.NaN))),
        addedP50Ms: median(runs.map((r, i) => r.p50Ms - (base[i]?.p50Ms ?? Number.NaN))),
        vsBestPeer: median(runs.map((r, i) => r.rps / bestOf(peers.map((p) => p[i]?.rps)))),
      })
    }
  }
  return out
}

/** One target: what it asks, what was measured, and whether it holds. */
export interface Verdict {
  readonly target: string
  readonly measured: string
  readonly met: boolean | undefined
  /** How far a missed target is from its limit, in percent of the limit. */
  readonly missedByPercent?: number
}

/** Checks the issue's targets against a report. */
export function verdicts(report: Report): Verdict[] {
  const at = (name: string, c: number) =>
    report.throughput.find((s) => s.configuration === name && s.concurrency === c)
  const v: Verdict[] = []
  const check = (target: string, value: number | undefined, limit: number, atMost: boolean) => {
    const known = value !== undefined && Number.isFinite(value)
    const met = known ? (atMost ? value <= limit : value >= limit) : undefined
    v.push({
      target,
      measured: known ? fmt(value) : 'not measured',
      met,
      ...(known && met === false
        ? { missedByPercent: (100 * Math.abs(value - limit)) / Math.abs(limit) }
        : {}),
    })
  }
  // Issue 33: the default configuration, as users run it, first.
  check(
    'Default config → HTTP: throughput ≥ 0.75× direct at c=16',
    at('barbican-http-default', 16)?.ratio,
    0.75,
    false,
  )
  check(
    'Default config → stdio: throughput ≥ 1.8× direct HTTP at c=16',
    at('barbican-stdio-default', 16)?.ratio,
    1.8,
    false,
  )
  check(
    'Default config → HTTP: gateway CPU ≤ 150 µs per tools/call (c=16)',
    at('barbican-http-default', 16)?.cpuUsPerCall,
    150,
    true,
  )
  check(
    'Default config → stdio: gateway CPU ≤ 150 µs per tools/call (c=16)',
    at('barbican-stdio-default', 16)?.cpuUsPerCall,
    150,
    true,
  )
  check(
    'Default config → HTTP: added p50 ≤ 0.3 ms at c=1',
    at('barbican-http-default', 1)?.addedP50Ms,
    0.3,
    true,
  )
  // The earlier targets, on the stripped configurations (log level warn, audit and metrics off).
  check(
    'Barbican → HTTP: throughput ≥ 0.85× direct at c=16',
    at('barbican-http', 16)?.ratio,
    0.85,
    false,
  )
  check(
    'Barbican → HTTP: added p50 ≤ 0.15 ms at c=1',
    at('barbican-http', 1)?.addedP50Ms,
    0.15,
    true,
  )
  check(
    'Barbican → stdio: throughput ≥ 1.5× direct HTTP at c=16',
    at('barbican-stdio', 16)?.ratio,
    1.5,
    false,
  )
  check(
    'Barbican → HTTP: ≥ 3× the best npm peer at c=16',
    at('barbican-http', 16)?.vsBestPeer,
    3,
    false,
  )
  check(
    'Barbican → stdio: ≥ 3× the best npm peer at c=16',
    at('barbican-stdio', 16)?.vsBestPeer,
    3,
    false,
  )
  check(
    'Barbican → HTTP: CPU ≤ 100 µs per tools/call (c=16)',
    at('barbican-http', 16)?.cpuUsPerCall,
    100,
    true,
  )
  check(
    'Barbican → stdio with API-key auth and a permission rule: CPU ≤ 100 µs per tools/call (c=16)',
    at('barbican-stdio+auth', 16)?.cpuUsPerCall,
    100,
    true,
  )
  check(
    'Barbican → stdio: CPU ≤ 100 µs per tools/call (c=16)',
    at('barbican-stdio', 16)?.cpuUsPerCall,
    100,
    true,
  )
  check('Barbican idle RSS ≤ 60 MB (→ stdio)', report.idleRssMb['barbican-stdio'], 60, true)
  check('Barbican idle RSS ≤ 60 MB (→ HTTP)', report.idleRssMb['barbican-http'], 60, true)
  const cold = report.coldStart
  check(
    'Cold start ≤ 300 ms plus the upstream’s own start (→ stdio), ms beyond the upstream',
    cold && cold.barbicanStdioMs - cold.upstreamStdioMs,
    300,
    true,
  )
  check('Cold start ≤ 300 ms (→ running HTTP upstream), ms', cold?.barbicanHttpMs, 300, true)
  check(
    `${report.sessions?.sessions ?? 10_000} idle legacy sessions ≤ 200 MB RSS`,
    report.sessions?.rssAfterMb,
    200,
    true,
  )
  check('Merged tools/list 50 × 100 cached ≤ 5 ms p50', report.toolsList?.p50Ms, 5, true)
  const sandboxed = (kind: string) => report.sandbox?.find((r) => r.kind === kind)?.startMs
  const none = sandboxed('none')
  check(
    'Sandbox adds ≤ 50 ms to an upstream start (median), ms',
    none === undefined ? undefined : (sandboxed('confined') ?? none) - none,
    50,
    true,
  )
  const governed = (name: string) =>
    report.governance &&
    Math.max(...Object.values(report.governance.byConcurrency).map((c) => c[name]?.overNoneUs ?? 0))
  check(
    'Realistic policy chain ≤ 20 µs CPU per tools/call over none',
    governed('governed'),
    20,
    true,
  )
  check('Audit + metrics ≤ 10 µs CPU per tools/call over none', governed('audit+metrics'), 10, true)
  check(
    'Audit (batched) + metrics ≤ 10 µs CPU per tools/call over none',
    governed('audit-batched+metrics'),
    10,
    true,
  )
  check('Everything on ≤ 30 µs CPU per tools/call over none', governed('everything'), 30, true)
  for (const d of report.backends ?? []) {
    check(
      `PostgreSQL + Redis: ≤ 30 µs more gateway CPU per 2026 tools/call than embedded (c=${d.concurrency})`,
      d.addedCpuUs,
      30,
      true,
    )
    check(
      `PostgreSQL + Redis: throughput ≥ 0.9× embedded (c=${d.concurrency}; both on this machine's 2 cores, with the servers)`,
      d.ratio,
      0.9,
      false,
    )
  }
  check(
    'Everything on, audit batched, ≤ 30 µs CPU per tools/call over none',
    governed('everything-batched'),
    30,
    true,
  )
  return v
}

function fmt(n: number, digits = 2): string {
  if (!Number.isFinite(n)) return '–'
  return Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(digits)
}

/** The markdown report: targets, throughput table, memory, micro-benchmarks. */
export function renderMarkdown(report: Report): string {
  const lines: string[] = []
  const o = report.options
  lines.push(
    `# Barbican benchmark — ${report.startedAt}`,
    '',
    `Node ${report.node}, ${report.cpus} CPUs, loopback. ${o.rounds} rounds × ${o.durationMs} ms per configuration and concurrency (after ${o.warmupMs} ms warm-up)${o.quick ? ', --quick' : ''}. Medians over rounds; ratios are taken within each round against direct-stateful.`,
    '',
    '## Targets',
    '',
    '| target | measured | met |',
    '| --- | --- | --- |',
  )
  for (const t of verdicts(report)) {
    const verdict =
      t.met === undefined
        ? '–'
        : t.met
          ? 'yes'
          : `**no** (off by ${fmt(t.missedByPercent ?? Number.NaN, 0)}%)`
    lines.push(`| ${t.target} | ${t.measured} | ${verdict} |`)
  }
  lines.push(
    '',
    '## Throughput and latency (tools/call echo)',
    '',
    '| configuration | c | req/s | × direct | × best peer | p50 ms | +p50 ms | p99 ms | CPU µs/call | of which kernel | RSS load MB | errors |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
  )
  const sorted = [...report.throughput].sort(
    (a, b) => a.concurrency - b.concurrency || order(report, a) - order(report, b),
  )
  for (const s of sorted) {
    lines.push(
      `| ${s.configuration} | ${s.concurrency} | ${fmt(s.rps)} | ${fmt(s.ratio)} | ${fmt(s.vsBestPeer)} | ${fmt(s.p50Ms, 3)} | ${fmt(s.addedP50Ms, 3)} | ${fmt(s.p99Ms, 3)} | ${fmt(s.cpuUsPerCall, 0)} | ${fmt(s.kernelUsPerCall, 0)} | ${fmt(s.rssLoadMb, 0)} | ${s.errors} |`,
    )
  }
  lines.push(
    '',
    '## CPU per call by process',
    '',
    "What the whole machine spends per call: the measured process (the gateway, or the direct server), the upstream it relays to (its own process → HTTP; the gateway's descendants → stdio, sandbox included) and the load generator. With two cores, throughput is at most 2 s of CPU divided by the total.",
    '',
    '| configuration | c | gateway or server µs | upstream µs | load µs | total µs | req/s × total (cores busy) |',
    '| --- | ---: | ---: | ---: | ---: | ---: | ---: |',
  )
  for (const s of sorted) {
    const total = s.cpuUsPerCall + (s.upstreamCpuUsPerCall || 0) + (s.loadCpuUsPerCall || 0)
    lines.push(
      `| ${s.configuration} | ${s.concurrency} | ${fmt(s.cpuUsPerCall, 0)} | ${fmt(s.upstreamCpuUsPerCall, 0)} | ${fmt(s.loadCpuUsPerCall, 0)} | ${fmt(total, 0)} | ${fmt((s.rps * total) / 1e6, 2)} |`,
    )
  }
  lines.push(
    '',
    '## Idle RSS (after start and one call)',
    '',
    '| configuration | MB |',
    '| --- | ---: |',
  )
  for (const [name, mb] of Object.entries(report.idleRssMb))
    lines.push(`| ${name} | ${fmt(mb, 1)} |`)
  if (report.backends && report.backends.length > 0) {
    const [first] = report.backends
    lines.push(
      '',
      `## ${first?.configuration} over ${first?.baseline} (gateway CPU µs per call)`,
      '',
      'Differences and ratios taken within each round, medians over the rounds; user = CPU − kernel. On this machine the gateway shares two cores with the load, the upstream, PostgreSQL and Redis.',
      '',
      '| c | embedded user | embedded kernel | backends user | backends kernel | + user | + kernel | + CPU | × throughput |',
      '| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |',
      ...[...report.backends]
        .sort((a, b) => a.concurrency - b.concurrency)
        .map(
          (d) =>
            `| ${d.concurrency} | ${fmt(d.baseUserUs, 0)} | ${fmt(d.baseKernelUs, 0)} | ${fmt(d.userUs, 0)} | ${fmt(d.kernelUs, 0)} | ${fmt(d.addedUserUs, 0)} | ${fmt(d.addedKernelUs, 0)} | ${fmt(d.addedCpuUs, 0)} | ${fmt(d.ratio)} |`,
        ),
    )
  }
  if (report.toolsList) {
    const t = report.toolsList
    lines.push(
      '',
      '## Merged tools/list, cached',
      '',
      `${t.upstreams} upstreams × ${t.toolsPerUpstream} tools = ${t.tools} tools, ${t.samples} samples, in-process (session receive → reply serialised): p50 ${fmt(t.p50Ms, 3)} ms, p99 ${fmt(t.p99Ms, 3)} ms.`,
    )
  }
  if (report.sessions) {
    const s = report.sessions
    lines.push(
      '',
      '## Idle legacy sessions',
      '',
      `${s.sessions} Streamable HTTP sessions (initialize + initialized) on Barbican → stdio: RSS ${fmt(s.rssBeforeMb, 1)} MB before, ${fmt(s.rssAfterMb, 1)} MB after (${fmt(s.bytesPerSession / 1024, 1)} KiB per session); opened in ${fmt(s.openSeconds, 1)} s.`,
    )
  }
  if (report.coldStart) {
    const c = report.coldStart
    lines.push(
      '',
      `## Cold start (spawn → first successful tools/call, median of ${c.runs})`,
      '',
      '| program | ms |',
      '| --- | ---: |',
      `| SDK server alone, stdio | ${fmt(c.upstreamStdioMs, 0)} |`,
      `| SDK server alone, HTTP | ${fmt(c.upstreamHttpMs, 0)} |`,
      `| Barbican → stdio (includes the upstream’s start) | ${fmt(c.barbicanStdioMs, 0)} |`,
      `| Barbican → running HTTP upstream | ${fmt(c.barbicanHttpMs, 0)} |`,
      `| mcp-proxy → stdio | ${fmt(c.mcpProxyMs, 0)} |`,
      `| supergateway → stdio | ${fmt(c.supergatewayMs, 0)} |`,
    )
  }
  if (report.sandbox) {
    const [first] = report.sandbox
    lines.push(
      '',
      `## Sandbox (server-everything over stdio, medians of ${first?.runs ?? 0} starts and ${first?.calls ?? 0} sequential calls)`,
      '',
      '| confinement | start (spawn → initialize answered), ms | tools/call, µs | processes between Barbican and the server, MB RSS |',
      '| --- | ---: | ---: | ---: |',
      ...report.sandbox.map(
        (r) =>
          `| ${r.kind === 'egress' ? 'confined, with egress proxy' : r.kind === 'none' ? '`sandbox: none`' : 'confined'} | ${fmt(r.startMs, 1)} | ${fmt(r.callUs, 0)} | ${fmt(r.wrapperMb, 1)} |`,
      ),
    )
  }
  if (report.governance) {
    const g = report.governance
    lines.push(
      '',
      '## Governance and accounting, in-process (bench/governance.ts)',
      '',
      `Gateway CPU per tools/call on the in-process hot path, median of ${g.rounds} rounds of ${g.calls} calls; "over none" is the median difference with \`none\` in the same round.`,
      '',
      '| configuration | concurrency | µs CPU/call | over none |',
      '| --- | ---: | ---: | ---: |',
    )
    for (const [c, byName] of Object.entries(g.byConcurrency)) {
      for (const [name, r] of Object.entries(byName))
        lines.push(`| ${name} | ${c} | ${fmt(r.cpuUsPerCall, 1)} | ${fmt(r.overNoneUs, 1)} |`)
    }
  }
  lines.push('', '## Configurations', '')
  for (const c of report.configurations) lines.push(`- \`${c.name}\`: ${c.description}`)
  return `${lines.join('\n')}\n`
}

function order(report: Report, s: Summary): number {
  return report.configurations.findIndex((c) => c.name === s.configuration)
}
