/**
 * What one exchange is (exchange.ts runs it, steps.ts walks it): the state of one request on its
 * way from decode to encode, which dies with it. What lives across requests is the client's
 * (session/client.ts).
 */
import type { ProgramClock } from '../exposure/code-clock.ts'
import type { Call } from '../policies/policy.ts'
import type { Request } from '../protocol/model.ts'
import type { Client } from '../session/client.ts'
import type { Logger } from '../telemetry/log.ts'
import type { ReceiveInfo } from '../transports/transport.ts'
import type { Route } from '../virtual-servers/route.ts'
import { type MetaToolCall, NO_META_TOOL } from './tool-search-calls.ts'

/** Before `unwrapMetaTool` ran, and for every request that is no search-mode meta-tool. */
export { NO_META_TOOL }

/** What the one log line of a request sums up, filled in by the steps as they learn it. */
export interface CallLineFacts {
  upstream?: string
  outcome: string
}

/**
 * One request on its way through the steps (steps.ts): what each step reads, and what it
 * rewrites for the steps after it. A code-mode program's calls and the adapters' inner calls
 * are exchanges of their own, on behalf of the same client (exposure-calls.ts).
 */
export interface Exchange {
  readonly client: Client
  /** The request as the steps rewrote it so far (judged URIs, `call_tool` made direct). */
  request: Request
  /** The request claims a 2026-07-28 revision in its own `_meta` (no handshake). */
  readonly modern: boolean
  readonly signal: AbortSignal
  /** The HTTP headers it came with (the `Mcp-Param-*` checks read them); absent inside. */
  readonly headers: ReceiveInfo['headers'] | undefined
  /** The logger of this request: every line carries its id and trace id. */
  readonly log: Logger
  readonly facts: CallLineFacts
  /** A code-mode program's clock, stopped while its call waits for the human. */
  readonly clock: ProgramClock | undefined
  /** What a search-mode `tools/call` is (steps.ts `unwrapMetaTool`). */
  meta: MetaToolCall
  /** The call the policies judge, once the route step made it. */
  call: (Call & { route: Route }) | undefined
}

/**
 * An exchange inside `outer` (a step of run_code or of an adapted tool): the same client and
 * log, its own request, signal and (for a program's call) clock; no HTTP headers to check.
 */
export function innerExchange(
  outer: Exchange,
  request: Request,
  signal: AbortSignal,
  clock: ProgramClock | undefined,
): Exchange {
  return {
    client: outer.client,
    request,
    modern: outer.modern,
    signal,
    headers: undefined,
    log: outer.log,
    facts: outer.facts,
    clock: clock ?? outer.clock,
    meta: NO_META_TOOL,
    call: undefined,
  }
}
