/**
 * The admin permission: what an identity needs for Barbican's operator endpoints (`/metrics`
 * on a non-loopback bind, the admin console). A token or API key grants it with the scope
 * `barbican:admin`.
 */
import type { Identity } from './identity.ts'

export const ADMIN_SCOPE = 'barbican:admin'

export function isAdmin(identity: Identity): boolean {
  return identity.scopes.includes(ADMIN_SCOPE)
}

/** Who asked an admin route: an admin identity, or `loopback` on an open loopback gateway. */
export type AdminCaller = Identity | 'loopback'

/** What an admin does with a pending pin change. */
export type PinDecision = 'approve' | 'reject'

/** The tenant an admin caller is confined to; undefined for a gateway admin (or loopback). */
export function tenantOfCaller(caller: AdminCaller): string | undefined {
  return caller === 'loopback' ? undefined : caller.tenant
}
