/**
 * Hot reload (docs/configuration.md#reload, ADR 037): what differs between the running
 * configuration and a new, already validated one, and applying only that difference to the
 * running gateway. Upstreams and the members and filters of existing virtual servers change in
 * place, with sessions kept open; everything else is reported as needing a restart.
 */
import { isDeepStrictEqual } from 'node:util'
import type { Config, UpstreamConfig, VirtualServerConfig } from '../config/config.ts'
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
  // Each tenant runs a gateway built at start (ADR 060): a changed tenant needs a restart.
  'tenants',
  // The policy chain is built once (plan.ts) and every session takes it from the gateway's plan:
  // a reload does not swap it, so a changed policy section would be silently ignored.
  'rateLimits',
  'guards',
  'confirm',
  'contexts',
  'cedar',
] as const satisfies readonly (keyof Config)[]

export function diffConfigs(running: Config, next: Config): ConfigDiff {
  const needsRestart: string[] = RESTART_SECTIONS.filter(
    (key) => !isDeepStrictEqual(running[key], next[key]),
  )
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
  return { upstreams: { added, removed, changed }, servers, needsRestart }
}

/** True when the diff has nothing to apply and nothing needing a restart. */
export function isEmptyDiff(diff: ConfigDiff): boolean {
  const { added, removed, changed } = diff.upstreams
  return (
    added.length + removed.length + changed.length + diff.servers.length === 0 &&
    diff.needsRestart.length === 0
  )
}

/**
 * Applies the hot part of `diff` to `gateway`, with `plan` built from the new configuration:
 * new upstreams first, then restarted ones, then the virtual servers' new members and rules
 * (sessions are told their lists changed), and last the removed upstreams, whose calls in
 * flight fail with the closing connection's error. Servers whose change needs a restart keep
 * their old members, except that a removed upstream leaves them too.
 */
export async function applyDiff(
  gateway: Gateway,
  plan: GatewayPlan,
  next: Config,
  diff: ConfigDiff,
): Promise<void> {
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
