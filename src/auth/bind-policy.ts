/**
 * The safe default for binds: loopback may run without inbound authentication; anything else
 * needs a way to tell callers apart (tokens or API keys), or the operator's explicit consent.
 * Settings that only shape outbound behaviour (stdio identity, assertion, network) do not count.
 */
import type { AuthConfig } from '../config/auth-schema.ts'

/** True when `auth` authenticates inbound HTTP callers. */
export function hasInboundAuth(auth: AuthConfig | undefined): boolean {
  return auth?.jwt !== undefined || auth?.introspection !== undefined || auth?.apiKeys !== undefined
}
