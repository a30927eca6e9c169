/**
 * The gateway's own work per `tools/call`, without sockets, pipes or another process: a session
 * (decode, route, policy chain, relay, encode) and the upstream client (id rewriting, timeout,
 * cancellation wiring) in front of an in-process echo upstream that answers on the next
 * microtask. What it reports is the JavaScript cost Barbican adds to every call; the I/O cost
 * (HTTP parsing, syscalls) comes on top and is what the process benchmarks measure.
 *
 * Usage: node [--cpu-prof] bench/hot-path.ts [calls] [concurrency] [--metrics] [--stateless]
 * (`--metrics`: with Prometheus metrics on, as `barbican serve` runs by default; `--stateless`:
 * every call a 2026-07-28 request, a session of its own that closes as its reply is sent, as
 * over stateless Streamable HTTP; otherwise every call goes through one legacy session).
 *
 * With the OTEL_* variables that switch tracing on (docs/observability.md), every call is traced
 * and exported as in `barbican serve`: the figure then includes the spans and their export.
 */

import type { Identity } from '../src/auth/identity.ts'
import { Gateway } from '../src/gateway/gateway.ts'
import type { Policy } from '../src/policies/policy.ts'
import type { JsonRpcMessage, JsonRpcRequest } from '../src/protocol/jsonrpc.ts'
import { jsonLogger, type Logger, silentLogger } from '../src/telemetry/log.ts'
import { startTracing, stopTracing } from '../src/telemetry/tracing.ts'
import type { Transport } from '../src/transports/transport.ts'
import type { TrustGuard } from '../src/trust/trust-guard.ts'
import { rules, serverPlan } from '../test/support/plans.ts'
import { MODERN_META, StatelessEnd } from '../test/support/stateless-end.ts'
import { checkEcho } from './mcp-http.ts'

/** An upstream that answers initialize, tools/list and echo calls at once, copying nothing. */
class EchoUpstream implements Transport {
  onmessage?: (message: JsonRpcMessage) => void
  onclose?: () => void
  async start(): Promise<void> {}
  async close(): Promise<void> {
    this.onclose?.()
  }
  async send(message: JsonRpcMessage): Promise<void> {
    if (!('method' in message) || !('id' in message)) return
    const reply = answer(message)
    queueMicrotask(() => this.onmessage?.(reply))
  }
}

function answer(request: JsonRpcRequest): JsonRpcMessage {
  const { id } = request
  switch (request.method) {
    case 'initialize':
      return {
        jsonrpc: '2.0',
        id,
        result: {
          protocolVersion: '2025-11-25',
          capabilities: { tools: {} },
          serverInfo: { name: 'echo', version: '1.0.0' },
        },
      }
    case 'tools/list':
      return {
        jsonrpc: '2.0',
        id,
        result: {
          tools: [
            {
              name: 'echo',
              inputSchema: { type: 'object', properties: { text: { type: 'string' } } },
            },
          ],
        },
      }
    case 'tools/call': {
      const args = (request.params?.arguments ?? {}) as { text?: string }
      return {
        jsonrpc: '2.0',
        id,
        result: { content: [{ type: 'text', text: `echo: ${args.text}` }] },
      }
    }
    default:
      return { jsonrpc: '2.0', id, result: {} }
  }
}

/** The client side: hands messages to the session and resolves replies by id, uncopied. */
class ClientEnd implements Transport {
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
  request(message: JsonRpcRequest): Promise<JsonRpcMessage> {
    return new Promise((resolve) => {
      this.#waiting.set(message.id, resolve)
      this.onmessage?.(message)
    })
  }
}

/** CPU microseconds per call of the in-process path, and calls per second. */
export async function hotPath(
  calls: number,
  concurrency: number,
  options: {
    metrics?: boolean
    policies?: readonly Policy[]
    identity?: Identity
    /** Every call a 2026-07-28 request on a session of its own (`--stateless`). */
    stateless?: boolean
    /** The gateway's logger (default: silent); with `info`, a call line per call. */
    log?: Logger
    /** Pins and quarantine checked on every call, as `barbican serve` does by default. */
    trust?: TrustGuard
  } = {},
): Promise<{ calls: number; cpuUsPerCall: number; callsPerSecond: number }> {
  const gateway = new Gateway(
    {
      upstreams: [
        {
          name: 'echo',
          lazy: false,
          requestTimeoutMs: 60_000,
          createTransport: () => new EchoUpstream(),
        },
      ],
      servers: [serverPlan('default', ['echo'], rules('on-conflict'))],
      clientRequestTimeoutMs: 5_000,
      ...(options.metrics ? { metrics: { maxTools: 100 } } : {}),
      ...(options.policies ? { policies: options.policies } : {}),
      ...(options.trust ? { trust: options.trust } : {}),
    },
    options.log ?? silentLogger,
  )
  await gateway.start()
  const client = new ClientEnd()
  gateway.connect(client, {
    kind: 'streamable-http',
    server: 'default',
    ...(options.identity ? { identity: options.identity } : {}),
  })
  try {
    await client.request({
      jsonrpc: '2.0',
      id: 'init',
      method: 'initialize',
      params: {
        protocolVersion: '2025-11-25',
        capabilities: {},
        clientInfo: { name: 'b', version: '1' },
      },
    })
    client.onmessage?.({ jsonrpc: '2.0', method: 'notifications/initialized' })
    const statelessCall = (id: number, text: string) => {
      const end = new StatelessEnd()
      gateway.connect(end, {
        kind: 'streamable-http-stateless',
        server: 'default',
        ...(options.identity ? { identity: options.identity } : {}),
      })
      return end.request({
        jsonrpc: '2.0',
        id,
        method: 'tools/call',
        params: { name: 'echo', arguments: { text }, _meta: MODERN_META },
      })
    }
    let next = 0
    const run = async (total: number) => {
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < total) {
            const id = ++next
            const text = `t${id}`
            const reply = options.stateless
              ? await statelessCall(id, text)
              : await client.request({
                  jsonrpc: '2.0',
                  id,
                  method: 'tools/call',
                  params: { name: 'echo', arguments: { text } },
                })
            checkEcho(reply, id, text)
          }
        }),
      )
    }
    await run(Math.min(calls, 20_000)) // warm-up: let the JIT settle
    next = 0
    const cpu0 = process.cpuUsage()
    const t0 = performance.now()
    await run(calls)
    const elapsed = performance.now() - t0
    const cpu = process.cpuUsage(cpu0)
    return {
      calls,
      cpuUsPerCall: (cpu.user + cpu.system) / calls,
      callsPerSecond: (calls * 1000) / elapsed,
    }
  } finally {
    await gateway.stop()
  }
}

if (import.meta.main) {
  const args = process.argv.slice(2)
  const metrics = args.includes('--metrics')
  const stateless = args.includes('--stateless')
  const [callsArg, concurrencyArg] = args.filter((a) => !a.startsWith('--'))
  // Warnings (spans dropped from a full queue, failed exports) show: the figure must cover them all.
  const tracing = await startTracing(process.env, jsonLogger({ level: 'warn' }))
  const result = await hotPath(Number(callsArg ?? 100_000), Number(concurrencyArg ?? 16), {
    metrics,
    stateless,
  })
  await stopTracing()
  process.stdout.write(`${JSON.stringify({ ...result, tracing })}\n`)
}
