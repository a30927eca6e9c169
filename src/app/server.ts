/**
 * A gateway and its HTTP listener, assembled from a configuration: the gateways (main and
 * tenants), identity, the HTTP routes (MCP, admin API and console, readiness, metrics), and how a
 * reload applies. `barbican serve` starts it through app.ts; tests start it directly.
 */
import type { AuditLog } from '../audit/audit-log.ts'
import type { Config } from '../config/config.ts'
import { type Backends, NO_BACKENDS } from '../gateway/backends.ts'
import { listenerPlan } from '../gateway/plan.ts'
import {
  applyDiff,
  authAfter,
  type ConfigDiff,
  diffConfigs,
  isTopLevelPolicy,
  policyFilesOf,
  RESTART_SECTIONS,
} from '../gateway/reload.ts'
import type { SharedApiKeys } from '../gateway/shared-api-keys.ts'
import type { TrustSetup } from '../gateway/trust-setup.ts'
import { SandboxRefusals } from '../sandbox/refusals.ts'
import { memoryStore } from '../store/memory.ts'
import type { Logger } from '../telemetry/log.ts'
import { createHttpInbound } from '../transports/http-inbound.ts'
import { authRuntimeOf, buildGateways, type Gateways } from './gateways.ts'
import { installRoutes } from './routes.ts'
import type { RunningServer } from './running-server.ts'

export type { RunningServer }

/**
 * Starts a gateway and its HTTP listener from a configuration (used by the CLI and tests).
 * `trust` holds the pin store and lockfile; by default pins are kept in memory only. `audit`,
 * when given, records every call (the caller opens and closes it).
 */
export async function startServer(
  config: Config,
  log: Logger,
  trust: TrustSetup = { store: memoryStore() },
  audit?: AuditLog,
  backends: Backends = NO_BACKENDS,
): Promise<RunningServer> {
  const auth = authRuntimeOf(config, log, audit, backends)
  const refusals = new SandboxRefusals(log, audit)
  const gateways = buildGateways({ log, auth, trust, audit, backends, refusals }, config)
  const { gateway, tenants, router } = gateways
  const http = createHttpInbound(
    router ?? gateway,
    {
      ...listenerPlan(config),
      ...(auth ? { identityOf: auth.identityOf } : {}),
    },
    log.child({ part: 'http' }),
  )
  let running = config
  let sharedKeys: SharedApiKeys | undefined
  const reload = reloading(gateways, config)
  let stopRoutes = () => {}
  const server: RunningServer = {
    gateway,
    http,
    get url() {
      return http.url
    },
    auth,
    started: Promise.resolve(),
    get config() {
      return running
    },
    async apply(next: Config): Promise<ConfigDiff> {
      const { diff, target } = await reload(running, next)
      running = target
      return diff
    },
    useSharedKeys(keys: SharedApiKeys) {
      sharedKeys = keys
    },
    gatewayOf: (identity) => (router === undefined ? gateway : router.gatewayOf(identity)),
    nameReplica(id: string) {
      for (const g of [gateway, ...tenants.values()]) g.replica = id
    },
    reloader: undefined,
    configLabel: 'the configuration given to startServer',
    async stop() {
      server.reloader?.stop()
      await http.close()
      await Promise.all([gateway.stop(), ...[...tenants.values()].map((g) => g.stop())])
      stopRoutes()
      await auth?.close()
    },
  }
  stopRoutes = installRoutes(server, {
    config,
    gateways,
    trust,
    audit,
    sharedKeys: () => sharedKeys,
  })
  try {
    await http.listen()
  } catch (err) {
    await auth?.close()
    throw err
  }
  auth?.install(http, [
    ...new Set(
      [config.servers, ...(config.tenants ?? []).map((t) => t.servers)].flat().map((s) => s.name),
    ),
  ])
  // Upstreams connect in the background: the listener answers at once, lists degrade meanwhile.
  const started = Promise.all([gateway.start(), ...[...tenants.values()].map((g) => g.start())])
  return Object.assign(server, { started: started.then(() => {}) })
}

/**
 * How a new, validated configuration is applied to running gateways: every plan is built, and so
 * every chain validated, before anything is applied, so that a policy that does not build (a
 * Cedar file the schema rejects) refuses the whole reload and the running chains keep serving.
 */
function reloading(
  { gateway, tenants, planOf, tenantPlanOf }: Gateways,
  config: Config,
): (running: Config, next: Config) => Promise<{ diff: ConfigDiff; target: Config }> {
  /** The Cedar policy files the running chains were built from (reload.ts policyFilesOf). */
  let policyFiles = policyFilesOf(config)
  return async (running, next) => {
    const nextFiles = policyFilesOf(next, running)
    const diff = diffConfigs(running, next, { running: policyFiles, next: nextFiles })
    // What runs after the reload: sections that need a restart keep their running values,
    // in the new chain too (a changed `limits` does not half-apply through a policy).
    const target = runningAfter(running, next, diff)
    const plan = planOf(target)
    // Tenants inherit the top-level sections they do not set (tenantView): theirs swap with
    // a top-level change; a tenant's own section (`tenants.acme.cedar`) swaps its chain only.
    const everyTenant = diff.policies.some(isTopLevelPolicy)
    const tenantChains = (target.tenants ?? []).flatMap((t) => {
      const g = tenants.get(t.name)
      const swapped = everyTenant || diff.policies.some((p) => p.startsWith(`tenants.${t.name}.`))
      return g === undefined || !swapped ? [] : [{ g, plan: tenantPlanOf(target, t) }]
    })
    for (const { g, plan: p } of tenantChains) g.setPolicies(p.policies ?? [])
    await applyDiff(gateway, plan, next, diff)
    policyFiles = nextFiles
    return { diff, target }
  }
}

/**
 * The configuration running after a reload: the new one, except the sections and virtual
 * servers whose change needs a restart, which keep their running values.
 */
function runningAfter(running: Config, next: Config, diff: ConfigDiff): Config {
  const hot = new Set(diff.servers)
  const servers = running.servers.map((s) =>
    hot.has(s.name) ? (next.servers.find((n) => n.name === s.name) ?? s) : s,
  )
  // `tenants` whose own policy sections alone changed are not a restart: the new ones run.
  const kept = Object.fromEntries(
    RESTART_SECTIONS.filter(
      (key) => running[key] !== undefined && (key !== 'tenants' || diff.needsRestart.includes(key)),
    ).map((key) => [key, running[key]]),
  )
  const { auth: _auth, store: _store, ...rest } = next
  const auth = authAfter(running, next)
  return { ...rest, ...kept, servers, ...(auth === undefined ? {} : { auth }) } as Config
}
