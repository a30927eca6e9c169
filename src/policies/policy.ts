/**
 * The single interface every policy implements: a policy sees every call on its way to the
 * relay and decides to pass it on (and may inspect or filter the reply), answer it, or refuse it
 * by throwing a BarbicanError.
 *
 * @example
 * const denyWrites: Policy = {
 *   name: 'deny-writes',
 *   async handle(call, next) {
 *     if (call.route.kind === 'unicast' && call.route.original.startsWith('write_')) {
 *       throw new BarbicanError('ERR_POLICY_DENIED', 'Writes are disabled')
 *     }
 *     return await next(call)
 *   },
 * }
 */
import type { Identity } from '../auth/identity.ts'
import type { Logger } from '../log.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Catalog } from '../relay/catalog.ts'
import type { InboundKind } from '../transports/inbound.ts'

/** Where a call goes, resolved before the chain runs so every policy sees the same answer. */
export type Route =
  /** Answered by Barbican itself (initialize, ping, discover, setLevel, …). */
  | { readonly kind: 'local' }
  /** One upstream: the exposed name or URI maps to `original` on `upstream`. */
  | { readonly kind: 'unicast'; readonly upstream: string; readonly original: string }
  /** A merged list over the virtual server's catalog. */
  | {
      readonly kind: 'fanout'
      readonly catalog: Catalog
      /** Upstreams left out of the merge because they could not be listed. */
      readonly degraded: readonly { readonly upstream: string; readonly error: string }[]
    }
  /** No route: the relay answers with this error, after audit has seen the call. */
  | { readonly kind: 'unresolved'; readonly error: Error }

/** One client request on its way through the gateway. */
export interface Call {
  /** Gateway-unique; ties logs, audit records and upstream requests together. */
  readonly id: string
  readonly request: Request
  readonly identity: Identity
  /** The virtual server addressed. */
  readonly server: string
  readonly transport: InboundKind
  readonly route: Route
  readonly signal: AbortSignal
  readonly log: Logger
}

export type Reply = Result | ErrorReply

export type Next = (call: Call) => Promise<Reply>

export interface Policy {
  /** Used in config, logs and audit records. */
  readonly name: string
  handle(call: Call, next: Next): Promise<Reply>
}
