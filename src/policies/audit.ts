/**
 * The `audit` policy, outermost in the chain: every call that reaches routing becomes one audit
 * record (who, where, what, a digest of the arguments, outcome, latency, what authorize decided,
 * pin state, trace id), and the reply waits until that record is durable. When the record cannot
 * be written the caller gets ERR_AUDIT_UNAVAILABLE instead of the reply: an action that leaves
 * no trace is refused (fail closed).
 */
import { hash } from 'node:crypto'
import type { AuditSink } from '../audit/audit-log.ts'
import type { CallEvent, Outcome } from '../audit/record.ts'
import { BarbicanError, toBarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { canonicalJson } from '../trust/canonical.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'

export interface AuditPolicyOptions {
  readonly sink: AuditSink
  /** Keep the (redacted) arguments themselves, not only their digest. Default: off. */
  readonly rawArguments?: boolean | undefined
}

/** Argument keys whose values never reach the log, even with `rawArguments`. */
const SECRET_KEY =
  /pass(word|phrase)?|secret|token|api[-_]?key|authori[sz]ation|cookie|credential|private/i
/** Longest string kept from raw arguments. */
const MAX_STRING = 1024

export function auditPolicy(options: AuditPolicyOptions): Policy {
  return {
    name: 'audit',
    async handle(call: Call, next: Next): Promise<Reply> {
      const started = performance.now()
      let reply: Reply | undefined
      let failure: unknown
      try {
        reply = await next(call)
      } catch (err) {
        failure = err
      }
      const latencyMs = Math.round((performance.now() - started) * 1000) / 1000
      try {
        await options.sink.record(callEvent(call, reply, failure, latencyMs, options))
      } catch (err) {
        call.log.error('audit record not written; reply withheld', { error: err })
        throw new BarbicanError(
          'ERR_AUDIT_UNAVAILABLE',
          'The audit log cannot record this call, so its result is withheld',
          { cause: err },
        )
      }
      if (failure !== undefined) throw failure
      return reply!
    },
  }
}

function callEvent(
  call: Call,
  reply: Reply | undefined,
  failure: unknown,
  latencyMs: number,
  options: AuditPolicyOptions,
): CallEvent {
  const { request, identity, route } = call
  const params = request.params
  let outcome: Outcome = 'ok'
  let errorCode: string | undefined
  if (failure !== undefined) {
    errorCode = toBarbicanError(failure).code
    outcome = errorCode === 'ERR_POLICY_DENIED' ? 'denied' : 'error'
  } else if (reply?.kind === 'error') {
    outcome = 'error'
    errorCode = String(reply.code)
  } else if (reply?.result.isError === true) {
    // The tool ran and reported a failure: an error, as the call line and /metrics say.
    outcome = 'error'
    errorCode = 'tool_error'
  }
  const decision = call.decisions?.find((d) => d.policy === 'authorize')
  const args = params?.arguments
  return {
    type: 'call',
    callId: call.id,
    subject: identity.subject,
    tenant: identity.tenant,
    client: identity.client,
    transport: call.transport,
    server: call.server,
    upstream: route.kind === 'unicast' ? route.upstream : undefined,
    method: request.method,
    target: targetOf(params),
    argsDigest: args === undefined ? undefined : argsDigest(args),
    args: options.rawArguments && args !== undefined ? redact(args) : undefined,
    outcome,
    errorCode,
    latencyMs,
    decision: decision?.effect ?? 'none',
    rule: decision?.rule,
    confirmation: call.decisions?.find((d) => d.policy === 'confirm')?.answer,
    pinState: errorCode === 'ERR_TOOL_QUARANTINED' ? 'quarantined' : undefined,
    traceId: traceIdOf(params),
    redactions: call.decisions?.find((d) => d.redactions !== undefined)?.redactions,
  }
}

/**
 * SHA-256 (hex) of the canonical JSON of the arguments: the same digest as trust's
 * `canonicalHash`, with one-shot `crypto.hash` (no Hash object per call).
 */
function argsDigest(args: unknown): string {
  return hash('sha256', canonicalJson(args), 'hex')
}

/** The tool or prompt name, or the resource URI, the request names. */
function targetOf(params: JsonObject | undefined): string | undefined {
  if (typeof params?.name === 'string') return params.name
  if (typeof params?.uri === 'string') return params.uri
  const ref = params?.ref
  if (isPlainObject(ref)) {
    if (typeof ref.name === 'string') return ref.name
    if (typeof ref.uri === 'string') return ref.uri
  }
  return undefined
}

/** The trace id of a W3C traceparent in `_meta` (version 00: `00-TRACEID-SPANID-FLAGS`). */
function traceIdOf(params: JsonObject | undefined): string | undefined {
  const meta = params?._meta
  if (!isPlainObject(meta) || typeof meta.traceparent !== 'string') return undefined
  const match = /^[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}$/.exec(meta.traceparent)
  return match && match[1] !== '0'.repeat(32) ? match[1] : undefined
}

/** The arguments with secret-looking keys masked and long strings cut. */
export function redact(value: unknown, depth = 0): unknown {
  if (depth > 32) return '[TOO DEEP]'
  if (typeof value === 'string') {
    return value.length > MAX_STRING ? `${value.slice(0, MAX_STRING)}…[CUT]` : value
  }
  if (Array.isArray(value)) return value.map((v) => redact(v, depth + 1))
  if (isPlainObject(value)) {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(value)) {
      out[k] = SECRET_KEY.test(k) ? '[REDACTED]' : redact(v, depth + 1)
    }
    return out
  }
  return value
}
