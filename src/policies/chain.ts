/**
 * Composes policies around the relay in one fixed order, outermost first, so that the order
 * never depends on how the configuration lists them.
 */
import { BarbicanError } from '../common/errors.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'

/**
 * The order policies run in, outermost first; a policy not named here cannot be installed.
 * `audit` is outermost so it sees every call, and every refusal of the policies inside it;
 * `confirm` follows `authorize`, so nobody is asked to confirm a call that would be refused. Only
 * policies that exist are named: a new one adds its name at its place (see
 * examples/deny-writes.ts).
 */
export const ORDER = ['audit', 'rate-limit', 'authorize', 'cedar', 'confirm', 'guards'] as const

export type PolicyName = (typeof ORDER)[number]

/**
 * Builds the chain: `policies` sorted into `order`, wrapped around `relay`. Each policy may pass
 * a call on at most once: a second `next()` from the same `handle` would run the rest of the
 * chain (and the upstream call) twice, so it is refused with ERR_POLICY_CHAIN.
 */
export function compose(
  policies: readonly Policy[],
  relay: Next,
  order: readonly string[] = ORDER,
): Next {
  const rank = (p: Policy) => {
    const index = order.indexOf(p.name)
    if (index < 0) {
      throw new BarbicanError(
        'ERR_POLICY_CHAIN',
        `Unknown policy "${p.name}"; known: ${order.join(', ')}`,
      )
    }
    return index
  }
  // Ranked before sorting: sort() never compares a lone policy, which must be checked too.
  const sorted = policies
    .map((policy) => ({ policy, rank: rank(policy) }))
    .sort((a, b) => a.rank - b.rank)
    .map((ranked) => ranked.policy)
  let next: Next = relay
  for (let i = sorted.length - 1; i >= 0; i--) {
    const policy = sorted[i]!
    const inner = next
    next = async (call: Call): Promise<Reply> => {
      try {
        return await policy.handle(call, once(policy.name, inner))
      } catch (err) {
        blame(err, policy.name)
        throw err
      }
    }
  }
  return next
}

/** The policy each denial came from; the innermost policy a denial passes out of threw it. */
const DENIED_BY = new WeakMap<object, string>()

function blame(err: unknown, policy: string): void {
  if (err instanceof BarbicanError && err.code === 'ERR_POLICY_DENIED' && !DENIED_BY.has(err)) {
    DENIED_BY.set(err, policy)
  }
}

/** The name of the policy that refused a call with this ERR_POLICY_DENIED, if one did. */
export function deniedBy(err: unknown): string | undefined {
  return err instanceof Object ? DENIED_BY.get(err) : undefined
}

/** `next` for one call of one policy: passes the call on the first time, refuses after. */
function once(policy: string, next: Next): Next {
  let passed = false
  return (call) => {
    if (passed) {
      return Promise.reject(
        new BarbicanError('ERR_POLICY_CHAIN', `Policy "${policy}" called next() twice`),
      )
    }
    passed = true
    return next(call)
  }
}
