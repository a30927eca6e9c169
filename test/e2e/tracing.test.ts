/**
 * OpenTelemetry traces end to end: the gateway, switched on by the standard OTEL_* variables,
 * exports over OTLP/HTTP (JSON) to a receiver this test starts. Each client request is a SERVER
 * span continuing the client's trace (from the HTTP `traceparent` header or from
 * `params._meta.traceparent`), each upstream request a CLIENT span under it, and the upstream (the
 * official SDK server behind a recording listener) receives that CLIENT span's context in both
 * places, so its own spans would join the same trace. Played for a legacy session, a stateless
 * 2026-07-28 call, a refused call, and with auth on (the context stamp passes the span on).
 */
import assert from 'node:assert/strict'
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'
import { after, before, describe, test } from 'node:test'
import { toNodeHandler } from '@modelcontextprotocol/node'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { createMcpHandler, McpServer } from '@modelcontextprotocol/server'
import { type RunningServer, startServer } from '../../src/app/server.ts'
import { generateApiKey } from '../../src/auth/api-keys.ts'
import { parseConfigText } from '../../src/config/load.ts'
import { silentLogger } from '../../src/telemetry/log.ts'
import { startTracing, stopTracing } from '../../src/telemetry/tracing.ts'
import { type RecordingUpstream, startRecordingUpstream } from '../fixtures/auth-upstream.ts'
import {
  OTLP_KIND,
  OTLP_STATUS_ERROR,
  type OtlpReceiver,
  type ReceivedSpan,
  startOtlpReceiver,
} from '../fixtures/otlp-receiver.ts'
import { postStatelessToolCall } from '../support/stateless.ts'

type Json = Record<string, unknown>

/** A fresh trace id per test, so each finds its own spans among everything exported. */
const traceId = () => Buffer.from(crypto.getRandomValues(new Uint8Array(16))).toString('hex')
const CLIENT_SPAN = '00f067aa0ba902b7'

function traceparent(trace: string, span = CLIENT_SPAN): string {
  return `00-${trace}-${span}-01`
}

/** The one span of `trace` of this kind (fails when there are none or several). */
function only(spans: readonly ReceivedSpan[], trace: string, kind: number): ReceivedSpan {
  const found = spans.filter((s) => s.traceId === trace && s.kind === kind)
  assert.equal(found.length, 1, `spans of kind ${kind}: ${JSON.stringify(found)}`)
  return found[0]!
}

const hasBoth = (trace: string) => (spans: readonly ReceivedSpan[]) =>
  spans.some((s) => s.traceId === trace && s.kind === OTLP_KIND.server) &&
  spans.some((s) => s.traceId === trace && s.kind === OTLP_KIND.client)

/** The tools/call the recording upstream received with this trace id, and what it saw. */
function upstreamCall(upstream: RecordingUpstream, trace: string) {
  const call = upstream.requests.find(
    (r) =>
      (r.body as { method?: string } | undefined)?.method === 'tools/call' &&
      String(r.headers.traceparent).includes(trace),
  )
  assert.ok(call, `the upstream received no tools/call in trace ${trace}`)
  const params = (call.body as { params: { _meta?: Json } }).params
  return { header: call.headers.traceparent, meta: params._meta ?? {} }
}

async function connect(url: string, headers: Record<string, string>) {
  const client = new Client({ name: 'traced', version: '1.0.0' })
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers },
  })
  await client.connect(transport)
  return { client, transport }
}

/** One stateless 2026-07-28 tools/call over plain HTTP; returns the JSON-RPC response. */
async function statelessCall(
  url: string,
  tool: string,
  meta: Json,
  headers: Record<string, string> = {},
): Promise<Json> {
  const { status, text, final } = await postStatelessToolCall(url, {
    name: tool,
    id: 7,
    meta,
    headers,
  })
  assert.ok(final, `no response (HTTP ${status}): ${text}`)
  return final
}

let receiver: OtlpReceiver
const saved = { ...process.env }

before(async () => {
  receiver = await startOtlpReceiver()
  // What an operator sets; the exporter reads the same environment.
  Object.assign(process.env, {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_SERVICE_NAME: 'barbican-under-test',
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  })
  assert.equal(await startTracing(process.env, silentLogger), true)
})
after(async () => {
  await stopTracing()
  await receiver?.close()
  process.env = saved
})

describe('OpenTelemetry traces over OTLP/HTTP', () => {
  let upstream: RecordingUpstream
  let server: RunningServer
  let secured: RunningServer
  const alice = generateApiKey()

  before(async () => {
    upstream = await startRecordingUpstream()
    const upstreams = { rec: { url: upstream.url, transport: 'streamable-http' } }
    server = await startServer(
      parseConfigText(JSON.stringify({ listen: '127.0.0.1:0', upstreams })).config,
      silentLogger,
    )
    const withAuth = {
      listen: '127.0.0.1:0',
      upstreams,
      auth: { apiKeys: { keys: [{ id: 'alice', hash: alice.hash, subject: 'alice' }] } },
    }
    secured = await startServer(parseConfigText(JSON.stringify(withAuth)).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    await secured?.stop()
    await upstream?.close()
  })

  test('a legacy session: client traceparent → gateway span → upstream span → upstream', async () => {
    const trace = traceId()
    const { client, transport } = await connect(`${server.url}/mcp`, {
      traceparent: traceparent(trace),
    })
    let sessionId: string | undefined
    try {
      sessionId = transport.sessionId
      const listed = await client.listTools()
      const tool = listed.tools.find((t) => t.name.endsWith('whoami'))!.name
      await client.callTool({ name: tool, arguments: {} })
      await receiver.waitFor((spans) =>
        spans.some(
          (s) =>
            s.traceId === trace &&
            s.attributes['mcp.method.name'] === 'tools/call' &&
            s.kind === OTLP_KIND.client,
        ),
      )
      const calls = receiver.spans.filter(
        (s) => s.traceId === trace && s.attributes['mcp.method.name'] === 'tools/call',
      )
      const gateway = calls.find((s) => s.kind === OTLP_KIND.server)!
      const hop = calls.find((s) => s.kind === OTLP_KIND.client)!
      assert.ok(gateway && hop, JSON.stringify(calls))

      assert.equal(gateway.parentSpanId, CLIENT_SPAN, 'the gateway span continues the client span')
      assert.equal(gateway.name, `tools/call ${tool}`)
      assert.equal(gateway.service, 'barbican-under-test')
      assert.equal(gateway.attributes['gen_ai.tool.name'], tool)
      assert.equal(gateway.attributes['gen_ai.operation.name'], 'execute_tool')
      assert.equal(gateway.attributes['mcp.session.id'], sessionId)
      assert.ok(sessionId, 'a legacy Streamable HTTP session has an id')
      assert.equal(gateway.attributes['mcp.protocol.version'], '2025-11-25')
      assert.equal(typeof gateway.attributes['jsonrpc.request.id'], 'string')
      assert.equal(gateway.attributes['network.transport'], 'tcp')
      assert.equal(gateway.attributes['error.type'], undefined)

      assert.equal(hop.parentSpanId, gateway.spanId, 'the upstream span is a child of it')
      assert.equal(hop.name, 'tools/call whoami', 'named with the upstream’s own tool name')
      assert.equal(hop.attributes['gen_ai.tool.name'], 'whoami')
      assert.equal(hop.attributes['barbican.upstream'], 'rec')

      const seen = upstreamCall(upstream, trace)
      assert.equal(seen.header, traceparent(trace, hop.spanId), 'the traceparent header')
      assert.equal(seen.meta.traceparent, traceparent(trace, hop.spanId), 'and _meta.traceparent')

      // The session's other requests are spans of the same trace (the header of each POST).
      const listSpan = receiver.spans.find(
        (s) => s.traceId === trace && s.attributes['mcp.method.name'] === 'tools/list',
      )
      assert.equal(listSpan?.kind, OTLP_KIND.server)
      assert.ok(receiver.exports.every((e) => e.contentType === 'application/json'))
    } finally {
      await client.close()
    }
  })

  test('a stateless 2026-07-28 call continues the trace of its _meta.traceparent', async () => {
    const trace = traceId()
    const other = traceId()
    const listed = await statelessCall(`${server.url}/mcp`, 'whoami', {})
    assert.equal(listed.error, undefined, JSON.stringify(listed.error))
    // `_meta` is the MCP convention, per message: it wins over the header of the HTTP request.
    const reply = await statelessCall(
      `${server.url}/mcp`,
      'whoami',
      { traceparent: traceparent(trace, 'a1b2c3d4e5f60718') },
      { traceparent: traceparent(other) },
    )
    assert.equal(reply.error, undefined, JSON.stringify(reply.error))
    await receiver.waitFor(hasBoth(trace))
    const gateway = only(receiver.spans, trace, OTLP_KIND.server)
    const hop = only(receiver.spans, trace, OTLP_KIND.client)
    assert.equal(gateway.parentSpanId, 'a1b2c3d4e5f60718')
    assert.equal(gateway.attributes['mcp.protocol.version'], '2026-07-28')
    assert.equal(gateway.attributes['mcp.session.id'], undefined, 'stateless: no session')
    assert.equal(gateway.attributes['jsonrpc.request.id'], '7')
    assert.equal(hop.parentSpanId, gateway.spanId)
    const seen = upstreamCall(upstream, trace)
    assert.equal(seen.header, traceparent(trace, hop.spanId))
    assert.equal(seen.meta.traceparent, traceparent(trace, hop.spanId))
    assert.ok(!receiver.spans.some((s) => s.traceId === other), 'the header trace is not used')
  })

  test('a refused call is an error span with its error type and JSON-RPC code', async () => {
    const trace = traceId()
    const reply = await statelessCall(`${server.url}/mcp`, 'no_such_tool', {
      traceparent: traceparent(trace),
    })
    assert.ok(reply.error)
    await receiver.waitFor((spans) => spans.some((s) => s.traceId === trace))
    const gateway = only(receiver.spans, trace, OTLP_KIND.server)
    assert.equal(gateway.statusCode, OTLP_STATUS_ERROR)
    assert.equal(gateway.attributes['error.type'], 'ERR_ROUTE_UNKNOWN')
    assert.equal(
      gateway.attributes['rpc.response.status_code'],
      String((reply.error as { code: number }).code),
    )
    assert.ok(!receiver.spans.some((s) => s.traceId === trace && s.kind === OTLP_KIND.client))
  })

  test('with auth on, the context stamp passes the upstream span on, not a span of its own', async () => {
    const trace = traceId()
    const reply = await statelessCall(
      `${secured.url}/mcp`,
      'whoami',
      { traceparent: traceparent(trace) },
      { authorization: `Bearer ${alice.key}` },
    )
    assert.equal(reply.error, undefined, JSON.stringify(reply.error))
    await receiver.waitFor(hasBoth(trace))
    const hop = only(receiver.spans, trace, OTLP_KIND.client)
    const seen = upstreamCall(upstream, trace)
    assert.equal(seen.header, traceparent(trace, hop.spanId))
    assert.equal(seen.meta.traceparent, traceparent(trace, hop.spanId))
    const context = seen.meta['dev.barbican/context'] as { traceparent: string; user: string }
    assert.equal(context.user, 'alice')
    assert.equal(context.traceparent, traceparent(trace, hop.spanId))
  })
})

describe('OpenTelemetry traces to a 2026-07-28 upstream', () => {
  let server: RunningServer
  let http: ReturnType<typeof createServer>
  /** The headers of every HTTP request the upstream (the official SDK v2 server) received. */
  const heard: IncomingHttpHeaders[] = []

  before(async () => {
    const handler = createMcpHandler(() => {
      const mcp = new McpServer({ name: 'modern', version: '1.0.0' })
      mcp.registerTool('pong', { description: 'Answers pong' }, async () => ({
        content: [{ type: 'text', text: 'pong' }],
      }))
      return mcp
    })
    const listener = toNodeHandler(handler)
    http = createServer((req, res) => {
      heard.push(req.headers)
      void listener(req as never, res as never)
    })
    await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
    const { port } = http.address() as AddressInfo
    const config = {
      listen: '127.0.0.1:0',
      upstreams: { modern: { url: `http://127.0.0.1:${port}/mcp`, transport: 'streamable-http' } },
    }
    server = await startServer(parseConfigText(JSON.stringify(config)).config, silentLogger)
  })
  after(async () => {
    await server?.stop()
    http?.closeAllConnections()
    await new Promise((resolve) => http?.close(resolve))
  })

  test('the traceparent header travels beside the 2026 routing headers', async () => {
    const trace = traceId()
    const { client } = await connect(`${server.url}/mcp`, { traceparent: traceparent(trace) })
    try {
      const tool = (await client.listTools()).tools.find((t) => t.name.endsWith('pong'))!.name
      await client.callTool({ name: tool, arguments: {} })
    } finally {
      await client.close()
    }
    assert.equal(server.gateway.upstreams.get('modern')?.era, 'modern')
    await receiver.waitFor((spans) =>
      spans.some(
        (s) =>
          s.traceId === trace &&
          s.kind === OTLP_KIND.client &&
          s.attributes['mcp.method.name'] === 'tools/call',
      ),
    )
    const hop = receiver.spans.find(
      (s) =>
        s.traceId === trace &&
        s.kind === OTLP_KIND.client &&
        s.attributes['mcp.method.name'] === 'tools/call',
    )!
    const call = heard.find((h) => h['mcp-method'] === 'tools/call')
    assert.ok(call, 'the upstream received the 2026 routing headers')
    assert.equal(call['mcp-name'], 'pong')
    assert.equal(call.traceparent, traceparent(trace, hop.spanId))
  })
})
