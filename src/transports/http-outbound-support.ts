/**
 * Pieces shared by the HTTP-based outbound transports (Streamable HTTP and legacy HTTP+SSE):
 * header merging, deadlines, and the mapping of HTTP failures to Barbican errors and
 * to the JSON-RPC error response a waiting caller receives instead of hanging.
 */

import {
  BarbicanError,
  type ErrorCode,
  errorData,
  jsonRpcCodeOf,
  upstreamClosed,
} from '../common/errors.ts'
import type { JsonLimits } from '../protocol/json-limits.ts'
import {
  errorResponse,
  isErrorResponse,
  type JsonRpcErrorResponse,
  type JsonRpcId,
} from '../protocol/jsonrpc.ts'
import { decodePayload } from './outbound-payload.ts'

export type HeaderSet = Readonly<Record<string, string>> | undefined

/**
 * Merges header sets, later ones winning, with lower-cased names: HTTP names are
 * case-insensitive, and two spellings of one name must never both reach the wire.
 */
export function mergeHeaders(...sets: readonly HeaderSet[]): Record<string, string> {
  const merged: Record<string, string> = {}
  for (const set of sets) {
    if (!set) continue
    for (const [name, value] of Object.entries(set)) merged[name.toLowerCase()] = value
  }
  return merged
}

/** One response header's value (the first, when repeated). */
export function headerValue(
  headers: Readonly<Record<string, string | string[] | undefined>>,
  name: string,
): string | undefined {
  const value = headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** The Barbican error for an HTTP error status from an upstream. */
export function httpStatusError(status: number, upstream: string): BarbicanError {
  let code: ErrorCode = 'ERR_UPSTREAM_PROTOCOL'
  if (status === 408 || status === 504) code = 'ERR_UPSTREAM_TIMEOUT'
  else if (status === 401 || status === 403 || status === 429 || status >= 500) {
    code = 'ERR_UPSTREAM_UNAVAILABLE'
  }
  return new BarbicanError(code, `Upstream "${upstream}" answered HTTP ${status}`, {
    data: { httpStatus: status },
  })
}

/** The Barbican error for a request that never got an HTTP answer. */
export function networkError(err: unknown, upstream: string): BarbicanError {
  if (err instanceof BarbicanError) return err
  // undici refuses header values with CR, LF or NUL before anything is sent.
  if ((err as { code?: string } | undefined)?.code === 'UND_ERR_INVALID_ARG') {
    return new BarbicanError(
      'ERR_INVALID_PARAMS',
      `Invalid HTTP request: ${(err as Error).message}`,
      {
        cause: err,
      },
    )
  }
  return new BarbicanError(
    'ERR_UPSTREAM_UNAVAILABLE',
    `Upstream "${upstream}" is unreachable: ${networkReason(err)}`,
    { cause: err },
  )
}

/** The socket error's facts, on the error itself (node:http) or its cause (fetch). */
interface SocketFault {
  readonly code?: string
  readonly hostname?: string
  readonly address?: string
  readonly port?: number
  readonly cause?: unknown
}

/**
 * What went wrong on the network, in words: a name DNS cannot resolve is named as such (it is
 * not a refusal: nothing was reached), a refused connection names the address.
 */
export function networkReason(err: unknown): string {
  const outer = (err ?? {}) as SocketFault
  const fault = outer.code === undefined && outer.cause ? (outer.cause as SocketFault) : outer
  const code = fault.code
  const host = fault.hostname !== undefined ? `"${fault.hostname}"` : 'the host name'
  const where = fault.address === undefined ? '' : ` at ${fault.address}:${fault.port ?? ''}`
  switch (code) {
    case 'ENOTFOUND':
      return `cannot resolve ${host}: DNS has no such name (ENOTFOUND)`
    case 'EAI_AGAIN':
      return `cannot resolve ${host}: DNS did not answer (EAI_AGAIN); check the network and DNS server`
    case 'ECONNREFUSED':
      return `connection refused${where}: nothing listens there (ECONNREFUSED)`
    case 'ETIMEDOUT':
    case 'ECONNRESET':
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${code}${where}`
    case undefined:
      return err instanceof Error ? err.message : String(err)
    default:
      return code
  }
}

/**
 * The JSON-RPC error a server put in the body of an HTTP refusal, when it is meant for request
 * `id` (or id-less, as servers send when they could not read the id). Servers explain refusals
 * this way (2026-07-28 answers an unknown method with 404 and -32601), and the explanation is
 * worth more to the caller than a generic HTTP error.
 */
export function refusalReply(
  text: string,
  id: JsonRpcId | undefined,
  limits: JsonLimits,
): JsonRpcErrorResponse | undefined {
  const trimmed = text.trimStart()
  if (!trimmed.startsWith('{')) return undefined
  return decodePayload(trimmed, limits)
    .messages.filter(isErrorResponse)
    .find((m) => m.id === null || m.id === id)
}

/** Why an exchange was aborted: its deadline passed, its caller cancelled it, or a close. */
export type AbortReason = 'timeout' | 'cancel' | 'close'

/** What reading an exchange needs from its deadline: why it ended, and a signal that says when. */
export interface ExchangeDeadline {
  readonly reason: AbortReason | undefined
  readonly signal: AbortSignal
}

/** The error for an exchange that was aborted, by its deadline, its caller or a close. */
export function abortError(
  deadline: ExchangeDeadline,
  upstream: string,
): BarbicanError | undefined {
  switch (deadline.reason) {
    case 'timeout':
      return new BarbicanError('ERR_UPSTREAM_TIMEOUT', `Upstream "${upstream}" timed out`)
    case 'cancel':
      return new BarbicanError('ERR_CANCELLED', 'Request cancelled')
    case 'close':
      return upstreamClosed(upstream, 'connection is closed')
    default:
      return undefined
  }
}

/** The JSON-RPC error response a caller waiting on request `id` receives for `error`. */
export function failureResponse(id: JsonRpcId, error: BarbicanError): JsonRpcErrorResponse {
  return errorResponse(id, jsonRpcCodeOf(error.code), error.message, errorData(error))
}

/** A timer plus an AbortController: the one way every HTTP exchange here is bounded. */
export class Deadline implements ExchangeDeadline {
  readonly controller = new AbortController()
  /** Why the exchange was aborted, once it was. */
  reason: AbortReason | undefined
  #timer: NodeJS.Timeout | undefined
  #unlink: (() => void) | undefined

  constructor(timeoutMs: number | undefined, signal?: AbortSignal) {
    if (timeoutMs !== undefined && timeoutMs > 0) {
      this.#timer = setTimeout(() => this.abort('timeout'), timeoutMs)
    }
    if (signal) {
      if (signal.aborted) this.abort('cancel')
      const onAbort = () => this.abort('cancel')
      signal.addEventListener('abort', onAbort, { once: true })
      this.#unlink = () => signal.removeEventListener('abort', onAbort)
    }
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  abort(reason: AbortReason): void {
    if (this.reason !== undefined) return
    this.reason = reason
    this.dispose()
    this.controller.abort(new Error(`aborted: ${reason}`))
  }

  /** Stops the timer and forgets the caller's signal; the exchange is over. */
  dispose(): void {
    clearTimeout(this.#timer)
    this.#timer = undefined
    this.#unlink?.()
    this.#unlink = undefined
  }
}
