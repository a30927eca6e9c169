/**
 * The `authorize` policy: maps who the caller is (subject, tenant, scopes, claims) to the
 * virtual servers, tools, prompts and resources they may use. Every request needs a rule
 * covering the caller on the server; a request acting on one item needs a rule granting that
 * item, and is refused with ERR_POLICY_DENIED before it reaches an upstream; lists show only
 * what the caller may use, so clients never offer a model something that would be refused.
 * What each method needs is the table in method-permissions.ts (and docs/security.md).
 */
import picomatch from 'picomatch'
import type { Identity } from '../auth/identity.ts'
import type { Catalog } from '../catalog/catalog.ts'
import { globForJudgedUris } from '../catalog/resource-uri.ts'
import { BarbicanError } from '../common/errors.ts'
import { type Item, type ItemKind, permissionOf } from './method-permissions.ts'
import type { Call, Next, Policy, Reply } from './policy.ts'
import { narrowCatalog, watchable } from './visible.ts'

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
  /**
   * Tool names as clients see them (globs). A rule naming none of `tools`, `prompts` and
   * `resources` grants everything on its servers; a rule naming some grants nothing of the
   * kinds it leaves out (ADR 020).
   */
  readonly tools?: readonly string[] | undefined
  /** Prompt names as clients see them (globs). */
  readonly prompts?: readonly string[] | undefined
  /** Resource URIs as clients see them, normalised (globs; templates by their stand-in). */
  readonly resources?: readonly string[] | undefined
}

type Matcher = (name: string) => boolean

interface CompiledRule {
  readonly rule: PermissionRule
  /** Where the rule is written (`auth.permissions[2]`), for audit records. */
  readonly where: string
  readonly server: Matcher
  readonly items: Readonly<Record<ItemKind, Matcher>>
}

const everything: Matcher = () => true
const nothing: Matcher = () => false

function compile(rule: PermissionRule, index: number): CompiledRule {
  const unrestricted =
    rule.tools === undefined && rule.prompts === undefined && rule.resources === undefined
  const names = (globs: readonly string[] | undefined): Matcher =>
    globs === undefined ? (unrestricted ? everything : nothing) : picomatch([...globs])
  const uris = (globs: readonly string[] | undefined): Matcher =>
    globs === undefined
      ? unrestricted
        ? everything
        : nothing
      : picomatch(globs.map(globForJudgedUris), { dot: true })
  return {
    rule,
    where: `auth.permissions[${index}]`,
    server: picomatch(rule.servers as string[]),
    items: { tool: names(rule.tools), prompt: names(rule.prompts), resource: uris(rule.resources) },
  }
}

/** Builds the policy from the operator's rules (`auth.permissions`). */
export function authorize(rules: readonly PermissionRule[]): Policy {
  const compiled = rules.map((rule, i) => compile(rule, i))
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
  /** A catalog narrowed to one set of grants, kept while both live (lists are frequent). */
  const narrowed = new WeakMap<Catalog, WeakMap<readonly CompiledRule[], Catalog>>()
  const narrow = (catalog: Catalog, grants: readonly CompiledRule[]): Catalog => {
    let byGrants = narrowed.get(catalog)
    if (byGrants === undefined) {
      byGrants = new WeakMap()
      narrowed.set(catalog, byGrants)
    }
    let view = byGrants.get(grants)
    if (view === undefined) {
      view = narrowCatalog(catalog, (item) => mayUse(grants, item))
      byGrants.set(grants, view)
    }
    return view
  }
  return {
    name: 'authorize',
    async handle(call: Call, next: Next): Promise<Reply> {
      const { identity, request, route } = call
      const grants = grantsFor(identity, call.server)
      // What was decided and by which rule goes on the call for the audit record.
      const decide = (grant: CompiledRule | undefined) =>
        call.decisions?.push({
          policy: 'authorize',
          effect: grant ? 'allow' : 'deny',
          rule: grant?.where,
        })
      if (grants.length === 0) {
        decide(undefined)
        throw denied(`${identity.subject} may not use the server "${call.server}"`)
      }
      const permission = permissionOf(request.method)
      let grant: CompiledRule | undefined = grants[0]
      if (permission?.item) {
        // Judged before existence, so a refusal never tells what exists upstream.
        const item = permission.item(request, route)
        if (item === undefined) {
          if (route.kind === 'unicast') {
            decide(undefined)
            throw denied(`${request.method} names nothing to judge`)
          }
        } else {
          grant = grantFor(grants, item)
          if (grant === undefined) {
            decide(undefined)
            throw denied(`${identity.subject} may not ${VERBS[item.kind]} "${item.name}"`)
          }
        }
      }
      decide(grant)
      if (permission?.list && route.kind === 'fanout') {
        return await next({ ...call, route: { ...route, catalog: narrow(route.catalog, grants) } })
      }
      if (permission?.watches) {
        const params = watchable(request.params, (item) => mayUse(grants, item))
        return await next({ ...call, request: { ...request, params } })
      }
      return await next(call)
    },
  }
}

/**
 * What `auth.permissions` decide on one item for one caller, as the `authorize` policy decides a
 * request naming it: the rule that grants it (`auth.permissions[i]`), or none. For
 * `barbican policy explain` and the equivalence tests (ADR 046).
 */
export function judgePermission(
  rules: readonly PermissionRule[],
  identity: Identity,
  server: string,
  item: Item,
): { readonly allowed: boolean; readonly rule?: string | undefined } {
  const grants = rules
    .map((rule, i) => compile(rule, i))
    .filter((c) => c.server(server) && appliesTo(c.rule, identity))
  const grant = grants.length === 0 ? undefined : grantFor(grants, item)
  return { allowed: grant !== undefined, rule: grant?.where }
}

/** How a refusal names what was refused ("alice may not call the tool …"). */
const VERBS: Readonly<Record<ItemKind, string>> = {
  tool: 'call the tool',
  prompt: 'use the prompt',
  resource: 'use the resource',
}

function denied(message: string): BarbicanError {
  return new BarbicanError('ERR_POLICY_DENIED', message)
}

function mayUse(grants: readonly CompiledRule[], item: Item): boolean {
  return grantFor(grants, item) !== undefined
}

/** The first rule that grants `item`. */
function grantFor(grants: readonly CompiledRule[], item: Item): CompiledRule | undefined {
  for (const grant of grants) if (grant.items[item.kind](item.name)) return grant
  return undefined
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
