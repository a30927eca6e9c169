/**
 * How Barbican learns what an upstream is, on a fresh connection: the era probe
 * (`server/discover`, bridge/probe.ts) for a server of unknown era, then either the 2026-07-28
 * discover result or the legacy `initialize` handshake, run on Barbican's own behalf. Each
 * step ends in the same `UpstreamInfo`, so the rest of the gateway never asks which era it was.
 */
import {
  MODERN_UPSTREAM_REVISION,
  modernHeaders,
  type UpstreamEnvelope,
  withEnvelope,
} from '../bridge/envelope.ts'
import { type EraVerdict, probeEra } from '../bridge/probe.ts'
import { BarbicanError, type ErrorCode } from '../common/errors.ts'
import { UNSUPPORTED_PROTOCOL_VERSION } from '../protocol/error-codes.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { isRevision, LATEST_LEGACY_REVISION, type Revision } from '../protocol/revisions.ts'
import type { Logger } from '../telemetry/log.ts'
import type { RequestOptions, UpstreamClient } from './upstream-client.ts'

/** What an upstream advertised about itself, whichever era it speaks. */
export interface UpstreamInfo {
  readonly protocolVersion: Revision
  readonly capabilities: JsonObject
  readonly serverInfo: JsonObject
  readonly instructions?: string
}

/** What Barbican declares to upstreams about itself, and how long it waits for them. */
export interface HandshakeOptions {
  /** The upstream's configured name, for error messages. */
  readonly name: string
  readonly log: Logger
  readonly clientInfo: JsonObject
  readonly clientCapabilities: JsonObject
  /** Longest `initialize` may take (the client's own default when absent). */
  readonly connectTimeoutMs?: number | undefined
  /** How long the `server/discover` probe waits (bridge/probe.ts default when absent). */
  readonly probeTimeoutMs?: number | undefined
}

/** Barbican's own envelope, for requests made on nobody's behalf (lists, discover, listen). */
export function ownEnvelope(options: HandshakeOptions): UpstreamEnvelope {
  return { clientCapabilities: options.clientCapabilities, clientInfo: options.clientInfo }
}

/**
 * Probes a server of unknown era with `server/discover` and leaves `client` set to the revision
 * of the verdict. Some legacy servers hang up on the probe: the caller checks `verdict.closed`
 * (or `client.closed`) and continues on a fresh connection then.
 */
export async function probeUpstream(
  client: UpstreamClient,
  options: HandshakeOptions,
): Promise<EraVerdict> {
  client.setRevision(MODERN_UPSTREAM_REVISION)
  const verdict = await probeEra(
    (timeoutMs) =>
      client.request('server/discover', withEnvelope(undefined, ownEnvelope(options)), {
        timeoutMs,
        send: { headers: modernHeaders('server/discover', undefined) } as RequestOptions['send'],
      }),
    options.probeTimeoutMs,
  )
  // A legacy server answers the probe with "method not found" (-32601): expected, not news.
  const routine = verdict.era === 'legacy' && verdict.reason.includes('-32601')
  options.log[routine ? 'debug' : 'info']('upstream era', {
    era: verdict.era,
    ...(verdict.era === 'legacy' ? { reason: verdict.reason } : {}),
  })
  if (verdict.era === 'legacy') client.setRevision(LATEST_LEGACY_REVISION)
  return verdict
}

/** A 2026-07-28 upstream's info, from its `server/discover` result. */
export function modernInfo(verdict: EraVerdict & { era: 'modern' }): UpstreamInfo {
  const d = verdict.discover
  return {
    protocolVersion: MODERN_UPSTREAM_REVISION,
    capabilities: isPlainObject(d.capabilities) ? d.capabilities : {},
    serverInfo: verdict.serverInfo,
    ...(typeof d.instructions === 'string' ? { instructions: d.instructions } : {}),
  }
}

/** The legacy handshake on `client`, on Barbican's behalf: initialize, then initialized. */
export async function initializeLegacy(
  client: UpstreamClient,
  options: HandshakeOptions,
): Promise<UpstreamInfo> {
  const reply = await client.request(
    'initialize',
    {
      protocolVersion: LATEST_LEGACY_REVISION,
      capabilities: options.clientCapabilities,
      clientInfo: options.clientInfo,
    },
    { timeoutMs: options.connectTimeoutMs },
  )
  if (reply.kind === 'error') {
    // Barbican's own transport failed (unreachable, closed, timed out): nothing refused.
    const own = transportFailure(reply.data)
    if (own !== undefined) throw new BarbicanError(own, reply.message)
    throw new BarbicanError(
      'ERR_UPSTREAM_PROTOCOL',
      `Upstream "${options.name}" refused initialize: ${reply.message} (${reply.code})`,
      // A 2026-07-28 server that took the probe it answered late for its era (a slow start):
      // the caller probes again rather than give up on a server that speaks a revision we do.
      reply.code === UNSUPPORTED_PROTOCOL_VERSION ? { data: { modernRefusal: true } } : undefined,
    )
  }
  const r = reply.result
  const version = r.protocolVersion
  if (!isRevision(version)) {
    throw new BarbicanError(
      'ERR_UPSTREAM_PROTOCOL',
      `Upstream "${options.name}" answered initialize with unsupported protocol version ${JSON.stringify(version)}`,
    )
  }
  client.setRevision(version)
  const info: UpstreamInfo = {
    protocolVersion: version,
    capabilities: isPlainObject(r.capabilities) ? r.capabilities : {},
    serverInfo: isPlainObject(r.serverInfo) ? r.serverInfo : {},
    ...(typeof r.instructions === 'string' ? { instructions: r.instructions } : {}),
  }
  await client.notify('notifications/initialized')
  return info
}

/** Whether `err` is initialize refused by a server serving 2026-07-28 on that connection. */
export function isModernRefusal(err: unknown): boolean {
  return err instanceof BarbicanError && isPlainObject(err.data) && err.data.modernRefusal === true
}

/** Codes of the error replies Barbican's own transports make when the upstream is not reached. */
const TRANSPORT_FAILURES: readonly ErrorCode[] = [
  'ERR_UPSTREAM_UNAVAILABLE',
  'ERR_UPSTREAM_CLOSED',
  'ERR_UPSTREAM_TIMEOUT',
]

/** The Barbican code of an error reply that stands for a transport failure, if it is one. */
function transportFailure(data: unknown): ErrorCode | undefined {
  const code = isPlainObject(data) ? data.barbicanCode : undefined
  return TRANSPORT_FAILURES.find((c) => c === code)
}
