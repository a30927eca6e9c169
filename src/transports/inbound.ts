/**
 * The seam between inbound transports and the gateway. An inbound transport authenticates and
 * frames; for each client connection (a stdio pipe, a WebSocket, a legacy SSE stream, a legacy
 * Streamable HTTP session, or one stateless 2026-07-28 request) it creates a Transport and hands
 * it to the handler, which attaches a session to it.
 */
import type { Identity } from '../auth/identity.ts'
import type { Transport } from './transport.ts'

export type InboundKind =
  | 'stdio'
  | 'streamable-http'
  | 'streamable-http-stateless'
  | 'sse'
  | 'websocket'

export interface ConnectionInfo {
  readonly kind: InboundKind
  /** The virtual server addressed, from the URL path (`/mcp/NAME` → NAME; `/mcp` → 'default'). */
  readonly server: string
  readonly remoteAddress?: string | undefined
  /** Lower-cased headers of the request that opened the connection (HTTP transports). */
  readonly headers?: Readonly<Record<string, string | string[] | undefined>>
  /** Who the caller is, established by the transport's authentication; absent means anonymous. */
  readonly identity?: Identity | undefined
}

export interface InboundHandler {
  /** True when a virtual server of that name exists (unknown paths get 404 before any session). */
  hasServer(name: string): boolean
  /**
   * After authentication: whether the caller's own view has that server (tenants, ADR 060).
   * Absent: `hasServer` already said. A false answer is the same 404 as an unknown name.
   */
  serves?(name: string, identity: Identity | undefined): boolean
  /** Attaches a session to a new client connection. The handler sets `transport.onmessage`. */
  connect(transport: Transport, info: ConnectionInfo): void
}
