/**
 * Log levels, and the attribution of upstream log lines to 2026-07-28 requests. A 2026 client
 * asks for logs per request (`_meta` logLevel), so a log line an upstream sends while serving
 * such a request belongs on that request's stream, not on the session at large.
 */
import type { JsonObject, JsonRpcId } from '../protocol/jsonrpc.ts'

/** MCP log levels, least to most severe (the order `logging/setLevel` thresholds compare in). */
export const LOG_LEVELS = [
  'debug',
  'info',
  'notice',
  'warning',
  'error',
  'critical',
  'alert',
  'emergency',
]

/** True when `level` is less severe than the threshold `min` (so it is not sent). */
export function belowLevel(level: string, min: string): boolean {
  return LOG_LEVELS.indexOf(level) < LOG_LEVELS.indexOf(min)
}

/**
 * One session's 2026 requests in flight that asked an upstream for logs: request id → upstream
 * and level. The gateway asks how many there are per upstream to decide whether a log line can
 * be attributed to exactly one of them.
 */
export class RequestLogs {
  #calls = new Map<JsonRpcId, { upstream: string; level: string }>()

  /** Records that request `id`, forwarded to `upstream`, asked for logs at `level` and above. */
  track(id: JsonRpcId, upstream: string, level: string): void {
    this.#calls.set(id, { upstream, level })
  }

  /** The request ended: its log lines can no longer be attributed to it. */
  untrack(id: JsonRpcId): void {
    this.#calls.delete(id)
  }

  /** How many tracked requests asked `upstream` for logs. */
  countFor(upstream: string): number {
    let n = 0
    for (const c of this.#calls.values()) if (c.upstream === upstream) n++
    return n
  }

  /**
   * The first tracked request asking `upstream` for logs, with the line's params to send on its
   * stream; undefined when none asked or the line is below that request's level.
   */
  attribute(
    upstream: string,
    params: JsonObject | undefined,
  ): { id: JsonRpcId; params: JsonObject } | undefined {
    for (const [id, c] of this.#calls) {
      if (c.upstream !== upstream) continue
      const level = typeof params?.level === 'string' ? params.level : 'info'
      if (belowLevel(level, c.level)) return undefined
      return { id, params: { ...params, level } }
    }
    return undefined
  }
}
