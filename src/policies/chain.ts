/**
 * Composes policies around the relay in one fixed order, outermost first, so that nothing runs
 * before audit sees a call, and nothing reaches an upstream before identity-based checks.
 */
import type { Call, Next, Policy, Reply } from './policy.ts'

/** The order policies run in; a policy not named here cannot be installed. */
export const ORDER = ['audit', 'admit', 'rate-limit', 'authorize', 'pin'] as const

export type PolicyName = (typeof ORDER)[number]

/** Builds the chain: `policies` sorted into ORDER, wrapped around `relay`. */
export function compose(policies: readonly Policy[], relay: Next): Next {
  const rank = (p: Policy) => {
    const index = (ORDER as readonly string[]).indexOf(p.name)
    if (index < 0) throw new Error(`Unknown policy "${p.name}"; known: ${ORDER.join(', ')}`)
    return index
  }
  const sorted = [...policies].sort((a, b) => rank(a) - rank(b))
  let next: Next = relay
  for (let i = sorted.length - 1; i >= 0; i--) {
    const policy = sorted[i]!
    const inner = next
    next = (call: Call): Promise<Reply> => policy.handle(call, inner)
  }
  return next
}
