/**
 * Every limit of the inbound HTTP listener in one options object, with documented defaults and
 * validation, so an operator can see and tune each bound in one place.
 */
import { createHash } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import { BarbicanError } from '../common/errors.ts'
import { DEFAULT_ALLOWED_HOSTS, DEFAULT_LIMITS, LOOPBACK_ORIGINS } from '../config/defaults.ts'
import { DEFAULT_LISTEN } from '../config/listen.ts'
import { DEFAULT_JSON_LIMITS, type JsonLimits } from '../protocol/json-limits.ts'

/**
 * The caller identity a session is bound to when no authentication layer supplies one: a hash of
 * the `Authorization` header, so a session opened with one token cannot be used with another.
 */
export function authorizationIdentity(req: IncomingMessage): string {
  const auth = req.headers.authorization
  if (auth === undefined || auth === '') return 'anonymous'
  return `authorization:${createHash('sha256').update(auth).digest('hex')}`
}

/** Every limit and switch of the HTTP listener. Defaults in DEFAULT_HTTP_INBOUND_OPTIONS. */
export interface HttpInboundOptions {
  /** Interface to bind. Default `127.0.0.1` (loopback only). */
  readonly host: string
  /** TCP port; 0 picks a free one. Default 7300. */
  readonly port: number
  /** Accepted `Host` values (see http-guard.ts). Default: loopback names, any port. */
  readonly allowedHosts: readonly string[]
  /** Accepted `Origin` values when the header is present. Default: loopback origins. */
  readonly allowedOrigins: readonly string[]
  /** Largest request body; larger gets 413. Default 4 MiB. */
  readonly maxBodyBytes: number
  /** Structural limits on each JSON-RPC message. Default DEFAULT_JSON_LIMITS. */
  readonly jsonLimits: JsonLimits
  /** Time to receive all request headers. Default 10 s. */
  readonly headersTimeoutMs: number
  /** Time to receive a whole request (headers and body). Default 30 s. */
  readonly requestTimeoutMs: number
  /** Idle time before a keep-alive connection is closed. Default 5 s. */
  readonly keepAliveTimeoutMs: number
  /** Events kept per SSE stream for `Last-Event-ID` resumption. Default 100. */
  readonly sseReplayEvents: number
  /** Bytes kept per SSE stream for resumption. Default 256 KiB. */
  readonly sseReplayBytes: number
  /** Finished POST streams kept resumable per session. Default 4. */
  readonly sseRetainedStreams: number
  /** Bytes queued for a slow SSE reader before it is disconnected. Default 1 MiB. */
  readonly sseMaxQueuedBytes: number
  /** Interval of SSE keep-alive comments; 0 disables. Default 25 s. */
  readonly sseKeepAliveMs: number
  /**
   * Live sessions per transport (Streamable HTTP sessions, legacy SSE streams, WebSocket
   * connections). Beyond, the oldest idle session is evicted; 503 only when none is idle.
   * Default 1000 (`limits.maxSessions`).
   */
  readonly maxSessions: number
  /**
   * Live sessions per transport of one identity (without inbound auth: one client address).
   * Beyond, that caller's oldest idle session is evicted; 429 only when none is idle. Default 100.
   */
  readonly maxSessionsPerIdentity: number
  /** A legacy session with no request or open stream for this long is closed. Default 30 min. */
  readonly sessionIdleTimeoutMs: number
  /** Largest WebSocket message; larger closes with 1009. Default: maxBodyBytes. */
  readonly wsMaxPayloadBytes: number
  /** Bytes buffered for a slow WebSocket reader before it is dropped. Default 1 MiB. */
  readonly wsMaxBufferedBytes: number
  /** Ping interval that detects dead WebSocket peers; 0 disables. Default 30 s. */
  readonly wsPingIntervalMs: number
  /** Default deadline of `close()`. Default 10 s. */
  readonly shutdownDeadlineMs: number
  /**
   * The identity a session is bound to. Default: a hash of the `Authorization` header. An auth
   * layer supplies the verified subject here.
   */
  readonly identityOf: (req: IncomingMessage) => string
}

const MIB = 1024 * 1024

/**
 * The documented defaults: loopback only, bounded everything. What the configuration also sets
 * (`listen`, `limits`, `security`) takes config's default, defined once in src/config/.
 */
export const DEFAULT_HTTP_INBOUND_OPTIONS: HttpInboundOptions = Object.freeze({
  host: DEFAULT_LISTEN.host,
  port: DEFAULT_LISTEN.port,
  allowedHosts: DEFAULT_ALLOWED_HOSTS,
  allowedOrigins: LOOPBACK_ORIGINS,
  maxBodyBytes: DEFAULT_LIMITS.maxBodyBytes,
  jsonLimits: DEFAULT_JSON_LIMITS,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  keepAliveTimeoutMs: 5_000,
  sseReplayEvents: 100,
  sseReplayBytes: 256 * 1024,
  sseRetainedStreams: 4,
  sseMaxQueuedBytes: MIB,
  sseKeepAliveMs: 25_000,
  maxSessions: DEFAULT_LIMITS.maxSessions,
  maxSessionsPerIdentity: DEFAULT_LIMITS.maxSessionsPerIdentity,
  sessionIdleTimeoutMs: DEFAULT_LIMITS.sessionIdleTimeoutMs,
  wsMaxPayloadBytes: DEFAULT_LIMITS.maxBodyBytes,
  wsMaxBufferedBytes: MIB,
  wsPingIntervalMs: 30_000,
  shutdownDeadlineMs: 10_000,
  identityOf: authorizationIdentity,
})

/** Options where 0 means "off" (or, for the port, "pick one"). */
const ZERO_ALLOWED = new Set([
  'port',
  'sseKeepAliveMs',
  'wsPingIntervalMs',
  'sessionIdleTimeoutMs',
  'shutdownDeadlineMs',
])

/** Merges overrides onto the defaults and checks every number; throws ERR_CONFIG_INVALID. */
export function resolveHttpInboundOptions(
  overrides: Partial<HttpInboundOptions>,
): HttpInboundOptions {
  const merged: HttpInboundOptions = { ...DEFAULT_HTTP_INBOUND_OPTIONS, ...overrides }
  if (overrides.wsMaxPayloadBytes === undefined && overrides.maxBodyBytes !== undefined) {
    Object.assign(merged, { wsMaxPayloadBytes: overrides.maxBodyBytes })
  }
  for (const [key, value] of Object.entries(merged)) {
    if (typeof value !== 'number') continue
    const zeroAllowed = ZERO_ALLOWED.has(key)
    if (!Number.isInteger(value) || value < 0 || (value === 0 && !zeroAllowed)) {
      throw new BarbicanError('ERR_CONFIG_INVALID', `HTTP option ${key} must be a positive integer`)
    }
  }
  if (merged.headersTimeoutMs > merged.requestTimeoutMs) {
    throw new BarbicanError(
      'ERR_CONFIG_INVALID',
      'headersTimeoutMs must not exceed requestTimeoutMs',
    )
  }
  return merged
}
