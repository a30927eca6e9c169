/**
 * What confinement costs (issue 16): upstream start (spawn → initialize answered) and one
 * tools/call round trip, for server-everything confined by the default sandbox, confined with an
 * egress proxy (`sandbox.network.allow`: socat inside, the proxy outside), and with
 * `sandbox: none`, interleaved run by run; plus the RSS of the processes Barbican adds per
 * upstream (bwrap's two and socat, or the unconfined watchdog shell). Prints medians.
 * `npm run bench` runs it too (its micro section, `sandboxCost`).
 *
 * Usage: node bench/sandbox.ts [--runs N] [--calls N]
 */
import { readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { DEFAULT_JSON_LIMITS } from '../src/protocol/json-limits.ts'
import type { JsonRpcMessage } from '../src/protocol/jsonrpc.ts'
import { DEFAULT_SANDBOX_LIMITS, type SandboxSpec } from '../src/sandbox/sandbox.ts'
import { silentLogger } from '../src/telemetry/log.ts'
import { StdioOutboundTransport } from '../src/transports/stdio-outbound.ts'

const everything = fileURLToPath(
  new URL('../node_modules/@modelcontextprotocol/server-everything/dist/index.js', import.meta.url),
)
const confined: SandboxSpec = {
  stateDir: join(tmpdir(), 'barbican-bench-sandbox-state'),
  read: [],
  write: [],
  protect: [],
  limits: DEFAULT_SANDBOX_LIMITS,
}
const egress: SandboxSpec = {
  ...confined,
  network: { allow: ['127.0.0.1:9'], maxConnections: 32 },
}

/** The three ways a stdio upstream runs, as measured. */
export type SandboxKind = 'confined' | 'egress' | 'none'

export interface SandboxCost {
  readonly kind: SandboxKind
  readonly runs: number
  readonly calls: number
  readonly startMs: number
  readonly callUs: number
  readonly wrapperMb: number
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
}

/** Processes Barbican adds for the server: the group leader and its non-node descendants. */
function wrapperRssKb(leader: number): number {
  let total = 0
  const children = (pid: number) =>
    readdirSync(`/proc/${pid}/task`).flatMap((t) => {
      try {
        return readFileSync(`/proc/${pid}/task/${t}/children`, 'utf8')
          .trim()
          .split(/\s+/)
          .filter(Boolean)
          .map(Number)
      } catch {
        return []
      }
    })
  const walk = (pid: number) => {
    const comm = readFileSync(`/proc/${pid}/comm`, 'utf8').trim()
    // The server itself is not counted; what it was exec'd over may have left children (socat).
    if (comm !== 'node' && comm !== 'MainThread') total += rssKb(pid)
    for (const child of children(pid)) walk(child)
  }
  walk(leader)
  return total
}

async function once(sandbox: SandboxSpec | 'none', calls: number) {
  const transport = new StdioOutboundTransport({
    name: 'bench',
    command: process.execPath,
    args: [everything, 'stdio'],
    log: silentLogger,
    limits: DEFAULT_JSON_LIMITS,
    sandbox,
  })
  const waiting = new Map<number, (m: JsonRpcMessage) => void>()
  transport.onmessage = (m) => {
    if ('id' in m && typeof m.id === 'number' && !('method' in m)) waiting.get(m.id)?.(m)
  }
  const request = (id: number, method: string, params: unknown) =>
    new Promise<JsonRpcMessage>((resolve) => {
      waiting.set(id, resolve)
      void transport.send({ jsonrpc: '2.0', id, method, params } as JsonRpcMessage)
    })
  const began = performance.now()
  await transport.start()
  await request(0, 'initialize', {
    protocolVersion: '2025-06-18',
    capabilities: {},
    clientInfo: { name: 'bench', version: '1' },
  })
  const startMs = performance.now() - began
  await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' })
  const callsBegan = performance.now()
  for (let i = 1; i <= calls; i++) {
    await request(i, 'tools/call', { name: 'echo', arguments: { message: 'x' } })
  }
  const callUs = ((performance.now() - callsBegan) * 1000) / calls
  const wrapperKb = wrapperRssKb(transport.pid!)
  await transport.close()
  return { startMs, callUs, wrapperKb }
}

/** Medians of `runs` starts and `calls` round trips per kind, the kinds interleaved per run. */
export async function sandboxCost(runs: number, calls: number): Promise<SandboxCost[]> {
  const kinds: SandboxKind[] = ['confined', 'egress', 'none']
  const specs = { confined, egress, none: 'none' as const }
  const results = new Map<SandboxKind, Awaited<ReturnType<typeof once>>[]>(
    kinds.map((k) => [k, []]),
  )
  for (let run = 0; run < runs; run++) {
    // Rotated per run, so drift on a shared machine spreads evenly.
    for (let i = 0; i < kinds.length; i++) {
      const kind = kinds[(i + run) % kinds.length]!
      results.get(kind)!.push(await once(specs[kind], calls))
    }
  }
  return kinds.map((kind) => {
    const r = results.get(kind)!
    return {
      kind,
      runs,
      calls,
      startMs: median(r.map((x) => x.startMs)),
      callUs: median(r.map((x) => x.callUs)),
      wrapperMb: median(r.map((x) => x.wrapperKb)) / 1024,
    }
  })
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: { runs: { type: 'string' }, calls: { type: 'string' } },
  })
  for (const r of await sandboxCost(Number(values.runs ?? 15), Number(values.calls ?? 300))) {
    console.log(
      `${r.kind.padEnd(9)} start median ${r.startMs.toFixed(1)} ms, ` +
        `call median ${r.callUs.toFixed(0)} µs, wrapper RSS ${r.wrapperMb.toFixed(1)} MB`,
    )
  }
}
