/**
 * The single interface every policy implements: a policy sees every call on its way to the
 * relay and decides to pass it on (and may inspect or filter the reply), answer it, or refuse it
 * by throwing a BarbicanError.
 *
 * A runnable example is examples/deny-writes.ts.
 */
import type { Identity } from '../auth/identity.ts'
import type { Logger } from '../common/log.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Route } from '../relay/route.ts'
import type { InboundKind } from '../transports/inbound.ts'

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
  /** What policies decided on this call, in order; the audit policy records them. */
  readonly decisions?: PolicyDecision[] | undefined
}

/** One policy's verdict on a call and the rule that made it. */
export interface PolicyDecision {
  readonly policy: string
  readonly effect: 'allow' | 'deny'
  /** Where the deciding rule is written (`auth.permissions[2]`); absent when none granted. */
  readonly rule?: string | undefined
  /** Secrets the guards policy redacted from the result, counted by kind. */
  readonly redactions?: Readonly<Record<string, number>> | undefined
}

export type Reply = Result | ErrorReply

export type Next = (call: Call) => Promise<Reply>

export interface Policy {
  /** Used in config, logs and audit records. */
  readonly name: string
  handle(call: Call, next: Next): Promise<Reply>
}
