/**
 * The benchmarks that are not throughput rounds: memory of many idle legacy sessions, a merged
 * `tools/list` over many upstreams from the cache, and cold start.
 */
import { spawn } from 'node:child_process'
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { Pool } from 'undici'
import { z } from 'zod'
import { Gateway } from '../src/gateway/gateway.ts'
import type { JsonRpcMessage } from '../src/protocol/jsonrpc.ts'
import { silentLogger } from '../src/telemetry/log.ts'
import type { Transport } from '../src/transports/transport.ts'
import { inProcessUpstream, rules, serverPlan } from '../test/support/plans.ts'
import { quantile } from './load.ts'
import { checkEcho, type HttpSession, initializeSession, toolCall } from './mcp-http.ts'
import {
  FIXTURE,
  NODE,
  type Running,
  rssBytes,
  startBarbican,
  startDirect,
  startMcpProxy,
  startSupergateway,
} from './processes.ts'

/** Memory of `count` idle legacy Streamable HTTP sessions held by one Barbican. */
export interface SessionsResult {
  readonly sessions: number
  readonly rssBeforeMb: number
  readonly rssAfterMb: number
  readonly bytesPerSession: number
  readonly openSeconds: number
}

/** Opens `count` sessions (initialize + initialized) on a fresh Barbican → stdio upstream. */
export async function idleSessions(count: number): Promise<SessionsResult> {
  const barbican = await startBarbican('barbican-sessions', { stdio: true })
  const pool = new Pool(new URL(barbican.target.url).origin, { connections: 32 })
  try {
    await settle()
    const before = rssBytes(barbican.pid)
    const started = performance.now()
    const sessions: HttpSession[] = []
    let next = 0
    await Promise.all(
      Array.from({ length: 32 }, async () => {
        while (next < count) {
          next++
          sessions.push(await initializeSession(pool, barbican.target))
        }
      }),
    )
    const openSeconds = (performance.now() - started) / 1000
    // The sessions must still work: one call on the first and the last.
    for (const [i, session] of [sessions[0], sessions.at(-1)].entries()) {
      checkEcho(await toolCall(pool, barbican.target, session, i + 1, 'alive'), i + 1, 'alive')
    }
    await settle()
    const after = rssBytes(barbican.pid)
    return {
      sessions: sessions.length,
      rssBeforeMb: before / 2 ** 20,
      rssAfterMb: after / 2 ** 20,
      bytesPerSession: Math.round((after - before) / sessions.length),
      openSeconds,
    }
  } finally {
    await pool.destroy()
    await barbican.stop()
  }
}

/** Latency of a merged `tools/list` answered from the catalog cache. */
export interface ToolsListResult {
  readonly upstreams: number
  readonly toolsPerUpstream: number
  readonly tools: number
  readonly samples: number
  readonly p50Ms: number
  readonly p99Ms: number
}

/**
 * Builds an in-process gateway over `upstreams` SDK servers of `tools` tools each, warms the
 * catalog, then times a client's complete `tools/list` (every page) from the session receiving
 * each request to its reply serialised for the wire.
 */
export async function mergedToolsList(
  upstreams: number,
  tools: number,
  samples: number,
): Promise<ToolsListResult> {
  const build = (u: number) => () => {
    const server = new McpServer({ name: `up${u}`, version: '1.0.0' })
    for (let t = 0; t < tools; t++) {
      server.registerTool(
        `tool_${t}`,
        { description: `Tool ${t} of upstream ${u}.`, inputSchema: { text: z.string() } },
        async ({ text }) => ({ content: [{ type: 'text', text }] }),
      )
    }
    return server
  }
  const names = Array.from({ length: upstreams }, (_, u) => `up${u}`)
  const gateway = new Gateway(
    {
      upstreams: names.map((name, u) => inProcessUpstream(name, build(u))),
      servers: [serverPlan('default', names, rules('always'))],
      clientRequestTimeoutMs: 5_000,
    },
    silentLogger,
  )
  await gateway.start()
  const client = new CaptureTransport()
  gateway.connect(client, { kind: 'stdio', server: 'default' })
  try {
    await client.request({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'b', version: '1' },
      },
    })
    client.onmessage?.({ jsonrpc: '2.0', method: 'notifications/initialized' })
    // Lists may come in pages: a sample is the whole walk, following nextCursor to the end.
    let id = 1
    const listAll = async (): Promise<number> => {
      let count = 0
      let cursor: string | undefined
      do {
        const params = cursor === undefined ? {} : { cursor }
        const reply = (await client.request({
          jsonrpc: '2.0',
          id: id++,
          method: 'tools/list',
          params,
        })) as {
          result?: { tools?: unknown[]; nextCursor?: string }
        }
        JSON.stringify(reply)
        count += reply.result?.tools?.length ?? 0
        cursor = reply.result?.nextCursor
      } while (cursor !== undefined)
      return count
    }
    const count = await listAll()
    if (count !== upstreams * tools) throw new Error(`tools/list listed ${count} tools`)
    const times: number[] = []
    for (let i = 0; i < samples; i++) {
      const started = performance.now()
      await listAll()
      times.push(performance.now() - started)
    }
    times.sort((a, b) => a - b)
    return {
      upstreams,
      toolsPerUpstream: tools,
      tools: count,
      samples,
      p50Ms: quantile(times, 0.5),
      p99Ms: quantile(times, 0.99),
    }
  } finally {
    await gateway.stop()
  }
}

/** A client-side transport that hands messages straight to the session and back, uncopied. */
class CaptureTransport implements Transport {
  onmessage?: (message: JsonRpcMessage) => void
  onclose?: () => void
  #waiting = new Map<unknown, (message: JsonRpcMessage) => void>()

  async start(): Promise<void> {}
  async close(): Promise<void> {
    this.onclose?.()
  }
  async send(message: JsonRpcMessage): Promise<void> {
    if ('id' in message && !('method' in message)) {
      this.#waiting.get(message.id)?.(message)
      this.#waiting.delete(message.id)
    }
  }
  request(message: JsonRpcMessage & { id: number }): Promise<JsonRpcMessage> {
    return new Promise((resolve) => {
      this.#waiting.set(message.id, resolve)
      this.onmessage?.(message)
    })
  }
}

/** Cold start: milliseconds from spawn to the first successful `tools/call`, per program. */
export interface ColdStartResult {
  readonly runs: number
  /** The stdio fixture alone: spawn to its first `tools/call` answer over stdio. */
  readonly upstreamStdioMs: number
  /** The HTTP fixture alone: spawn to its first `tools/call` answer over HTTP. */
  readonly upstreamHttpMs: number
  readonly barbicanStdioMs: number
  /** Barbican started against an HTTP upstream that is already running. */
  readonly barbicanHttpMs: number
  readonly mcpProxyMs: number
  readonly supergatewayMs: number
}

/** Median cold starts over `runs` starts of each program. */
export async function coldStart(runs: number): Promise<ColdStartResult> {
  const series: Record<keyof Omit<ColdStartResult, 'runs'>, number[]> = {
    upstreamStdioMs: [],
    upstreamHttpMs: [],
    barbicanStdioMs: [],
    barbicanHttpMs: [],
    mcpProxyMs: [],
    supergatewayMs: [],
  }
  const timed = async (key: keyof typeof series, start: () => Promise<Running>) => {
    const running = await start()
    series[key].push(running.readyMs)
    await running.stop()
  }
  for (let i = 0; i < runs; i++) {
    series.upstreamStdioMs.push(await stdioFixtureStart())
    const upstream = await startDirect(true)
    series.upstreamHttpMs.push(upstream.readyMs)
    await timed('barbicanHttpMs', () =>
      startBarbican('barbican-http', { url: upstream.target.url }),
    )
    await upstream.stop()
    await timed('barbicanStdioMs', () => startBarbican('barbican-stdio', { stdio: true }))
    await timed('mcpProxyMs', startMcpProxy)
    await timed('supergatewayMs', startSupergateway)
  }
  const median = (values: number[]) =>
    quantile(
      [...values].sort((a, b) => a - b),
      0.5,
    )
  return {
    runs,
    upstreamStdioMs: median(series.upstreamStdioMs),
    upstreamHttpMs: median(series.upstreamHttpMs),
    barbicanStdioMs: median(series.barbicanStdioMs),
    barbicanHttpMs: median(series.barbicanHttpMs),
    mcpProxyMs: median(series.mcpProxyMs),
    supergatewayMs: median(series.supergatewayMs),
  }
}

/** Spawns the stdio fixture and times its first `tools/call` answer. */
async function stdioFixtureStart(): Promise<number> {
  const started = performance.now()
  const child = spawn(NODE, [FIXTURE, 'stdio'], { stdio: ['pipe', 'pipe', 'ignore'] })
  try {
    return await new Promise<number>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('stdio fixture did not answer')), 30_000)
      let buffer = ''
      child.stdout.on('data', (chunk: Buffer) => {
        buffer += chunk.toString('utf8')
        for (const line of buffer.split('\n').slice(0, -1)) {
          const message = JSON.parse(line) as { id?: unknown }
          if (message.id === 2) {
            clearTimeout(timer)
            checkEcho(message, 2, 'ready')
            resolve(performance.now() - started)
          }
        }
        buffer = buffer.slice(buffer.lastIndexOf('\n') + 1)
      })
      const lines = [
        {
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'b', version: '1' },
          },
        },
        { jsonrpc: '2.0', method: 'notifications/initialized' },
        {
          jsonrpc: '2.0',
          id: 2,
          method: 'tools/call',
          params: { name: 'echo', arguments: { text: 'ready' } },
        },
      ]
      child.stdin.write(lines.map((l) => `${JSON.stringify(l)}\n`).join(''))
    })
  } finally {
    child.kill()
  }
}

/** Gives the process a moment to finish its background work before memory is read. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 1_000))
}
