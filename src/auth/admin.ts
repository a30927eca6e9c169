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
