import assert from 'node:assert/strict'
import { registerHooks } from 'node:module'
import { describe, test } from 'node:test'
import { silentLogger } from './log.ts'

// Every module specifier resolved from here on, to show what tracing off never loads.
const resolved: string[] = []
registerHooks({
  resolve(specifier, context, next) {
    resolved.push(specifier)
    return next(specifier, context)
  },
})
const loadsOtel = () =>
  resolved.filter((s) => s.includes('opentelemetry') || s.includes('otel-sdk'))

const tracing = await import('./tracing.ts')

describe('tracing off', () => {
  test('no OTEL_* variable, none empty, or a switch-off: not requested', () => {
    assert.equal(tracing.tracingRequested({}), false)
    assert.equal(tracing.tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: ' ' }), false)
    assert.equal(tracing.tracingRequested({ OTEL_SERVICE_NAME: 'x' }), false)
    const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
    assert.equal(tracing.tracingRequested({ ...endpoint, OTEL_TRACES_EXPORTER: 'none' }), false)
    assert.equal(tracing.tracingRequested({ ...endpoint, OTEL_SDK_DISABLED: 'TRUE' }), false)
  })

  test('an endpoint, a traces endpoint or OTEL_TRACES_EXPORTER=otlp: requested', () => {
    assert.equal(tracing.tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' }), true)
    assert.equal(
      tracing.tracingRequested({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }),
      true,
    )
    assert.equal(tracing.tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' }), true)
  })

  test('a gateway serving calls without OTEL_* never loads the SDK, nor even the API', async () => {
    const { startServer } = await import('../app/server.ts')
    const { parseConfigText } = await import('../config/load.ts')
    assert.equal(await tracing.startTracing({}, silentLogger), false)
    assert.equal(tracing.tracingOn(), false)
    const config = parseConfigText(
      JSON.stringify({
        listen: '127.0.0.1:0',
        upstreams: { gone: { url: 'http://127.0.0.1:9/' } },
        // prom-client loads @opentelemetry/api for itself (exemplars): off, so that what is
        // checked here is tracing's own loading.
        metrics: { enabled: false },
      }),
    ).config
    const server = await startServer(config, silentLogger)
    try {
      const res = await fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
        },
        body: JSON.stringify({
          jsonrpc: '2.0',
          id: 1,
          method: 'initialize',
          params: {
            protocolVersion: '2025-11-25',
            capabilities: {},
            clientInfo: { name: 'off', version: '1.0.0' },
          },
        }),
      })
      assert.equal(res.status, 200, await res.text())
    } finally {
      await server.stop()
    }
    assert.ok(resolved.length > 50, 'the hook saw the gateway load')
    assert.deepEqual(loadsOtel(), [])
    assert.equal(
      tracing.startClientSpan({
        method: 'ping',
        id: 1,
        params: undefined,
        sessionId: undefined,
        protocolVersion: undefined,
        transport: 'stdio',
        headers: undefined,
      }),
      undefined,
    )
  })
})

describe('settings tracing cannot honour stop the start, precisely', () => {
  const endpoint = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }
  const cases: [Record<string, string>, RegExp][] = [
    [{ OTEL_TRACES_EXPORTER: 'zipkin' }, /OTEL_TRACES_EXPORTER=zipkin is not supported/],
    [{ ...endpoint, OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, /PROTOCOL=grpc is not supported/],
    [{ ...endpoint, OTEL_TRACES_SAMPLER: 'sometimes' }, /OTEL_TRACES_SAMPLER=sometimes/],
    [
      { ...endpoint, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '2' },
      /OTEL_TRACES_SAMPLER_ARG=2 is not a ratio/,
    ],
    [{ ...endpoint, OTEL_BSP_SCHEDULE_DELAY: '-5' }, /OTEL_BSP_SCHEDULE_DELAY=-5 is not/],
  ]
  for (const [env, message] of cases) {
    test(JSON.stringify(env), async () => {
      await assert.rejects(tracing.startTracing(env, silentLogger), (err: unknown) => {
        assert.equal((err as { code?: string }).code, 'ERR_CONFIG_INVALID')
        assert.match((err as Error).message, message)
        return true
      })
      assert.equal(tracing.tracingOn(), false)
    })
  }

  test('a sampler that keeps nothing still continues and passes on the trace', async () => {
    assert.equal(
      await tracing.startTracing({ ...endpoint, OTEL_TRACES_SAMPLER: 'always_off' }, silentLogger),
      true,
    )
    try {
      const span = tracing.startClientSpan({
        method: 'tools/call',
        id: 3,
        params: {
          name: 'x',
          _meta: { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
        },
        sessionId: undefined,
        protocolVersion: '2026-07-28',
        transport: 'streamable-http-stateless',
        headers: undefined,
      })
      assert.ok(span)
      assert.equal(span.isRecording(), false)
      assert.match(
        tracing.traceparentOf(span),
        /^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/,
      )
      tracing.endSpan(span)
    } finally {
      await tracing.stopTracing()
    }
  })
})

describe('parseTraceparent', () => {
  test('takes version 00 with non-zero ids and keeps only the sampled flag', () => {
    assert.deepEqual(
      tracing.parseTraceparent(' 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03 '),
      {
        traceId: '4bf92f3577b34da6a3ce929d0e0e4736',
        spanId: '00f067aa0ba902b7',
        traceFlags: 1,
        isRemote: true,
      },
    )
  })
  test('refuses what W3C trace context calls invalid', () => {
    for (const bad of [
      undefined,
      '',
      '01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01',
      '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01',
      '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7',
    ]) {
      assert.equal(tracing.parseTraceparent(bad), undefined, String(bad))
    }
  })
})

describe('replyOutcome', () => {
  test('an error reply: its JSON-RPC code as error type and status code', () => {
    assert.deepEqual(tracing.replyOutcome({ kind: 'error', code: -32602 }), {
      rpcCode: -32602,
      errorType: '-32602',
    })
  })
  test('a tool result with isError: tool_error; any other result: no error', () => {
    assert.deepEqual(
      tracing.replyOutcome({ kind: 'result', result: { isError: true, content: [] } }),
      { errorType: 'tool_error' },
    )
    assert.equal(tracing.replyOutcome({ kind: 'result', result: { content: [] } }), undefined)
    assert.equal(tracing.replyOutcome({ kind: 'result', result: { isError: 'yes' } }), undefined)
  })
})
