/**
 * The single interface every policy implements: a policy sees every call on its way to the
 * relay and decides to pass it on (and may inspect or filter the reply), answer it, or refuse it
 * by throwing a BarbicanError.
 *
 * A runnable example is examples/deny-writes.ts.
 */
import type { Identity } from '../auth/identity.ts'
import type { Catalog } from '../catalog/catalog.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Request, Result } from '../protocol/model.ts'
import type { Logger } from '../telemetry/log.ts'
import type { InboundKind } from '../transports/inbound.ts'
import type { Route } from '../virtual-servers/route.ts'

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
  /** The client that sent the call, for policies that must ask it something (confirm). */
  readonly peer?: CallPeer | undefined
  /** The virtual server's catalog (as routing saw it): what policies judge items by. */
  readonly catalog?: (() => Promise<Catalog>) | undefined
  /**
   * The session object that sent the call, which the step after the last policy answers for
   * (the gateway's one chain serves every client, ADR 135). Opaque to policies; a policy that
   * passes on a changed call copies it with the rest (`{ ...call, request }`).
   */
  readonly sender?: object | undefined
}

/** The calling client as a policy can reach it. */
export interface CallPeer {
  /**
   * `legacy`: a 2025 client with a session Barbican can send requests on; `modern`: a
   * 2026-07-28 client, asked with an `input_required` result; `none`: neither (a legacy client
   * over stateless HTTP), so it cannot be asked anything.
   */
  readonly era: 'legacy' | 'modern' | 'none'
  /** What the client declared (initialize, or the request's envelope). */
  readonly capabilities: JsonObject
  /** The legacy session's id; undefined when there is no lasting session. */
  readonly sessionId: string | undefined
  /** Sends a request to a legacy client and waits for its answer (never rejects). */
  ask(method: string, params: JsonObject, signal: AbortSignal): Promise<Result | ErrorReply>
}

/** An upstream's request to a client, as policies see it (Policy.upstreamAsked). */
export interface UpstreamAsk {
  readonly upstream: string
  readonly method: string
  /** The client's legacy session (upstream requests reach only clients with a session). */
  readonly sessionId: string | undefined
  readonly identity: Identity
}

/** One policy's verdict on a call and the rule that made it. */
export interface PolicyDecision {
  readonly policy: string
  readonly effect: 'allow' | 'deny'
  /** Where the deciding rule is written (`auth.permissions[2]`); absent when none granted. */
  readonly rule?: string | undefined
  /** Secrets the guards policy redacted from the result, counted by kind. */
  readonly redactions?: Readonly<Record<string, number>> | undefined
  /** A human's answer to a confirmation question (confirm policy). */
  readonly answer?: ConfirmationAnswer | undefined
}

/** `unavailable`: the client cannot be asked; `failed`: asking failed (timeout, disconnect). */
export type ConfirmationAnswer = 'accept' | 'decline' | 'cancel' | 'unavailable' | 'failed'

export type Reply = Result | ErrorReply

export type Next = (call: Call) => Promise<Reply>

export interface Policy {
  /** Used in config, logs and audit records. */
  readonly name: string
  handle(call: Call, next: Next): Promise<Reply>
  /**
   * An upstream sent a request (sampling, elicitation) to the client of a call in flight: its
   * content reaches the client's model before the call ends. Absent: not watched.
   */
  upstreamAsked?(ask: UpstreamAsk): void
  /**
   * Releases what the policy holds (connections, timers) when a reload replaced its chain and
   * the last call that entered it has ended (live-policies.ts). Absent: nothing to release.
   */
  close?(): Promise<void> | void
}
