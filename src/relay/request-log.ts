/**
 * The logger of one request, whose every line carries the request's id and trace id
 * (session/call-line.ts), and whether its call line is written at all. Both decided per call
 * without building anything that nobody reads: at `log.level: warn` most requests write no
 * line, yet deriving the logger (a child, its fields, a fresh trace id) and building the call
 * line cost every call (bench/NOTEBOOK.md, 2026-12-06).
 */
import type { JsonRpcId } from '../protocol/jsonrpc.ts'
import { callLevel, requestFields, traceIdOf } from '../session/call-line.ts'
import type { Logger, LogLevel } from '../telemetry/log.ts'
import type { ReceiveInfo } from '../transports/transport.ts'

/**
 * `parent.child(requestFields(id, trace id))`, derived when first used. The trace id is the
 * caller's (header or `params._meta`) or a fresh one, as if derived when the request came in.
 */
export class RequestLog implements Logger {
  readonly #parent: Logger
  readonly #id: JsonRpcId
  readonly #headers: ReceiveInfo['headers'] | undefined
  readonly #params: unknown
  #log: Logger | undefined

  constructor(
    parent: Logger,
    id: JsonRpcId,
    headers: ReceiveInfo['headers'] | undefined,
    params: unknown,
  ) {
    this.#parent = parent
    this.#id = id
    this.#headers = headers
    this.#params = params
  }

  #derived(): Logger {
    this.#log ??= this.#parent.child(
      requestFields(this.#id, traceIdOf(this.#headers, this.#params)),
    )
    return this.#log
  }

  debug(message: string, fields?: Record<string, unknown>): void {
    this.#derived().debug(message, fields)
  }

  info(message: string, fields?: Record<string, unknown>): void {
    this.#derived().info(message, fields)
  }

  warn(message: string, fields?: Record<string, unknown>): void {
    this.#derived().warn(message, fields)
  }

  error(message: string, fields?: Record<string, unknown>): void {
    this.#derived().error(message, fields)
  }

  child(fields: Record<string, unknown>): Logger {
    return this.#derived().child(fields)
  }

  /** A request's fields bind no `part`: it writes what its parent writes. */
  enabled(level: LogLevel): boolean {
    return this.#parent.enabled?.(level) ?? true
  }
}

/** The component of call lines (`log.levels.call`), as `logCall` binds it. */
const CALL_PART = { part: 'call' }

/** The call-line logger of each gateway logger, derived once: its level never changes. */
const callLogs = new WeakMap<Logger, Logger>()

/**
 * Whether the call line of a `method` request, logged under `log` (the gateway's logger, the
 * parent of the request's), would be written. A logger that cannot tell gets its line built.
 */
export function callLineWritten(log: Logger, method: string): boolean {
  let calls = callLogs.get(log)
  if (calls === undefined) {
    calls = log.child(CALL_PART)
    callLogs.set(log, calls)
  }
  return calls.enabled?.(callLevel(method)) ?? true
}
