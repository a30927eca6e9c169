/**
 * The gateways of one configuration: the main one and one per tenant (ADR 060), each built from
 * a plan with the trust guard and the audit policy installed. `serve` and `stdio` build their
 * plans here, so that both run the same chain; a reload builds new plans the same way.
 */
import type { AuditLog } from '../audit/audit-log.ts'
import { AuthRuntime } from '../auth/auth-runtime.ts'
import { RedisSharedCache } from '../auth/shared-cache.ts'
import type { Config, TenantConfig } from '../config/config.ts'
import { withAudit } from '../gateway/audit-setup.ts'
import { type Backends, NO_BACKENDS } from '../gateway/backends.ts'
import { Gateway, type GatewayPlan } from '../gateway/gateway.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { PolicyState } from '../gateway/policy-state.ts'
import { TenantRouter, tenantView } from '../gateway/tenants.ts'
import { type TrustSetup, withTrust } from '../gateway/trust-setup.ts'
import type { SandboxRefusals } from '../sandbox/refusals.ts'
import { tenantPins } from '../store/tenant-pins.ts'
import type { Logger } from '../telemetry/log.ts'

/** What every plan of one application is built with. */
export interface PlanParts {
  readonly log: Logger
  readonly auth: AuthRuntime | undefined
  readonly trust: TrustSetup
  readonly audit: AuditLog | undefined
  readonly backends: Backends
  readonly refusals: SandboxRefusals
}

/**
 * The plan of `config` for the tenant `tenant` (undefined: the main gateway), with the trust
 * guard and the audit policy. `kept` is what the policies keep across reloads (quota counters,
 * answered confirmations, context labels): one per gateway (policy-state.ts).
 */
export function gatewayPlan(
  parts: PlanParts,
  config: Config,
  tenant: string | undefined,
  kept?: PolicyState,
): GatewayPlan {
  const { log, auth, trust, audit, backends, refusals } = parts
  const store =
    tenant === undefined
      ? trust.store
      : { ...trust.store, pins: tenantPins(trust.store.pins, tenant) }
  // Fleet-wide quota counters of a tenant are keyed apart from every other tenant's.
  const own: Backends =
    tenant === undefined || backends.redis === undefined
      ? backends
      : {
          ...backends,
          redis: { ...backends.redis, prefix: `${backends.redis.prefix}tenant.${tenant}:` },
        }
  const plan = planFromConfig(config, log, auth, own, tenant, refusals.report, kept)
  return withAudit(withTrust(plan, config, { audit, ...trust, store }, log), audit, config)
}

/** The identity runtime of a configuration (`auth:`), with Redis behind its caches in a fleet. */
export function authRuntimeOf(
  config: Config,
  log: Logger,
  audit: AuditLog | undefined,
  backends: Backends = NO_BACKENDS,
): AuthRuntime | undefined {
  if (!config.auth) return undefined
  // In a fleet, identity caches have a second level in Redis (ADR 082).
  const shared =
    backends.redis === undefined
      ? undefined
      : new RedisSharedCache(backends.redis.client, backends.redis.prefix)
  const auth = new AuthRuntime(config.auth, log.child({ part: 'auth' }), shared)
  if (audit) auth.audit = audit
  return auth
}

export interface Gateways {
  readonly gateway: Gateway
  readonly tenants: ReadonlyMap<string, Gateway>
  readonly router: TenantRouter | undefined
  /** The main gateway's plan for a configuration (a reload's). */
  planOf(config: Config): GatewayPlan
  /** A tenant's plan for a configuration, keeping its policies' state across reloads. */
  tenantPlanOf(config: Config, tenant: TenantConfig): GatewayPlan
}

/** The main gateway and one per tenant, not started. */
export function buildGateways(parts: PlanParts, config: Config): Gateways {
  const { log } = parts
  const kept = new PolicyState()
  const planOf = (c: Config) => gatewayPlan(parts, c, undefined, kept)
  // Only `serve` has a /metrics endpoint: other commands never load prom-client.
  const { enabled, maxTools } = config.metrics
  const plan = planOf(config)
  const gateway = new Gateway(enabled ? { ...plan, metrics: { maxTools } } : plan, log)
  const tenantKept = new Map<string, PolicyState>()
  const tenantPlanOf = (c: Config, t: TenantConfig) => {
    let state = tenantKept.get(t.name)
    if (state === undefined) {
      state = new PolicyState()
      tenantKept.set(t.name, state)
    }
    return gatewayPlan(
      { ...parts, log: log.child({ tenant: t.name }) },
      tenantView(c, t),
      t.name,
      state,
    )
  }
  const tenants = new Map<string, Gateway>()
  for (const t of config.tenants ?? []) {
    tenants.set(t.name, new Gateway(tenantPlanOf(config, t), log.child({ tenant: t.name })))
  }
  const router = config.tenants === undefined ? undefined : new TenantRouter(gateway, tenants)
  if (parts.auth && router) parts.auth.authenticator.knownTenants = new Set(tenants.keys())
  parts.refusals.metrics = gateway.metrics
  return { gateway, tenants, router, planOf, tenantPlanOf }
}
