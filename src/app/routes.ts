/**
 * The HTTP routes of `serve` beside MCP: readiness, the landing page, the admin API and console,
 * and metrics (src/admin/), wired to the running gateways.
 */
import { adminRoutes, tenantOfCaller } from '../admin/api.ts'
import { consoleRoutes } from '../admin/console.ts'
import { consoleSource, linkedAccounts } from '../admin/console-source.ts'
import { landingPage } from '../admin/landing-page.ts'
import { metricsRoute } from '../admin/metrics-endpoint.ts'
import { readinessRoute } from '../admin/readiness.ts'
import type { AuditLog } from '../audit/audit-log.ts'
import { hasInboundAuth } from '../auth/bind-policy.ts'
import { VERSION } from '../common/version.ts'
import type { Config } from '../config/config.ts'
import { isLoopbackHost } from '../config/listen.ts'
import { linkedTokenStore } from '../credentials/upstream-setup.ts'
import { heldStatus } from '../gateway/gateway.ts'
import { overview } from '../gateway/overview.ts'
import type { SharedApiKeys } from '../gateway/shared-api-keys.ts'
import { auditView, decidePin, pinsView, tenantView } from '../gateway/tenants.ts'
import type { TrustSetup } from '../gateway/trust-setup.ts'
import { confinementOf } from '../sandbox/confine.ts'
import type { Gateways } from './gateways.ts'
import type { RunningServer } from './running-server.ts'

export interface RouteParts {
  /** The configuration at start: what the listener and endpoints were set up with. */
  readonly config: Config
  readonly gateways: Gateways
  readonly trust: TrustSetup
  readonly audit: AuditLog | undefined
  readonly sharedKeys: () => SharedApiKeys | undefined
}

/** Installs the routes on the server's listener; returns what stops the console's figures. */
export function installRoutes(server: RunningServer, parts: RouteParts): () => void {
  const { config, gateways, trust, audit } = parts
  const { gateway, tenants } = gateways
  const { auth, http } = server
  const authenticator = auth && hasInboundAuth(config.auth) ? auth.authenticator : undefined
  const access = { loopback: isLoopbackHost(config.listen.host), authenticator }
  http.routes.set(
    '/readyz',
    readinessRoute(
      () => [...gateway.status(), ...heldStatus(server.config.held)],
      authenticator,
      (name) => {
        const u = server.config.upstreams.find((entry) => entry.name === name)
        return u?.transport === 'stdio' ? confinementOf(u.sandbox, u.command) : undefined
      },
    ),
  )
  http.routes.set(
    '/',
    landingPage({
      version: VERSION,
      authenticated: hasInboundAuth(config.auth),
      servers: config.servers.map((s) => s.name),
      status: () => [...gateway.status(), ...heldStatus(server.config.held)],
    }),
  )
  const reload = async (actor: string, noFile: string) =>
    server.reloader ? await server.reloader.reload(actor) : { ok: false as const, error: noFile }
  for (const [path, route] of adminRoutes(access, {
    status: (caller) => {
      const running = server.config
      const own = tenantOfCaller(caller)
      const tenant = own === undefined ? undefined : running.tenants?.find((t) => t.name === own)
      const shown = own === undefined ? gateway : tenants.get(own)
      if (own !== undefined && (tenant === undefined || shown === undefined))
        return Promise.resolve({})
      return overview(shown ?? gateway, tenant ? tenantView(running, tenant) : running, {
        config: server.configLabel,
        lastReload: server.reloader?.last,
      })
    },
    ...(audit === undefined
      ? {}
      : { audit: (caller, query) => auditView(audit.store, caller, query) }),
    pins: (caller, query) => pinsView(trust.store.pins, caller, query),
    decidePin: async (caller, decision, { upstream, key }) => {
      const own = tenantOfCaller(caller)
      const actor = `admin (${caller === 'loopback' ? 'loopback' : caller.subject})`
      if (!(await decidePin(trust.store.pins, own, decision, upstream, key, actor))) return false
      // Takes effect on the next request: the catalogs judged by the pins are refreshed now.
      const affected = own === undefined ? [gateway, ...tenants.values()] : [tenants.get(own)]
      await Promise.all(
        affected.flatMap((g) => (g ? [...g.servers.values()].map((s) => s.refreshTrust()) : [])),
      )
      gateway.onTrustDecision?.()
      await audit?.record({
        type: 'admin',
        action: `pin.${decision}`,
        actor,
        upstream,
        target: key,
        outcome: 'ok',
        ...(own === undefined ? {} : { tenant: own }),
      })
      return true
    },
    reload: (caller) =>
      reload(
        `admin (${caller === 'loopback' ? 'loopback' : caller.subject})`,
        'This gateway has no config file to reload (it runs the embedded demo)',
      ),
  })) {
    http.routes.set(path, route)
  }
  const adminConsole = consoleSource({
    gateway,
    config: () => server.config,
    overview: () =>
      overview(gateway, server.config, {
        config: server.configLabel,
        lastReload: server.reloader?.last,
      }),
    pins: trust.store.pins,
    audit,
    apiKeys: auth?.apiKeys,
    sharedKeys: parts.sharedKeys,
    accounts: linkedAccounts(() => linkedTokenStore(auth)),
    reload: (actor) => reload(actor, 'This gateway has no config file to reload (embedded demo)'),
  })
  for (const [path, route] of consoleRoutes(access, adminConsole)) http.routes.set(path, route)
  http.routes.set(
    '/metrics',
    metricsRoute(gateway.metrics, config.metrics, {
      ...access,
      token: config.metrics.token,
    }),
  )
  return () => adminConsole.figures.stop()
}
