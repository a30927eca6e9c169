/**
 * Where legacy sessions live when several replicas serve one gateway (docs/decisions/058). The
 * listener tells the directory about the sessions it opens and closes, and hands it the requests
 * that name a session this replica does not hold; src/cluster/ implements it over Redis.
 */
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http'
import type { Identity } from '../auth/identity.ts'
import type { JsonRpcMessage, JsonRpcRequest } from '../protocol/jsonrpc.ts'

/** Marks a request relayed by another replica: it is never relayed again. */
export const HOP_HEADER = 'x-barbican-hop'

export interface SessionDirectory {
  /** A legacy session was opened on this replica. */
  opened(id: string): void
  /** A legacy session of this replica ended. */
  closed(id: string): void
  /**
   * A request naming session `id`, which this replica does not hold. Relays it to the owning
   * replica and answers the client (true), or leaves it to this replica's own 404 (false).
   */
  relay(id: string, req: IncomingMessage, res: ServerResponse): Promise<boolean>
  /**
   * A 2026-07-28 retry (`request` carries a `requestState`; `body` is the request as read).
   * When the state names a call another replica holds (docs/decisions/081), relays the request
   * there, or answers that the call is lost, and returns true; false serves it here.
   */
  relayRetry?(
    request: JsonRpcRequest,
    body: string,
    req: IncomingMessage,
    res: ServerResponse,
  ): Promise<boolean>
  /**
   * A 2026-07-28 retry received on a WebSocket (docs/decisions/088). When its state names a
   * call another replica holds, relays the request there as one HTTP POST, hands each message
   * of the holder's answer to `retry.send` (or the error that says the call is lost), and
   * returns true; false serves it here. The socket stays where it is.
   */
  relaySocketRetry?(request: JsonRpcRequest, retry: SocketRetry): Promise<boolean>
}

/** What a WebSocket connection hands over with a retry to relay (docs/decisions/088). */
export interface SocketRetry {
  /** The virtual server the connection serves. */
  readonly server: string
  /** The upgrade request's headers: the client's own credential goes with the relayed POST. */
  readonly headers: IncomingHttpHeaders
  /** The caller as the connection's latest credential check showed it. */
  readonly identity: Identity | undefined
  /** Sends one message of the answer (a notification, then the response) to the client. */
  readonly send: (message: JsonRpcMessage) => void
  /** Aborted when the client cancels the request or the connection ends: nothing is sent. */
  readonly signal: AbortSignal
}
