/**
 * Isolated tenants on one listener (ADR 060, docs/tenants.md). Each tenant runs a gateway of its
 * own: its upstreams, virtual servers, catalogs, progress tokens, held calls and policies are
 * separate objects, so nothing minted for one tenant can name anything of another's. This
 * handler only picks the gateway of the caller's tenant, once per connection (each stateless
 * 2026-07-28 request is a connection of its own).
 */
import type { AuditStore } from '../audit/audit-store.ts'
import { type AdminCaller, type PinDecision, tenantOfCaller } from '../auth/admin.ts'
import type { Identity } from '../auth/identity.ts'
import type { Config, TenantConfig } from '../config/config.ts'
import type { PinStore } from '../store/store.ts'
import { tenantPins } from '../store/tenant-pins.ts'
import type { ConnectionInfo, InboundHandler } from '../transports/inbound.ts'
import type { Transport } from '../transports/transport.ts'
import { approveChange, rejectChange } from '../trust/decisions.ts'
import type { Gateway } from './gateway.ts'

export class TenantRouter implements InboundHandler {
  /** The top-level configuration's gateway: callers without a tenant. */
  readonly main: Gateway
  /** By tenant name. */
  readonly tenants: ReadonlyMap<string, Gateway>

  constructor(main: Gateway, tenants: ReadonlyMap<string, Gateway>) {
    this.main = main
    this.tenants = tenants
  }

  /** The gateway of a caller's tenant; undefined for a tenant not configured (refused earlier). */
  gatewayOf(identity: Identity | undefined): Gateway | undefined {
    const tenant = identity?.tenant
    return tenant === undefined ? this.main : this.tenants.get(tenant)
  }

  /**
   * Before authentication the tenant is unknown, so every name may exist: an unauthenticated
   * caller learns nothing about which servers any tenant has. `serves` decides after it.
   */
  hasServer(_name: string): boolean {
    return true
  }

  serves(name: string, identity: Identity | undefined): boolean {
    return this.gatewayOf(identity)?.hasServer(name) === true
  }

  connect(transport: Transport, info: ConnectionInfo): void {
    const gateway = this.gatewayOf(info.identity)
    if (gateway === undefined) {
      void transport.close()
      return
    }
    gateway.connect(transport, info)
  }
}

/**
 * The configuration a tenant's gateway is built from: the tenant's upstreams and servers, its
 * permissions, quotas, guards, confirmation, contexts and Cedar policies in place of the
 * top-level ones when it has some, every other section
 * shared (a tenant's gateway has its own quota counters either way).
 */
export function tenantView(config: Config, tenant: TenantConfig): Config {
  // Held entries are the default tenant's (ADR 121): a tenant's view does not list them.
  const { tenants: _tenants, held: _held, ...shared } = config
  const auth =
    config.auth !== undefined && tenant.permissions !== undefined
      ? { ...config.auth, permissions: tenant.permissions }
      : config.auth
  return {
    ...shared,
    upstreams: tenant.upstreams,
    servers: tenant.servers,
    ...(auth === undefined ? {} : { auth }),
    ...(tenant.rateLimits === undefined ? {} : { rateLimits: tenant.rateLimits }),
    ...(tenant.guards === undefined ? {} : { guards: tenant.guards }),
    ...(tenant.confirm === undefined ? {} : { confirm: tenant.confirm }),
    ...(tenant.contexts === undefined ? {} : { contexts: tenant.contexts }),
    ...(tenant.cedar === undefined ? {} : { cedar: tenant.cedar }),
  }
}

/** Most records `GET /admin/api/audit` returns at once. */
const AUDIT_PAGE_MAX = 500

/**
 * `GET /admin/api/audit?limit=N&tenant=T`: newest first. A tenant admin reads its tenant's
 * calls only; naming another tenant reads what a tenant without records would: nothing.
 */
export async function auditView(
  store: AuditStore,
  caller: AdminCaller,
  query: URLSearchParams,
): Promise<unknown> {
  const own = tenantOfCaller(caller)
  const asked = query.get('tenant') ?? undefined
  if (own !== undefined && asked !== undefined && asked !== own) return { records: [] }
  const limit = Math.min(AUDIT_PAGE_MAX, Math.max(1, Number(query.get('limit')) || 100))
  const records = await store.read({ tenant: own ?? asked, newestFirst: true, limit })
  return {
    records: records.map((r) => ({ seq: r.seq, at: r.at, ...JSON.parse(r.body) })),
  }
}

/**
 * `GET /admin/api/pins?upstream=U`: approved pins and pending changes. A tenant admin sees its
 * tenant's, under its own upstream names; a gateway admin sees the store as it is (a tenant's
 * upstreams under their qualified names, `TENANT.UPSTREAM`).
 */
export async function pinsView(
  pins: PinStore,
  caller: AdminCaller,
  query: URLSearchParams,
): Promise<unknown> {
  const own = tenantOfCaller(caller)
  const view = own === undefined ? pins : tenantPins(pins, own)
  const upstream = query.get('upstream') ?? undefined
  const [pinned, pending] = await Promise.all([view.pinned(upstream), view.pending(upstream)])
  return {
    pinned: pinned.map(({ definition: _d, ...p }) => p),
    pending: pending.map(({ definition: _d, ...p }) => p),
  }
}

/**
 * `POST /admin/api/pins/approve|reject` with `{upstream, key}`: decides one pending change. A
 * tenant admin names its own upstreams, looked up under the tenant's qualified names, so another
 * tenant's change reads exactly like one that does not exist. False: no such pending change.
 */
export async function decidePin(
  pins: PinStore,
  tenant: string | undefined,
  decision: PinDecision,
  upstream: string,
  key: string,
  actor: string,
): Promise<boolean> {
  const view = tenant === undefined ? pins : tenantPins(pins, tenant)
  if (!(await view.pending(upstream)).some((p) => p.key === key)) return false
  if (decision === 'approve') await approveChange(view, upstream, key, actor)
  else await rejectChange(view, upstream, key, actor)
  return true
}
