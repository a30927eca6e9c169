/**
 * One log line per client request, and the ids that tie every line about a request together:
 * the JSON-RPC request id and a W3C trace id. The trace id is the caller's (HTTP `traceparent`,
 * or `params._meta.traceparent`) when it sent one, so the gateway's lines join the caller's
 * trace; otherwise a fresh one, so lines about one request still share an id.
 *
 * Calls (`tools/call`, `prompts/get`, `resources/read`, `tasks/*`) are logged at `info`; lists,
 * pings and handshakes at `debug`. Both under the component `call` (`log.levels.call`).
 */
import { randomFillSync } from 'node:crypto'
import type { JsonRpcId } from '../protocol/jsonrpc.ts'
import type { Logger, LogLevel } from '../telemetry/log.ts'

/** version-traceid-parentid-flags, with a trace id that is not all zeros (W3C Trace Context). */
const TRACEPARENT = /^[\da-f]{2}-([\da-f]{32})-[\da-f]{16}-[\da-f]{2}$/

/** The caller's trace id, from the `traceparent` header or `params._meta`, else a fresh one. */
export function traceIdOf(
  headers: Readonly<Record<string, string | string[] | undefined>> | undefined,
  params: unknown,
): string {
  const header = headers?.traceparent
  const fromHeader = validTraceId(Array.isArray(header) ? header[0] : header)
  if (fromHeader) return fromHeader
  const meta = (params as { _meta?: { traceparent?: unknown } } | undefined)?._meta
  return validTraceId(meta?.traceparent) ?? freshTraceId()
}

/** Random bytes for 256 fresh trace ids, drawn at once: one hex string per request (ADR 123). */
const TRACE_ID_POOL = Buffer.allocUnsafe(16 * 256)
let traceIdOffset = TRACE_ID_POOL.length

/** 16 random bytes in hex: a quarter of randomUUID() with its dashes removed, measured. */
function freshTraceId(): string {
  if (traceIdOffset === TRACE_ID_POOL.length) {
    randomFillSync(TRACE_ID_POOL)
    traceIdOffset = 0
  }
  const id = TRACE_ID_POOL.toString('hex', traceIdOffset, traceIdOffset + 16)
  traceIdOffset += 16
  return id
}

function validTraceId(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined
  const id = TRACEPARENT.exec(value.trim().toLowerCase())?.[1]
  return id && !/^0+$/.test(id) ? id : undefined
}

/** Methods whose line is at `info`: the ones that do something on an upstream. */
const CALLS = new Set(['tools/call', 'prompts/get', 'resources/read', 'completion/complete'])

export function callLevel(method: string): LogLevel {
  return CALLS.has(method) || method.startsWith('tasks/') ? 'info' : 'debug'
}

export interface CallFacts {
  readonly method: string
  readonly params: unknown
  /** The upstream the request went to (absent: answered by Barbican or merged). */
  readonly upstream?: string | undefined
  /** `ok`, or the stable error code of the failure. */
  readonly outcome: string
  readonly startedAt: number
}

/**
 * The outcome a reply gives its call line: `ok`; `error CODE` for a JSON-RPC error; `error
 * tool_error` for a tool that ran and reported a failure (`isError: true`), as /metrics counts it.
 */
export function callOutcome(
  reply:
    | { readonly kind: 'error'; readonly code: number }
    | { readonly kind: 'result'; readonly result: { readonly isError?: unknown } },
): string {
  if (reply.kind === 'error') return `error ${reply.code}`
  return reply.result.isError === true ? 'error tool_error' : 'ok'
}

/** `log` is the request's logger (it carries requestId and traceId). */
export function logCall(log: Logger, facts: CallFacts): void {
  const params = facts.params as { name?: unknown; uri?: unknown } | undefined
  const target =
    typeof params?.name === 'string'
      ? params.name
      : typeof params?.uri === 'string'
        ? params.uri
        : undefined
  const ms = Math.round((performance.now() - facts.startedAt) * 10) / 10
  // Built in the line's key order; no spread copies (the line is made on every call).
  const fields: Record<string, unknown> = { method: facts.method }
  if (target !== undefined) fields.target = target
  if (facts.upstream !== undefined) fields.upstream = facts.upstream
  fields.outcome = facts.outcome
  fields.ms = ms
  const message = `${facts.method}${target === undefined ? '' : ` ${target}`} ${facts.outcome} in ${ms} ms`
  log.child({ part: 'call' })[callLevel(facts.method)](message, fields)
}

/** The fields that tie a line to a request. */
export function requestFields(id: JsonRpcId, traceId: string): Record<string, unknown> {
  return { requestId: id, traceId }
}
