/**
 * The `authorize` policy: maps who the caller is (subject, tenant, scopes, claims) to the
 * virtual servers and tools they may use. A call to a tool no rule grants is refused with
 * ERR_POLICY_DENIED before it reaches the upstream, and `tools/list` answers show only the tools
 * the caller may call, so clients never offer a model a tool that would be refused.
 */
import picomatch from 'picomatch'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'

/** One grant: who it applies to (every listed condition must hold) and what it allows. */
export interface PermissionRule {
  readonly subjects?: readonly string[] | undefined
  readonly tenants?: readonly string[] | undefined
  /** The caller must hold all of these. */
  readonly scopes?: readonly string[] | undefined
  /** Every listed claim must have this value (a list-valued claim must contain it). */
  readonly claims?: Readonly<Record<string, string | number | boolean>> | undefined
  /** Virtual server names (globs). */
  readonly servers: readonly string[]
  /** Tool names as clients see them (globs). */
  readonly tools: readonly string[]
}

interface CompiledRule {
  readonly rule: PermissionRule
  readonly server: (name: string) => boolean
  readonly tool: (name: string) => boolean
}

/** Builds the policy from the operator's rules (`auth.permissions`). */
export function authorize(rules: readonly PermissionRule[]): Policy {
  const compiled: CompiledRule[] = rules.map((rule) => ({
    rule,
    server: picomatch(rule.servers as string[]),
    tool: picomatch(rule.tools as string[]),
  }))
  /**
   * The rules granting `identity` something on `server`, worked out once per identity object
   * and server: identities are immutable, and an API key's is the same object on every request.
   */
  const granted = new WeakMap<Identity, Map<string, readonly CompiledRule[]>>()
  const grantsFor = (identity: Identity, server: string): readonly CompiledRule[] => {
    let byServer = granted.get(identity)
    if (byServer === undefined) {
      byServer = new Map()
      granted.set(identity, byServer)
    }
    let grants = byServer.get(server)
    if (grants === undefined) {
      grants = compiled.filter((c) => c.server(server) && appliesTo(c.rule, identity))
      byServer.set(server, grants)
    }
    return grants
  }
  return {
    name: 'authorize',
    async handle(call: Call, next: Next): Promise<Reply> {
      const grants = grantsFor(call.identity, call.server)
      if (grants.length === 0) {
        throw new BarbicanError(
          'ERR_POLICY_DENIED',
          `${call.identity.subject} may not use the server "${call.server}"`,
        )
      }
      const { request } = call
      if (request.method === 'tools/call') {
        const name = request.params?.name
        if (typeof name !== 'string' || !mayCall(grants, name)) {
          throw new BarbicanError(
            'ERR_POLICY_DENIED',
            `${call.identity.subject} may not call the tool "${String(name)}"`,
          )
        }
        return await next(call)
      }
      const reply = await next(call)
      if (request.method === 'tools/list' && reply.kind === 'result') {
        const tools = reply.result.tools
        if (Array.isArray(tools)) {
          reply.result = {
            ...reply.result,
            tools: tools.filter(
              (t) => isPlainObject(t) && typeof t.name === 'string' && mayCall(grants, t.name),
            ),
          }
        }
      }
      return reply
    },
  }
}

function mayCall(grants: readonly CompiledRule[], tool: string): boolean {
  for (const grant of grants) if (grant.tool(tool)) return true
  return false
}

/** True when every condition the rule states holds for `identity`. */
export function appliesTo(rule: PermissionRule, identity: Identity): boolean {
  if (rule.subjects && !rule.subjects.includes(identity.subject)) return false
  if (rule.tenants && (identity.tenant === undefined || !rule.tenants.includes(identity.tenant))) {
    return false
  }
  if (rule.scopes && !rule.scopes.every((s) => identity.scopes.includes(s))) return false
  if (rule.claims) {
    for (const [name, expected] of Object.entries(rule.claims)) {
      const actual = identity.claims?.[name]
      const ok = Array.isArray(actual) ? actual.includes(expected) : actual === expected
      if (!ok) return false
    }
  }
  return true
}
