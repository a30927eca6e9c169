/**
 * Hot reload (docs/configuration.md#reload, ADR 037): what differs between the running
 * configuration and a new, already validated one, and applying only that difference to the
 * running gateway. Upstreams and the members and filters of existing virtual servers change in
 * place, with sessions kept open; the policies are swapped whole for the next call of every
 * session (ADR 037, "Amended (policies, live)"); everything else is reported as needing a
 * restart.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { isDeepStrictEqual } from 'node:util'
import type { Config, TenantConfig, UpstreamConfig, VirtualServerConfig } from '../config/config.ts'
import type { Gateway, GatewayPlan } from './gateway.ts'
import { trustPolicyOf } from './trust-setup.ts'

export interface ConfigDiff {
  readonly upstreams: {
    readonly added: readonly string[]
    readonly removed: readonly string[]
    /** Present in both with a different entry: restarted. */
    readonly changed: readonly string[]
  }
  /** Existing virtual servers whose members, namespacing or filters changed. */
  readonly servers: readonly string[]
  /**
   * Policy sections that changed (`rateLimits`, `cedar`…): the whole chain is rebuilt from the
   * new configuration and swapped in. `cedar (policy files)`: the files changed, not the config.
   * `tenants.<name>.<section>`: a tenant's own section; only that tenant's chain is swapped.
   */
  readonly policies: readonly string[]
  /** What differs but cannot be applied to a running gateway (`listen`, `auth`, `servers.x`…). */
  readonly needsRestart: readonly string[]
}

/** Top-level sections that only a restart applies (the listener, identities, stores, limits). */
export const RESTART_SECTIONS = [
  'listen',
  'security',
  'limits',
  'log',
  'metrics',
  'store',
  'redis',
  'audit',
  'auth',
  // Each tenant runs a gateway built at start (ADR 060): an added, removed or otherwise changed
  // tenant needs a restart; a change to its own policy sections only does not (below).
  'tenants',
] as const satisfies readonly (keyof Config)[]

/**
 * Top-level sections the policy chain is built from (plan.ts): a change to any rebuilds the
 * chain, swapped in for every call that starts after the reload (and every tenant's chain that
 * inherits the section).
 */
export const POLICY_SECTIONS = [
  'rateLimits',
  'guards',
  'confirm',
  'contexts',
  'cedar',
] as const satisfies readonly (keyof Config)[]

/**
 * A tenant's own policy sections (TenantConfig): a reload whose only changes inside `tenants`
 * are these, in tenants that run already, swaps those tenants' chains (ADR 060, amended).
 */
export const TENANT_POLICY_SECTIONS = [
  'permissions',
  'rateLimits',
  'guards',
  'confirm',
  'contexts',
  'cedar',
] as const satisfies readonly (keyof TenantConfig)[]

/** True for a `policies` entry that changes the main chain (and every inheriting tenant's). */
export function isTopLevelPolicy(entry: string): boolean {
  return !entry.startsWith('tenants.')
}

/**
 * `policyFiles`: the fingerprints of the Cedar policy files the running chains were built from
 * and of those the new configuration names (policyFilesOf), so an edited `.cedar` file is
 * applied by a reload though the configuration itself did not change.
 */
export function diffConfigs(
  running: Config,
  next: Config,
  policyFiles?: { readonly running: PolicyFiles; readonly next: PolicyFiles },
): ConfigDiff {
  // `auth.permissions` feed the authorize policy only: with `auth` on both sides they are a
  // policy section of their own; the rest of `auth` needs a restart.
  const hotPermissions = running.auth !== undefined && next.auth !== undefined
  // Tenants that differ in their own policy sections only are a policy change of each.
  const tenantPolicies = tenantPolicyChanges(running.tenants, next.tenants)
  const restartView = (c: Config, key: (typeof RESTART_SECTIONS)[number]) =>
    key === 'auth' && hotPermissions
      ? withoutPermissions(c.auth)
      : key === 'tenants' && tenantPolicies !== undefined
        ? undefined
        : c[key]
  const needsRestart: string[] = RESTART_SECTIONS.filter(
    (key) => !isDeepStrictEqual(restartView(running, key), restartView(next, key)),
  )
  const policies: string[] = POLICY_SECTIONS.filter(
    (key) => !isDeepStrictEqual(running[key], next[key]),
  )
  if (hotPermissions && !isDeepStrictEqual(running.auth?.permissions, next.auth?.permissions)) {
    policies.push('auth.permissions')
  }
  policies.push(...(tenantPolicies ?? []))
  if (policyFiles !== undefined) {
    // An edited file swaps the chains built from it: the top-level ones (and every tenant's that
    // inherits `cedar`) or one tenant's; a section whose config changed is rebuilt anyway.
    const edited = (files: readonly string[] | undefined) =>
      (files ?? []).some((f) => policyFiles.running?.get(f) !== policyFiles.next?.get(f))
    if (!policies.includes('cedar') && edited(next.cedar?.policies)) {
      policies.push('cedar (policy files)')
    }
    // A tenant's edited file counts only where the tenant's chain is built from the new config.
    const tenantsRun = tenantPolicies === undefined ? running.tenants : next.tenants
    for (const t of tenantsRun ?? []) {
      if (!policies.includes(`tenants.${t.name}.cedar`) && edited(t.cedar?.policies)) {
        policies.push(`tenants.${t.name}.cedar (policy files)`)
      }
    }
  }
  const before = byName<UpstreamConfig>(running.upstreams)
  const after = byName<UpstreamConfig>(next.upstreams)
  const added = [...after.keys()].filter((n) => !before.has(n))
  const removed = [...before.keys()].filter((n) => !after.has(n))
  const changed = [...after.keys()].filter(
    (n) => before.has(n) && !isDeepStrictEqual(before.get(n), after.get(n)),
  )
  const oldServers = byName<VirtualServerConfig>(running.servers)
  const newServers = byName<VirtualServerConfig>(next.servers)
  const servers: string[] = []
  for (const [name, server] of newServers) {
    const old = oldServers.get(name)
    // A server's path is a route of the listener: new, removed or moved servers need a restart.
    if (!old) needsRestart.push(`servers.${name} (added)`)
    else if (old.path !== server.path) needsRestart.push(`servers.${name}.path`)
    else if (!isDeepStrictEqual(old, server)) servers.push(name)
  }
  for (const name of oldServers.keys()) {
    if (!newServers.has(name)) needsRestart.push(`servers.${name} (removed)`)
  }
  return { upstreams: { added, removed, changed }, servers, policies, needsRestart }
}

/** Each Cedar policy file a configuration names, with a fingerprint of its content. */
export type PolicyFiles = ReadonlyMap<string, string> | undefined

/**
 * A fingerprint of each Cedar policy file the `configs` name (their own and their tenants'), as
 * they read now; undefined without Cedar. A reload passes the running configuration too, whose
 * tenants keep running when their change needs a restart. A file that cannot be read
 * fingerprints as its error, so the reload rebuilds the chain and refuses with the reason.
 */
export function policyFilesOf(...configs: Config[]): PolicyFiles {
  const files = [...new Set(configs.flatMap(policyFilePaths))]
  if (files.length === 0) return undefined
  const fingerprints = new Map<string, string>()
  for (const file of files) {
    const hash = createHash('sha256')
    try {
      hash.update(readFileSync(file))
    } catch (err) {
      hash.update(`unreadable: ${(err as Error).message}`)
    }
    fingerprints.set(file, hash.digest('hex'))
  }
  return fingerprints
}

/** True when the diff has nothing to apply and nothing needing a restart. */
export function isEmptyDiff(diff: ConfigDiff): boolean {
  const { added, removed, changed } = diff.upstreams
  return (
    added.length + removed.length + changed.length + diff.servers.length === 0 &&
    diff.policies.length === 0 &&
    diff.needsRestart.length === 0
  )
}

/**
 * Applies the hot part of `diff` to `gateway`, with `plan` built from the new configuration
 * (its policies validated by building it): the new policy chain first, so a tightened rule
 * holds before anything it guards appears; then new upstreams, restarted ones, the virtual
 * servers' new members and rules (sessions are told their lists changed), and last the removed
 * upstreams, whose calls in flight fail with the closing connection's error. Servers whose
 * change needs a restart keep their old members, except that a removed upstream leaves them too.
 */
export async function applyDiff(
  gateway: Gateway,
  plan: GatewayPlan,
  next: Config,
  diff: ConfigDiff,
): Promise<void> {
  // A tenant's own section changes its chain only (the caller swaps it), not the main one.
  if (diff.policies.some(isTopLevelPolicy)) gateway.setPolicies(plan.policies ?? [])
  gateway.trust?.setPolicies(new Map(next.upstreams.map((u) => [u.name, trustPolicyOf(u)])))
  const upstreamPlans = new Map(plan.upstreams.map((u) => [u.name, u]))
  for (const name of diff.upstreams.added) gateway.addUpstream(upstreamPlans.get(name)!)
  await Promise.all(
    diff.upstreams.changed.map((name) => gateway.replaceUpstream(upstreamPlans.get(name)!)),
  )
  const serverPlans = new Map(plan.servers.map((s) => [s.name, s]))
  for (const name of diff.servers) gateway.reconfigureServer(serverPlans.get(name)!)
  await Promise.all(diff.upstreams.removed.map((name) => gateway.removeUpstream(name)))
}

function byName<T extends { readonly name: string }>(items: readonly T[]): Map<string, T> {
  return new Map(items.map((i) => [i.name, i]))
}

/** The Cedar policy files `config` names: its own and its tenants'. */
export function policyFilePaths(config: Config): string[] {
  return [config.cedar, ...(config.tenants ?? []).map((t) => t.cedar)].flatMap(
    (cedar) => cedar?.policies ?? [],
  )
}

/**
 * The tenants' own policy sections that changed (`tenants.acme.cedar`), when nothing else about
 * `tenants` did: the same tenants in the same order, equal but for those sections. Undefined
 * otherwise (the change needs a restart), and without tenants on either side.
 */
function tenantPolicyChanges(
  running: Config['tenants'],
  next: Config['tenants'],
): string[] | undefined {
  if (running === undefined || next === undefined || running.length !== next.length) {
    return undefined
  }
  const changes: string[] = []
  for (let i = 0; i < running.length; i++) {
    const before = running[i]!
    const after = next[i]!
    if (!isDeepStrictEqual(withoutTenantPolicies(before), withoutTenantPolicies(after))) {
      return undefined
    }
    for (const key of TENANT_POLICY_SECTIONS) {
      if (!isDeepStrictEqual(before[key], after[key])) changes.push(`tenants.${after.name}.${key}`)
    }
  }
  return changes
}

function withoutTenantPolicies(tenant: TenantConfig): unknown {
  const rest: Record<string, unknown> = { ...tenant }
  for (const key of TENANT_POLICY_SECTIONS) delete rest[key]
  return rest
}

function withoutPermissions(auth: Config['auth']): unknown {
  if (auth === undefined) return undefined
  const { permissions: _permissions, ...rest } = auth
  return rest
}

/**
 * The `auth` a reload leaves running: the running one (it needs a restart), with the new
 * `permissions` when both configurations have `auth` (diffConfigs applies them).
 */
export function authAfter(running: Config, next: Config): Config['auth'] {
  if (running.auth === undefined || next.auth === undefined) return running.auth
  const { permissions: _old, ...kept } = running.auth
  const permissions = next.auth.permissions
  return permissions === undefined ? kept : { ...kept, permissions }
}
