/**
 * What confinement costs (issue 16): upstream start (spawn → initialize answered) and one
 * tools/call round trip, for server-everything confined by the default sandbox and with
 * `sandbox: none`, interleaved run by run; plus the RSS of the processes Barbican adds per
 * upstream (bwrap's two, or the unconfined watchdog shell). Prints medians.
 *
 * Usage: node bench/sandbox.ts [--runs N] [--calls N]
 */
import { readdirSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { silentLogger } from '../src/common/log.ts'
import { DEFAULT_JSON_LIMITS } from '../src/protocol/json-limits.ts'
import type { JsonRpcMessage } from '../src/protocol/jsonrpc.ts'
import { DEFAULT_SANDBOX_LIMITS, type SandboxSpec } from '../src/transports/sandbox.ts'
import { StdioOutboundTransport } from '../src/transports/stdio-outbound.ts'

const { values } = parseArgs({ options: { runs: { type: 'string' }, calls: { type: 'string' } } })
const RUNS = Number(values.runs ?? 15)
const CALLS = Number(values.calls ?? 300)
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

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0

function rssKb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0)
}

/** Processes between Barbican and the server: the group leader and its non-node descendants. */
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
    if (comm === 'node' || comm === 'MainThread') return
    total += rssKb(pid)
    for (const child of children(pid)) walk(child)
  }
  walk(leader)
  return total
}

async function once(sandbox: SandboxSpec | 'none') {
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
  for (let i = 1; i <= CALLS; i++) {
    await request(i, 'tools/call', { name: 'echo', arguments: { message: 'x' } })
  }
  const callUs = ((performance.now() - callsBegan) * 1000) / CALLS
  const wrapperKb = wrapperRssKb(transport.pid!)
  await transport.close()
  return { startMs, callUs, wrapperKb }
}

const results = {
  confined: [] as Awaited<ReturnType<typeof once>>[],
  none: [] as Awaited<ReturnType<typeof once>>[],
}
for (let run = 0; run < RUNS; run++) {
  for (const kind of run % 2 === 0
    ? (['confined', 'none'] as const)
    : (['none', 'confined'] as const)) {
    results[kind].push(await once(kind === 'confined' ? confined : 'none'))
  }
}
for (const kind of ['confined', 'none'] as const) {
  const r = results[kind]
  console.log(
    `${kind.padEnd(9)} start median ${median(r.map((x) => x.startMs)).toFixed(1)} ms, ` +
      `call median ${median(r.map((x) => x.callUs)).toFixed(0)} µs, ` +
      `wrapper RSS ${(median(r.map((x) => x.wrapperKb)) / 1024).toFixed(1)} MB`,
  )
}
