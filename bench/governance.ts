/**
 * `node bench/governance.ts` (and a section of `npm run bench`): what governance and accounting
 * add to the gateway's own CPU per `tools/call`, on the in-process hot path of bench/hot-path.ts
 * (no sockets: the figures are Barbican's JavaScript alone). Each configuration runs in its own
 * process, round after round in a rotating order; the report gives medians and the difference
 * with `none` measured in the same rounds.
 *
 * Configurations:
 * - `none`: no policy, no audit, no metrics, no tracing (the baseline);
 * - `governed`: 50 Cedar policies (one reading arguments, one reading time), operator labels
 *   with secure contexts, and one rate limit: issue 17's "realistic policy" (budget ≤ 20 µs);
 * - `audit+metrics`: the audit log on SQLite, fsynced per group commit, and Prometheus metrics
 *   (issue 18's budget with tracing off: ≤ 10 µs);
 * - `audit-batched+metrics`: the same with `audit.durability: batched` (ADR 048);
 * - `everything`: audit, metrics and tracing at 100 % sampling to an OTLP/HTTP receiver this
 *   bench starts (issue 18's budget: ≤ 30 µs); `everything-batched` with batched audit.
 * - `default`: what `barbican serve` has on with a plain client file: a call line per call at
 *   `info` (formatted, batched as on stderr, written to /dev/null), the batched audit log and
 *   metrics (issue 33's budget: ≤ 30 µs).
 * - `trusted`: `none` with the pin guard on a SQLite pin store, as `barbican serve` has it by
 *   default: every call checks the store's revision (read again every 250 ms) and the
 *   quarantine (issue 33's budget for per-call trust checks: ≤ 5 µs).
 *
 * Options: --calls N (per measurement, default 20000), --concurrency 1,16 (default), --rounds N
 * (default 3), --only a,b.
 */
import { fork } from 'node:child_process'
import { mkdtempSync, openSync, rmSync, writeSync } from 'node:fs'
import { createServer } from 'node:http'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { ephemeralAuditKey } from '../src/audit/audit-key.ts'
import { AuditLog } from '../src/audit/audit-log.ts'
import { openSqliteAuditStore } from '../src/audit/sqlite.ts'
import type { Identity } from '../src/auth/identity.ts'
import { auditPolicy } from '../src/policies/audit.ts'
import { cedarPolicy } from '../src/policies/cedar.ts'
import { CedarEngine, type CedarPolicyText } from '../src/policies/cedar-engine.ts'
import { confirmPolicy } from '../src/policies/confirm.ts'
import type { Policy } from '../src/policies/policy.ts'
import { MemoryRateCounterStore } from '../src/policies/rate-counter-store.ts'
import { rateLimit } from '../src/policies/rate-limit.ts'
import { openSqliteStore } from '../src/store/sqlite.ts'
import { LineBatch } from '../src/telemetry/line-batch.ts'
import { jsonLogger, type Logger, silentLogger } from '../src/telemetry/log.ts'
import { startTracing, stopTracing } from '../src/telemetry/tracing.ts'
import { TrustGuard } from '../src/trust/trust-guard.ts'
import { hotPath } from './hot-path.ts'

export const GOVERNANCE_CONFIGURATIONS = [
  'none',
  'governed',
  'audit+metrics',
  'audit-batched+metrics',
  'everything',
  'everything-batched',
  'default',
  'trusted',
] as const
export type GovernanceConfiguration = (typeof GOVERNANCE_CONFIGURATIONS)[number]

export interface GovernanceResult {
  readonly calls: number
  readonly rounds: number
  /**
   * Per concurrency, per configuration: median CPU µs per call, the median extra over `none`,
   * and the median calls per second (whether audit keeps up with the gateway's own rate).
   */
  readonly byConcurrency: Readonly<Record<number, Readonly<Record<string, GovernanceFigures>>>>
}

export interface GovernanceFigures {
  readonly cpuUsPerCall: number
  readonly overNoneUs: number
  readonly callsPerSecond: number
}

/** The caller of every benchmarked call: a team member, with groups and a claim. */
const ALICE: Identity = {
  subject: 'alice',
  client: 'bench',
  scopes: ['mcp'],
  method: 'jwt',
  claims: { groups: ['team', 'team-7'], dept: 'ops' },
}

/** 50 policies of the shapes docs/policy.md's starter set uses, over 40 teams and upstreams. */
export function realisticPolicies(): CedarPolicyText[] {
  const texts: string[] = []
  for (let i = 0; i < 40; i++) {
    texts.push(
      `permit (principal in Barbican::Group::"team-${i}", action == Barbican::Action::"call", resource in Barbican::Upstream::"up-${i}");`,
    )
  }
  texts.push(
    'permit (principal in Barbican::Group::"team", action == Barbican::Action::"list", resource);',
    'permit (principal in Barbican::Group::"team", action in [Barbican::Action::"get", Barbican::Action::"read", Barbican::Action::"complete"], resource);',
    'permit (principal in Barbican::Group::"team", action == Barbican::Action::"call", resource in Barbican::Upstream::"echo") when { principal.hasTag("dept") && principal.getTag("dept") == "ops" };',
    'permit (principal in Barbican::Group::"team", action == Barbican::Action::"call", resource) when { resource.annotations has readOnlyHint && resource.annotations.readOnlyHint };',
    'permit (principal in Barbican::Group::"maintainers", action, resource in Barbican::Upstream::"github");',
    'forbid (principal, action == Barbican::Action::"call", resource) when { resource.annotations has destructiveHint && resource.annotations.destructiveHint && principal.authMethod == "config" };',
    'forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"files__write_file") when { context.arguments.hasTag("path") && !(context.arguments.getTag("path") like "/work/*") };',
    'forbid (principal, action == Barbican::Action::"call", resource == Barbican::Tool::"deploy__run") when { context.time < 1700000000 };',
    'forbid (principal in Barbican::Group::"contractors", action == Barbican::Action::"call", resource in Barbican::Upstream::"payments");',
    'forbid (principal, action, resource) when { principal.hasTag("suspended") };',
  )
  return texts.map((text, i) => ({ id: `bench.cedar#${i + 1}`, text }))
}

/** The governed chain: 50 Cedar policies, labels with secure contexts, one rate limit. */
export function governedPolicies(): Policy[] {
  return [
    rateLimit(
      [
        {
          name: 'per-user-tool',
          per: ['subject', 'tool'],
          limit: 1e9,
          windowMs: 60_000,
          algorithm: 'token-bucket',
          methods: ['tools/call'],
        },
      ],
      new MemoryRateCounterStore(),
    ),
    cedarPolicy(new CedarEngine(realisticPolicies()), 'enforce'),
    confirmPolicy({
      contexts: {
        labels: {
          private: { upstreams: ['echo'] },
          untrusted: { tools: ['web*'] },
          egress: { tools: ['send*', 'mail__send'] },
        },
        windowMs: 3_600_000,
        maxContexts: 10_000,
        onTrifecta: 'deny',
      },
      answerMs: 60_000,
    }),
  ]
}

async function child(name: GovernanceConfiguration, calls: number, concurrency: number) {
  const dir = mkdtempSync(join(tmpdir(), 'barbican-bench-governance-'))
  let audit: AuditLog | undefined
  const policies: Policy[] = []
  if (name === 'governed') policies.push(...governedPolicies())
  if (name !== 'none' && name !== 'governed' && name !== 'trusted') {
    audit = new AuditLog({
      store: await openSqliteAuditStore(join(dir, 'audit.db')),
      key: ephemeralAuditKey(),
      ...(name.includes('batched') || name === 'default'
        ? { batched: { journal: join(dir, 'audit.db-batch'), windowMs: 200 } }
        : {}),
    })
    policies.push(auditPolicy({ sink: audit, rawArguments: false }))
  }
  const tracing = name.startsWith('everything')
    ? await startTracing(process.env, jsonLogger({ level: 'warn' }))
    : false
  const pins = name === 'trusted' ? await openSqliteStore(join(dir, 'pins.db')) : undefined
  try {
    const result = await hotPath(calls, concurrency, {
      metrics: name !== 'none' && name !== 'governed' && name !== 'trusted',
      ...(pins ? { trust: new TrustGuard({ store: pins.pins, log: silentLogger }) } : {}),
      policies,
      identity: ALICE,
      ...(name === 'default' ? { log: callLines() } : {}),
    })
    return { ...result, tracing }
  } finally {
    await stopTracing()
    await audit?.close()
    await pins?.close()
    rmSync(dir, { recursive: true, force: true })
  }
}

/** The default logger's call lines, batched as on stderr (ADR 123), into /dev/null. */
function callLines(): Logger {
  const devNull = openSync('/dev/null', 'w')
  const batch = new LineBatch({ write: (text) => writeSync(devNull, text) })
  return jsonLogger({
    level: 'info',
    write: (line, level) =>
      level === 'info' || level === 'debug' ? batch.add(line) : batch.now(line),
  })
}

/** An OTLP/HTTP receiver that accepts and drops every export (the cost measured is the sender's). */
async function startReceiver(): Promise<{ url: string; close(): Promise<void> }> {
  const server = createServer((req, res) => {
    req.resume()
    // An empty protobuf ExportTraceServiceResponse: nothing rejected.
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'application/x-protobuf' })
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : 0
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

function runChild(
  name: GovernanceConfiguration,
  calls: number,
  concurrency: number,
  receiver: string,
): Promise<{ cpuUsPerCall: number; callsPerSecond: number }> {
  const env: NodeJS.ProcessEnv = { ...process.env, NODE_NO_WARNINGS: '1' }
  for (const key of Object.keys(env)) if (key.startsWith('OTEL_')) delete env[key]
  if (name.startsWith('everything')) {
    env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver
    env.OTEL_TRACES_SAMPLER = 'always_on'
  }
  const proc = fork(
    new URL(import.meta.url).pathname,
    ['--child', name, '--calls', String(calls), '--concurrency', String(concurrency)],
    { env, stdio: ['ignore', 'pipe', 'inherit', 'ipc'] },
  )
  let out = ''
  proc.stdout?.on('data', (chunk) => {
    out += chunk
  })
  return new Promise((resolve, reject) => {
    proc.once('exit', (code) => {
      if (code !== 0) reject(new Error(`governance bench ${name} exited ${code}`))
      else resolve(JSON.parse(out) as { cpuUsPerCall: number; callsPerSecond: number })
    })
  })
}

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2
}

/** Every configuration at every concurrency, `rounds` times; medians and extra over `none`. */
export async function governance(options: {
  calls: number
  concurrencies: readonly number[]
  rounds: number
  only?: readonly string[] | undefined
  progress?: (line: string) => void
}): Promise<GovernanceResult> {
  const chosen = GOVERNANCE_CONFIGURATIONS.filter(
    (c) => c === 'none' || !options.only || options.only.includes(c),
  )
  const receiver = await startReceiver()
  try {
    const byConcurrency: Record<number, Record<string, GovernanceFigures>> = {}
    for (const c of options.concurrencies) {
      const samples: Record<string, number[]> = {}
      const extra: Record<string, number[]> = {}
      const rates: Record<string, number[]> = {}
      for (let round = 0; round < options.rounds; round++) {
        const order = chosen.map((_, i) => chosen[(i + round) % chosen.length]!)
        const thisRound: Record<string, number> = {}
        for (const name of order) {
          const { cpuUsPerCall: cpu, callsPerSecond } = await runChild(
            name,
            options.calls,
            c,
            receiver.url,
          )
          thisRound[name] = cpu
          samples[name] = [...(samples[name] ?? []), cpu]
          rates[name] = [...(rates[name] ?? []), callsPerSecond]
          options.progress?.(
            `governance round ${round + 1}/${options.rounds} c=${c} ${name}: ${cpu.toFixed(1)} µs CPU/call\n`,
          )
        }
        for (const name of chosen) {
          extra[name] = [...(extra[name] ?? []), thisRound[name]! - thisRound.none!]
        }
      }
      byConcurrency[c] = Object.fromEntries(
        chosen.map((name) => [
          name,
          {
            cpuUsPerCall: median(samples[name]!),
            overNoneUs: median(extra[name]!),
            callsPerSecond: Math.round(median(rates[name]!)),
          },
        ]),
      )
    }
    return { calls: options.calls, rounds: options.rounds, byConcurrency }
  } finally {
    await receiver.close()
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: {
      child: { type: 'string' },
      calls: { type: 'string', default: '20000' },
      concurrency: { type: 'string', default: '1,16' },
      rounds: { type: 'string', default: '3' },
      only: { type: 'string' },
    },
  })
  if (values.child !== undefined) {
    const result = await child(
      values.child as GovernanceConfiguration,
      Number(values.calls),
      Number(values.concurrency),
    )
    process.stdout.write(`${JSON.stringify(result)}\n`)
  } else {
    const result = await governance({
      calls: Number(values.calls),
      concurrencies: values.concurrency.split(',').map(Number),
      rounds: Number(values.rounds),
      only: values.only?.split(','),
      progress: (line) => process.stderr.write(line),
    })
    process.stdout.write(`${JSON.stringify(result, null, 2)}\n`)
  }
}
