/**
 * OpenTelemetry traces (docs/observability.md, ADR 027): one SERVER span per client request and
 * one CLIENT span per upstream request under it, named and described by the MCP semantic
 * conventions. Tracing is on only when the standard `OTEL_*` variables ask for it
 * (`tracingRequested`); then `startTracing` loads the SDK (otel-sdk.ts, a dynamic import, so a
 * gateway without tracing never reads a line of it). Every function here starts with
 * `if (active === undefined)`: that test is the whole cost of tracing when it is off.
 */
import type { Span, SpanContext } from '@opentelemetry/api'
import type { JsonObject, JsonRpcId } from '../protocol/jsonrpc.ts'
import type { Logger } from './log.ts'
import type { TracingRuntime } from './otel-sdk.ts'

/** The span kinds and status codes of `@opentelemetry/api`, fixed by the OTel specification. */
const SPAN_KIND_SERVER = 1
const SPAN_KIND_CLIENT = 2
const STATUS_ERROR = 2

let active: TracingRuntime | undefined
/** Where a failed flush at shutdown is reported. */
let activeLog: Logger | undefined

/** Whether spans are being made. */
export function tracingOn(): boolean {
  return active !== undefined
}

/**
 * Whether the environment asks for traces: an OTLP endpoint is set (INTERFACE.md: "when an
 * endpoint is set, traces are exported with no other switch"), or `OTEL_TRACES_EXPORTER=otlp`
 * names the exporter outright; `OTEL_SDK_DISABLED=true` and `OTEL_TRACES_EXPORTER=none` win.
 */
export function tracingRequested(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  const exporter = env.OTEL_TRACES_EXPORTER?.trim().toLowerCase()
  if (exporter === 'none') return false
  if (exporter !== undefined && exporter !== '') return true
  return Boolean(
    env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim(),
  )
}

/**
 * Starts tracing when the environment asks for it: loads the SDK and the OTLP exporter. Throws a
 * BarbicanError (ERR_CONFIG_INVALID) for a setting it cannot honour (an exporter other than
 * `otlp`, the gRPC protocol, a bad sampler), so a gateway never runs without the traces its
 * operator asked for. Returns whether tracing is on.
 */
export async function startTracing(env: NodeJS.ProcessEnv, log: Logger): Promise<boolean> {
  if (active !== undefined || !tracingRequested(env)) return active !== undefined
  const { createTracingRuntime } = await import('./otel-sdk.ts')
  active = createTracingRuntime(env, log)
  activeLog = log
  return true
}

/**
 * Flushes and stops tracing (graceful shutdown); a no-op when it is off. A collector that is
 * down or slow loses the last spans, never the shutdown: the failure is logged, not thrown.
 */
export async function stopTracing(): Promise<void> {
  const runtime = active
  if (runtime === undefined) return
  active = undefined
  try {
    await runtime.shutdown()
  } catch (error) {
    activeLog?.warn('the last spans could not be exported', { error })
  }
}

/** What the session knows about one client request, for its span. */
export interface ClientRequestFacts {
  readonly method: string
  readonly id: JsonRpcId
  readonly params: JsonObject | undefined
  /** The `Mcp-Session-Id` of a legacy HTTP session; absent for stdio and stateless requests. */
  readonly sessionId: string | undefined
  readonly protocolVersion: string | undefined
  /** The inbound transport kind (ConnectionInfo.kind). */
  readonly transport: string
  /** Lower-cased headers of the HTTP request that carried the message, if any. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>> | undefined
}

/**
 * The span of one client request, or undefined when tracing is off. Its parent is the client's
 * `params._meta.traceparent` (the MCP convention, per message) or else the HTTP `traceparent`
 * header of the request that carried it.
 */
export function startClientSpan(facts: ClientRequestFacts): Span | undefined {
  if (active === undefined) return undefined
  const meta = facts.params?._meta
  const fromMeta =
    typeof meta === 'object' && meta !== null && !Array.isArray(meta)
      ? (meta as JsonObject).traceparent
      : undefined
  const header = facts.headers?.traceparent
  const parent = parseTraceparent(
    typeof fromMeta === 'string' ? fromMeta : typeof header === 'string' ? header : undefined,
  )
  const attributes: Record<string, string | number> = {
    'mcp.method.name': facts.method,
    'jsonrpc.request.id': String(facts.id),
    'network.transport': facts.transport === 'stdio' ? 'pipe' : 'tcp',
  }
  if (facts.transport !== 'stdio') attributes['network.protocol.name'] = 'http'
  if (facts.sessionId !== undefined) attributes['mcp.session.id'] = facts.sessionId
  if (facts.protocolVersion !== undefined) {
    attributes['mcp.protocol.version'] = facts.protocolVersion
  }
  const target = describeTarget(facts.method, facts.params, attributes)
  return startSpan(
    active,
    target === undefined ? facts.method : `${facts.method} ${target}`,
    SPAN_KIND_SERVER,
    attributes,
    parent,
  )
}

/** What one upstream request is, for its span. */
export interface UpstreamRequestFacts {
  readonly upstream: string
  readonly method: string
  /** The params as the upstream gets them (its own tool or prompt name). */
  readonly params: JsonObject | undefined
}

/**
 * The span of one request to an upstream, a child of `parent` (the client request's span), or
 * undefined when tracing is off.
 */
export function startUpstreamSpan(
  facts: UpstreamRequestFacts,
  parent: Span | undefined,
): Span | undefined {
  if (active === undefined) return undefined
  const attributes: Record<string, string | number> = {
    'mcp.method.name': facts.method,
    'barbican.upstream': facts.upstream,
  }
  const target = describeTarget(facts.method, facts.params, attributes)
  return startSpan(
    active,
    target === undefined ? facts.method : `${facts.method} ${target}`,
    SPAN_KIND_CLIENT,
    attributes,
    parent,
  )
}

/**
 * Starts a span and then gives it its attributes, in one pass. Handed to `startSpan`, the SDK
 * copies and checks the attributes once for the sampler and once more into the span (a fifth of
 * a traced call's span work, measured); none of the samplers the `OTEL_TRACES_SAMPLER` values
 * name reads attributes, so they are set on the started span only. A span the sampler dropped
 * ignores them at no cost.
 */
function startSpan(
  runtime: TracingRuntime,
  name: string,
  kind: number,
  attributes: Record<string, string | number>,
  parent: SpanContext | Span | undefined,
): Span {
  const span = runtime.tracer.startSpan(name, { kind }, runtime.parentContext(parent))
  if (span.isRecording()) span.setAttributes(attributes)
  return span
}

/** How a request ended, for its span: a JSON-RPC error, a tool error, or success. */
export interface SpanOutcome {
  /** The JSON-RPC error code of an error reply. */
  readonly rpcCode?: number | undefined
  /** A low-cardinality error type: Barbican's error code, the JSON-RPC code, or `tool_error`. */
  readonly errorType?: string | undefined
}

/** Ends a span with its outcome (a no-op for undefined). */
export function endSpan(span: Span | undefined, outcome?: SpanOutcome): void {
  if (span === undefined) return
  if (outcome?.rpcCode !== undefined) {
    span.setAttribute('rpc.response.status_code', String(outcome.rpcCode))
  }
  if (outcome?.errorType !== undefined) {
    span.setAttribute('error.type', outcome.errorType)
    span.setStatus({ code: STATUS_ERROR })
  }
  span.end()
}

/** The outcome of a reply as a span records it. */
export function replyOutcome(reply: {
  readonly kind: string
  readonly code?: number
  readonly isError?: unknown
  readonly result?: unknown
}): SpanOutcome | undefined {
  if (reply.kind === 'error' && reply.code !== undefined) {
    return { rpcCode: reply.code, errorType: String(reply.code) }
  }
  const result = reply.result as { isError?: unknown } | undefined
  if (result?.isError === true) return { errorType: 'tool_error' }
  return undefined
}

/** The W3C `traceparent` that makes a receiver's spans children of `span`. */
export function traceparentOf(span: Span): string {
  const { traceId, spanId, traceFlags } = span.spanContext()
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`
}

/**
 * Fills the target attributes of `method` and returns the span name's target: the tool or
 * prompt name (low cardinality); a resource URI is an attribute, never part of the name.
 */
function describeTarget(
  method: string,
  params: JsonObject | undefined,
  attributes: Record<string, string | number>,
): string | undefined {
  const name = params?.name
  switch (method) {
    case 'tools/call':
      attributes['gen_ai.operation.name'] = 'execute_tool'
      if (typeof name === 'string') {
        attributes['gen_ai.tool.name'] = name
        return name
      }
      return undefined
    case 'prompts/get':
      if (typeof name === 'string') {
        attributes['gen_ai.prompt.name'] = name
        return name
      }
      return undefined
    case 'resources/read':
    case 'resources/subscribe':
    case 'resources/unsubscribe':
      if (typeof params?.uri === 'string') attributes['mcp.resource.uri'] = params.uri
      return undefined
    default:
      return undefined
  }
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/
const ALL_ZERO = /^0+$/

/** A remote parent from a W3C `traceparent`, or undefined if it is absent or invalid. */
export function parseTraceparent(traceparent: string | undefined): SpanContext | undefined {
  const match = traceparent === undefined ? null : TRACEPARENT.exec(traceparent.trim())
  if (!match || ALL_ZERO.test(match[1]!) || ALL_ZERO.test(match[2]!)) return undefined
  return {
    traceId: match[1]!,
    spanId: match[2]!,
    traceFlags: Number.parseInt(match[3]!, 16) & 1,
    isRemote: true,
  }
}
