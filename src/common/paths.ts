/** Path containment, shared by the config's grant inference and the sandbox's file view. */
import { sep } from 'node:path'

/** True when `inner` is `outer` or inside it. */
export function within(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer.endsWith(sep) ? outer : outer + sep)
}
