/**
 * One client connection: what lives across its requests. The session holds what the client
 * negotiated (revision, capabilities, log level), its requests in flight, the tasks and
 * subscriptions its calls created, its open listen streams, and brings what arrives unasked
 * (upstream notifications, list changes, upstream→client requests) to this client only.
 *
 * Each request the client sends is an exchange (relay/exchange.ts): the ordered steps of one
 * request, which read and write this state. The session hands requests over and keeps nothing of
 * their steps. A stateless 2026-07-28 request is no session: it is a `StatelessRequest`, which
 * has one exchange and hears of no list change.
 */
import type { ConnectionInfo } from '../transports/inbound.ts'
import type { Transport } from '../transports/transport.ts'
import { Client, type SessionDeps } from './client.ts'

export { Client, type KeptEnvelope, type SessionDeps } from './client.ts'

/** One client connection and what was negotiated on it, across its requests. */
export class Session extends Client {
  /** List changes of the virtual server reach the client (as its handshake allows). */
  readonly #listener: (keys: readonly string[]) => void

  constructor(transport: Transport, info: ConnectionInfo, deps: SessionDeps) {
    super(transport, info, deps)
    this.#listener = (keys) => this.notifications.listChanged(keys)
    deps.server.on('listChanged', this.#listener)
  }

  protected ended(): void {
    this.deps.server.off('listChanged', this.#listener)
  }
}

/**
 * One 2026-07-28 request over stateless HTTP (its own transport, its own response stream): the
 * state of a client for as long as its one exchange runs. Nothing is negotiated and nothing
 * unasked reaches it but what rides its response stream (progress, its own logs, its listen
 * stream), so it does not listen for list changes as a session does.
 */
export class StatelessRequest extends Client {
  protected ended(): void {}
}

/** The client of a new inbound transport: a session, or one stateless request. */
export function clientFor(transport: Transport, info: ConnectionInfo, deps: SessionDeps): Client {
  return info.kind === 'streamable-http-stateless'
    ? new StatelessRequest(transport, info, deps)
    : new Session(transport, info, deps)
}
