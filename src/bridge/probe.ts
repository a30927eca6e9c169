/**
 * Which era an upstream speaks, found the way 2026-07-28 tells dual-era clients to find it: send
 * `server/discover` first; a DiscoverResult naming a revision Barbican speaks means modern; any
 * other answer, or silence within the probe timeout, means legacy and the caller runs
 * `initialize`. The fallback never depends on one error code, since legacy servers answer
 * pre-initialize traffic with -32601, -32602, a custom code, or nothing. A server that closes
 * the connection on the probe (some exit on any pre-initialize request) is legacy too; the
 * caller must then reconnect before `initialize`.
 */

import { BarbicanError } from '../common/errors.ts'
import { UNSUPPORTED_PROTOCOL_VERSION } from '../protocol/error-codes.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import { MODERN_UPSTREAM_REVISION } from './envelope.ts'

export type EraVerdict =
  | {
      readonly era: 'modern'
      readonly discover: JsonObject
      readonly serverInfo: JsonObject
      readonly at: number
    }
  | {
      readonly era: 'legacy'
      readonly reason: string
      readonly closed: boolean
      readonly at: number
    }

/** Sends `server/discover` (the caller adds the envelope) with the probe's own timeout. */
export type DiscoverSender = (timeoutMs: number) => Promise<Result | ErrorReply>

/** Default wait for an answer to the probe: long enough for a busy server, short for silence. */
export const PROBE_TIMEOUT_MS = 3_000

export async function probeEra(
  send: DiscoverSender,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<EraVerdict> {
  const first = await probeOnce(send, timeoutMs)
  // -32022 naming a revision we speak is modern evidence: ask again once, never fall back.
  if (first.era === 'legacy' && first.retry) return await probeOnce(send, timeoutMs)
  return first
}

async function probeOnce(
  send: DiscoverSender,
  timeoutMs: number,
): Promise<EraVerdict & { retry?: boolean }> {
  const at = Date.now()
  let reply: Result | ErrorReply
  try {
    reply = await send(timeoutMs)
  } catch (error) {
    const code = error instanceof BarbicanError ? error.code : 'ERR_INTERNAL'
    if (code === 'ERR_UPSTREAM_TIMEOUT') {
      return { era: 'legacy', reason: 'no answer to server/discover', closed: false, at }
    }
    if (code === 'ERR_UPSTREAM_CLOSED' || code === 'ERR_UPSTREAM_UNAVAILABLE') {
      return { era: 'legacy', reason: 'the server closed on server/discover', closed: true, at }
    }
    throw error
  }
  if (reply.kind === 'result') {
    const versions = reply.result.supportedVersions
    if (Array.isArray(versions) && versions.includes(MODERN_UPSTREAM_REVISION)) {
      return { era: 'modern', discover: reply.result, serverInfo: reply.serverInfo ?? {}, at }
    }
    return {
      era: 'legacy',
      reason: 'server/discover named no revision we speak',
      closed: false,
      at,
    }
  }
  const data = reply.data
  // Barbican's own transport could not reach the server: no answer, so no verdict. The attempt
  // fails and the next one probes again (a server down at start may well be modern).
  if (isPlainObject(data) && data.barbicanCode === 'ERR_UPSTREAM_UNAVAILABLE') {
    throw new BarbicanError('ERR_UPSTREAM_UNAVAILABLE', reply.message)
  }
  const supported = isPlainObject(data) ? data.supported : undefined
  const retry =
    reply.code === UNSUPPORTED_PROTOCOL_VERSION &&
    Array.isArray(supported) &&
    supported.includes(MODERN_UPSTREAM_REVISION)
  return {
    retry,
    era: 'legacy',
    reason: Array.isArray(supported)
      ? `the server supports only ${supported.join(', ')}`
      : `server/discover failed with ${reply.code}`,
    closed: false,
    at,
  }
}
