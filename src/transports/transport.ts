/**
 * The one interface every transport implements, in both directions: a channel carrying JSON-RPC
 * messages to and from one peer. Inbound transports (clients talking to Barbican) create one
 * Transport per client connection or session; outbound transports (Barbican talking to an
 * upstream server) are one Transport per upstream connection.
 *
 * @example
 * transport.onmessage = (message, info) => session.receive(message, info)
 * await transport.start()
 * await transport.send({ jsonrpc: '2.0', id: 1, result: {} }, { relatedRequestId: 1 })
 */
import type { Identity } from '../auth/identity.ts'
import type { JsonRpcId, JsonRpcMessage } from '../protocol/jsonrpc.ts'
import type { Revision } from '../protocol/revisions.ts'

export interface SendOptions {
  /**
   * The request this message answers or belongs to. Streamable HTTP uses it to put a response,
   * or a server→client request made while serving a call, on that call's response stream.
   */
  readonly relatedRequestId?: JsonRpcId
  /**
   * Extra headers for this message alone, for transports that carry headers per message
   * (outbound HTTP: this POST's `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`, the trace context, a
   * stamped identity); the others ignore them.
   */
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/** What an inbound transport knows about the HTTP request a message came in. */
export interface ReceiveInfo {
  /** Lower-cased request headers (HTTP transports only). */
  readonly headers?: Readonly<Record<string, string | string[] | undefined>>
  /**
   * Aborted when the carrier of this request goes away before the answer: for 2026-07-28 HTTP,
   * closing the response stream cancels the request.
   */
  readonly signal?: AbortSignal
  /** The payload was a JSON-RPC batch (2025-03-26). */
  readonly batch?: boolean
  /**
   * Bytes of the payload that carried this message (stdio upstreams): what the per-call output
   * bound counts (`limits.upstreamMaxCallOutputBytes`).
   */
  readonly bytes?: number
  /**
   * Who the credential carried with this message stands for, verified for it (each POST's
   * token; a WebSocket's token checked again per message). The session's rights follow it, so a
   * refreshed token with fewer scopes takes rights away at once. Absent without inbound auth.
   */
  readonly identity?: Identity | undefined
}

export interface Transport {
  /** Begins receiving; for outbound transports, connects or spawns. */
  start(): Promise<void>
  /** Sends one message; rejects when the transport is closed or the peer is gone. */
  send(message: JsonRpcMessage, options?: SendOptions): Promise<void>
  /** Closes the channel and releases every resource; idempotent. */
  close(): Promise<void>

  onmessage?: (message: JsonRpcMessage, info?: ReceiveInfo) => void
  /** Called once when the channel is closed, by either side. */
  onclose?: () => void
  /** Non-fatal faults (an unparsable line, a failed write); the transport stays usable. */
  onerror?: (error: Error) => void

  /**
   * Inbound transports: the session tells the transport which revision it negotiated, which
   * decides framing rules such as batches (2025-03-26 only).
   */
  setProtocolVersion?(revision: Revision): void

  /**
   * Outbound transports: why the peer went away on its own, once it did (a stdio upstream's
   * exit code or signal and last stderr lines), for the requests it leaves unanswered.
   */
  readonly closeError?: Error | undefined

  /** Legacy Streamable HTTP session id, once known. */
  readonly sessionId?: string | undefined
}
