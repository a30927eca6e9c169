/**
 * Who a call is for. Inbound transports establish it (a verified token, an API key, the stdio
 * config) before any session exists; every call, policy, audit record and upstream request
 * carries it.
 */
import type { JsonObject } from '../protocol/jsonrpc.ts'

export type AuthMethod = 'anonymous' | 'api-key' | 'jwt' | 'introspection' | 'config'

export interface Identity {
  /** Stable id of the user or workload (a token's `sub`, an API key's owner). */
  readonly subject: string
  readonly tenant?: string | undefined
  /** The OAuth client or API key the caller used. */
  readonly client?: string | undefined
  readonly scopes: readonly string[]
  readonly method: AuthMethod
  /** Verified claims, for policies that map claims to permissions. */
  readonly claims?: JsonObject | undefined
}

/** The identity of callers on a gateway without inbound auth (loopback binds only). */
export const ANONYMOUS: Identity = Object.freeze({
  subject: 'anonymous',
  scopes: Object.freeze([]) as readonly string[],
  method: 'anonymous',
})
