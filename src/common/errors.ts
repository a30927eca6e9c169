/**
 * Barbican's own errors: a stable code for programs and tests, a message for people, and one
 * table that turns each into the JSON-RPC error a client receives. Errors from upstreams are not
 * wrapped: they travel as neutral error replies and reach the client unchanged.
 */
import { INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND } from '../protocol/jsonrpc.ts'

export type ErrorCode =
  | 'ERR_CONFIG_INVALID'
  | 'ERR_METHOD_NOT_IN_REVISION'
  | 'ERR_METHOD_UNKNOWN'
  | 'ERR_INVALID_PARAMS'
  | 'ERR_ROUTE_UNKNOWN'
  | 'ERR_POLICY_DENIED'
  | 'ERR_POLICY_CHAIN'
  | 'ERR_RATE_LIMITED'
  | 'ERR_RESULT_INVALID'
  | 'ERR_RESULT_TOO_LARGE'
  | 'ERR_TOOL_QUARANTINED'
  | 'ERR_UPSTREAM_UNAVAILABLE'
  | 'ERR_UPSTREAM_TIMEOUT'
  | 'ERR_UPSTREAM_CLOSED'
  | 'ERR_UPSTREAM_PROTOCOL'
  | 'ERR_CANCELLED'
  | 'ERR_SHUTTING_DOWN'
  | 'ERR_LAUNCH_REFUSED'
  | 'ERR_AUDIT_UNAVAILABLE'
  | 'ERR_STORE_UNAVAILABLE'
  | 'ERR_META_TOOL_ARGUMENTS'
  | 'ERR_META_TOOL_NESTED'
  | 'ERR_CODE_LIMIT'
  | 'ERR_CODE_FAILED'
  | 'ERR_CODE_UNAVAILABLE'
  | 'ERR_TENANT_UNKNOWN'
  | 'ERR_UPSTREAM_OUTPUT_LIMIT'
  | 'ERR_CLUSTER_UNAVAILABLE'
  | 'ERR_INTERNAL'

export class BarbicanError extends Error {
  override readonly name = 'BarbicanError'
  readonly code: ErrorCode
  readonly data: unknown

  constructor(code: ErrorCode, message: string, options?: { data?: unknown; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause })
    this.code = code
    this.data = options?.data
  }
}

/** JSON-RPC code for each Barbican error code; custom codes stay in the implementation range. */
const JSON_RPC_CODES: Readonly<Record<ErrorCode, number>> = {
  ERR_CONFIG_INVALID: INTERNAL_ERROR,
  ERR_METHOD_NOT_IN_REVISION: METHOD_NOT_FOUND,
  ERR_METHOD_UNKNOWN: METHOD_NOT_FOUND,
  ERR_INVALID_PARAMS: INVALID_PARAMS,
  ERR_ROUTE_UNKNOWN: INVALID_PARAMS,
  ERR_POLICY_DENIED: -32001,
  ERR_POLICY_CHAIN: INTERNAL_ERROR,
  // -32029 reads as HTTP 429, which a refused 2026-07-28 request also gets.
  ERR_RATE_LIMITED: -32029,
  ERR_RESULT_INVALID: -32030,
  ERR_RESULT_TOO_LARGE: -32031,
  ERR_TOOL_QUARANTINED: -32004,
  ERR_UPSTREAM_UNAVAILABLE: -32005,
  ERR_UPSTREAM_TIMEOUT: -32006,
  ERR_UPSTREAM_CLOSED: -32007,
  ERR_UPSTREAM_PROTOCOL: -32008,
  ERR_CANCELLED: -32009,
  ERR_SHUTTING_DOWN: -32010,
  ERR_LAUNCH_REFUSED: -32011,
  ERR_AUDIT_UNAVAILABLE: -32012,
  // The shared store (PostgreSQL, Redis) cannot be used: unreachable, or a schema of another version.
  ERR_STORE_UNAVAILABLE: -32018,
  // search_tools / call_tool (tools.mode: search, ADR 070).
  ERR_META_TOOL_ARGUMENTS: -32027,
  ERR_META_TOOL_NESTED: -32028,
  // Code mode (run_code): a limit stopped the program, the program failed, or no isolate.
  ERR_CODE_LIMIT: -32032,
  ERR_CODE_FAILED: -32033,
  ERR_CODE_UNAVAILABLE: -32034,
  // A credential names a tenant this gateway does not configure (HTTP 403, docs/tenants.md).
  ERR_TENANT_UNKNOWN: -32023,
  ERR_UPSTREAM_OUTPUT_LIMIT: -32013,
  /** The replicas' shared coordination (Redis) cannot be reached: docs/decisions/058. */
  ERR_CLUSTER_UNAVAILABLE: -32019,
  ERR_INTERNAL: INTERNAL_ERROR,
}

export function jsonRpcCodeOf(code: ErrorCode): number {
  return JSON_RPC_CODES[code]
}

/** The `data` every Barbican error carries, so clients can branch on the stable code. */
export function errorData(err: BarbicanError): Record<string, unknown> {
  const data: Record<string, unknown> = { barbicanCode: err.code }
  if (err.data !== undefined) data.details = err.data
  return data
}

/**
 * The connection to an upstream is gone or going. `reason` says how, after the upstream's name
 * ("exited", "is not connected", …), so every site words it the same way.
 */
export function upstreamClosed(
  upstream: string,
  reason: string,
  options?: { data?: unknown; cause?: unknown },
): BarbicanError {
  return new BarbicanError('ERR_UPSTREAM_CLOSED', `Upstream "${upstream}" ${reason}`, options)
}

export function toBarbicanError(err: unknown): BarbicanError {
  if (err instanceof BarbicanError) return err
  return new BarbicanError('ERR_INTERNAL', 'Internal error', { cause: err })
}
