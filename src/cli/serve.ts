/**
 * `barbican serve`: the gateway over HTTP (Streamable HTTP, legacy SSE, WebSocket) with health,
 * readiness and metrics endpoints, until SIGINT or SIGTERM, which drain in-flight requests.
 */

import { adminRoutes, tenantOfCaller } from '../admin/api.ts'
import { consoleRoutes } from '../admin/console.ts'
import { consoleSource, linkedAccounts } from '../admin/console-source.ts'
import { landingPage } from '../admin/landing-page.ts'
import { metricsRoute } from '../admin/metrics-endpoint.ts'
import { readinessRoute } from '../admin/readiness.ts'
import type { AuditLog } from '../audit/audit-log.ts'
import { AuthRuntime } from '../auth/auth-runtime.ts'
import { hasInboundAuth } from '../auth/bind-policy.ts'
import type { Identity } from '../auth/identity.ts'
import { RedisSharedCache } from '../auth/shared-cache.ts'
import type { Cluster } from '../cluster/cluster.ts'
import { VERSION } from '../common/version.ts'
import type { Config, LoadedConfig, TenantConfig } from '../config/config.ts'
import { isLoopbackHost } from '../config/listen.ts'
import { linkedTokenStore } from '../credentials/upstream-setup.ts'
import { openAuditLog, withAudit } from '../gateway/audit-setup.ts'
import { type Backends, NO_BACKENDS, openBackends } from '../gateway/backends.ts'
import { Gateway, heldStatus } from '../gateway/gateway.ts'
import { overview } from '../gateway/overview.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { PolicyState } from '../gateway/policy-state.ts'
import {
  applyDiff,
  authAfter,
  type ConfigDiff,
  diffConfigs,
  isTopLevelPolicy,
  policyFilePaths,
  policyFilesOf,
  RESTART_SECTIONS,
} from '../gateway/reload.ts'
import { followPostgresKeys, type SharedApiKeys } from '../gateway/shared-api-keys.ts'
import { startupSummary } from '../gateway/startup-summary.ts'
import { auditView, decidePin, pinsView, TenantRouter, tenantView } from '../gateway/tenants.ts'
import { warnOverBudget } from '../gateway/token-budget.ts'
import { lockfilePathOf, openStore, type TrustSetup, withTrust } from '../gateway/trust-setup.ts'
import { confinementOf, describeConfinement } from '../sandbox/confine.ts'
import { grantLines } from '../sandbox/grants.ts'
import { SandboxRefusals } from '../sandbox/refusals.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import { memoryStore } from '../store/memory.ts'
import type { Store } from '../store/store.ts'
import { tenantPins } from '../store/tenant-pins.ts'
import type { Logger } from '../telemetry/log.ts'
import { startTracing, stopTracing } from '../telemetry/tracing.ts'
import { createHttpInbound, type HttpInbound } from '../transports/http-inbound.ts'
import { type CliIo, type CommandOptions, trustOptionsOf } from './command.ts'
import { joinFleet, serveInFleet, shareReload } from './fleet.ts'
import { loadForCommand } from './load.ts'
import { loggerFor } from './logging.ts'
import { ConfigReloader, describeDiff } from './reloader.ts'

export interface RunningServer {
  readonly gateway: Gateway
  readonly http: HttpInbound
  readonly url: string
  /** Identity and credentials (present when the config has `auth:`). */
  readonly auth: AuthRuntime | undefined
  /** Settles when every eager upstream has connected or failed to (the gateway's start). */
  readonly started: Promise<void>
  /** The configuration the gateway runs now (what a reload is compared with). */
  readonly config: Config
  /**
   * Applies the hot part of a new, validated configuration (src/gateway/reload.ts) and returns
   * what differed; parts that need a restart keep their running values.
   */
  apply(next: Config): Promise<ConfigDiff>
  /**
   * The API keys in PostgreSQL this replica follows (`store.postgres`): from now on the
   * console creates and revokes keys there, like `barbican keys`, for every replica.
   */
  useSharedKeys(keys: SharedApiKeys): void
  /** The gateway serving a caller: its tenant's (ADR 060), or the main one. */
  gatewayOf(identity: Identity | undefined): Gateway | undefined
  /** Names this replica of a fleet in its gateways' held calls (docs/decisions/081). */
  nameReplica(id: string): void
  /** What `POST /admin/api/reload` runs; absent: the gateway has no file to reload. */
  reloader: ConfigReloader | undefined
  /** What the overview names as the configuration's origin. */
  configLabel: string
  stop(): Promise<void>
}

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
  // In a fleet, identity caches have a second level in Redis (ADR 082).
  const shared =
    backends.redis === undefined
      ? undefined
      : new RedisSharedCache(backends.redis.client, backends.redis.prefix)
  const auth = config.auth
    ? new AuthRuntime(config.auth, log.child({ part: 'auth' }), shared)
    : undefined
  if (auth && audit) auth.audit = audit
  const refusals = new SandboxRefusals(log, audit)
  // What the policies keep across reloads (quota counters, answered confirmations, context
  // labels): one per gateway, handed to every plan built for it (policy-state.ts).
  const kept = new PolicyState()
  const planOf = (c: Config) =>
    withAudit(
      withTrust(
        planFromConfig(c, log, auth, backends, undefined, refusals.report, kept),
        c,
        { audit, ...trust },
        log,
      ),
      audit,
      c,
    )
  const plan = planOf(config)
  // Only `serve` has a /metrics endpoint: other commands never load prom-client.
  const { enabled, maxTools } = config.metrics
  const gateway = new Gateway(enabled ? { ...plan, metrics: { maxTools } } : plan, log)
  // Each tenant runs a gateway of its own (ADR 060); its pins live under qualified names.
  const tenants = new Map<string, Gateway>()
  const tenantKept = new Map<string, PolicyState>()
  const tenantPlanOf = (c: Config, t: TenantConfig) => {
    const view = tenantView(c, t)
    const tenantLog = log.child({ tenant: t.name })
    const store = { ...trust.store, pins: tenantPins(trust.store.pins, t.name) }
    // Fleet-wide quota counters of a tenant are keyed apart from every other tenant's.
    const own: Backends =
      backends.redis === undefined
        ? backends
        : {
            ...backends,
            redis: { ...backends.redis, prefix: `${backends.redis.prefix}tenant.${t.name}:` },
          }
    let state = tenantKept.get(t.name)
    if (state === undefined) {
      state = new PolicyState()
      tenantKept.set(t.name, state)
    }
    return withAudit(
      withTrust(
        planFromConfig(view, tenantLog, auth, own, t.name, refusals.report, state),
        view,
        { audit, ...trust, store },
        tenantLog,
      ),
      audit,
      view,
    )
  }
  for (const t of config.tenants ?? []) {
    tenants.set(t.name, new Gateway(tenantPlanOf(config, t), log.child({ tenant: t.name })))
  }
  const router = config.tenants === undefined ? undefined : new TenantRouter(gateway, tenants)
  if (auth && router) auth.authenticator.knownTenants = new Set(tenants.keys())
  refusals.metrics = gateway.metrics
  const http = createHttpInbound(
    router ?? gateway,
    {
      host: config.listen.host,
      port: config.listen.port,
      allowedHosts: config.security.allowedHosts,
      allowedOrigins: config.security.allowedOrigins,
      maxBodyBytes: config.limits.maxBodyBytes,
      jsonLimits: config.limits,
      maxSessions: config.limits.maxSessions,
      maxSessionsPerIdentity: config.limits.maxSessionsPerIdentity,
      sessionIdleTimeoutMs: config.limits.sessionIdleTimeoutMs,
      ...(auth ? { identityOf: auth.identityOf } : {}),
    },
    log.child({ part: 'http' }),
  )
  http.routes.set(
    '/readyz',
    readinessRoute(
      () => [...gateway.status(), ...heldStatus(running.held)],
      auth && hasInboundAuth(config.auth) ? auth.authenticator : undefined,
      (name) => {
        const u = running.upstreams.find((entry) => entry.name === name)
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
      status: () => [...gateway.status(), ...heldStatus(running.held)],
    }),
  )
  const access = {
    loopback: isLoopbackHost(config.listen.host),
    authenticator: auth && hasInboundAuth(config.auth) ? auth.authenticator : undefined,
  }
  let running = config
  /** The Cedar policy files the running chains were built from (reload.ts policyFilesOf). */
  let policyFiles = policyFilesOf(config)
  let sharedKeys: SharedApiKeys | undefined
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
      const nextFiles = policyFilesOf(next, running)
      const diff = diffConfigs(running, next, { running: policyFiles, next: nextFiles })
      // What runs after the reload: sections that need a restart keep their running values,
      // in the new chain too (a changed `limits` does not half-apply through a policy).
      const target = runningAfter(running, next, diff)
      // Every plan is built, and so every chain validated, before anything is applied: a
      // policy that does not build (a Cedar file the schema rejects) refuses the whole reload
      // and the running chains keep serving.
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
      running = target
      policyFiles = nextFiles
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
      adminConsole.figures.stop()
      await auth?.close()
    },
  }
  for (const [path, route] of adminRoutes(access, {
    status: (caller) => {
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
    reload: async (caller) => {
      if (!server.reloader) {
        return {
          ok: false,
          error: 'This gateway has no config file to reload (it runs the embedded demo)',
        }
      }
      const actor = caller === 'loopback' ? 'loopback' : caller.subject
      return await server.reloader.reload(`admin (${actor})`)
    },
  })) {
    http.routes.set(path, route)
  }
  const adminConsole = consoleSource({
    gateway,
    config: () => running,
    overview: () =>
      overview(gateway, running, { config: server.configLabel, lastReload: server.reloader?.last }),
    pins: trust.store.pins,
    audit,
    apiKeys: auth?.apiKeys,
    sharedKeys: () => sharedKeys,
    accounts: linkedAccounts(() => linkedTokenStore(auth)),
    reload: async (actor) => {
      if (!server.reloader) {
        return { ok: false, error: 'This gateway has no config file to reload (embedded demo)' }
      }
      return await server.reloader.reload(actor)
    },
  })
  for (const [path, route] of consoleRoutes(access, adminConsole)) http.routes.set(path, route)
  http.routes.set(
    '/metrics',
    metricsRoute(gateway.metrics, config.metrics, {
      loopback: isLoopbackHost(config.listen.host),
      authenticator: auth && hasInboundAuth(config.auth) ? auth.authenticator : undefined,
      token: config.metrics.token,
    }),
  )
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

export async function runServe(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, true),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
  // A mechanism setting Barbican does not know stops it here, never runs a server with less.
  const badMechanism = mechanismSettingError()
  if (badMechanism !== undefined) {
    io.stderr(`barbican: ${badMechanism.message}\n`)
    return 1
  }
  const { config, source } = loaded
  if (
    !isLoopbackHost(config.listen.host) &&
    !hasInboundAuth(config.auth) &&
    !config.security.allowInsecureNonLoopback &&
    !options.allowInsecureNonLoopback
  ) {
    io.stderr(
      `barbican: refusing to listen on ${config.listen.host}, which is not a loopback address, without inbound authentication.\n` +
        'Configure inbound auth, or pass --allow-insecure-non-loopback (security.allowInsecureNonLoopback: true) to accept the risk.\n',
    )
    return 1
  }
  const log = loggerFor(config.log)
  try {
    if (await startTracing(process.env, log)) log.info('tracing on: spans exported over OTLP')
  } catch (error) {
    io.stderr(`barbican: ${(error as Error).message}\n`)
    return 1
  }
  let store: Store
  let backends: Backends
  try {
    store = await openStore(config, source.path)
  } catch (err) {
    io.stderr(`barbican: cannot open the store: ${(err as Error).message}\n`)
    return 1
  }
  try {
    backends = await openBackends(config)
  } catch (err) {
    await store.close()
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  }
  let cluster: Cluster | undefined
  try {
    cluster = await joinFleet(config.redis, process.env, log)
  } catch (err) {
    await store.close()
    await backends.close()
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return 1
  }
  let audit: AuditLog | undefined
  try {
    audit = await openAuditLog(config, source.path, { log, running: true, stdoutFree: true })
  } catch (err) {
    await store.close()
    await backends.close()
    // Left too: its heartbeat would keep the refused process running.
    await cluster?.leave()
    io.stderr(`barbican: cannot open the audit log: ${(err as Error).message}\n`)
    return 1
  }
  let server: RunningServer
  try {
    server = await startServer(
      config,
      log,
      { store, lockfilePath: lockfilePathOf(source.path), ...trustOptionsOf(options) },
      audit,
      backends,
    )
  } catch (err) {
    const why = listenFailure(err, config.listen.host, config.listen.port)
    if (why === undefined) throw err
    await audit?.close()
    await store.close()
    await backends.close()
    await cluster?.leave()
    io.stderr(`barbican: ${why}\n`)
    return 1
  }
  // With PostgreSQL, API keys live there too: every replica follows the one table.
  let sharedKeys: Awaited<ReturnType<typeof followPostgresKeys>> | undefined
  const keys = server.auth?.apiKeys
  if (config.store?.kind === 'postgres' && keys !== undefined) {
    try {
      sharedKeys = await followPostgresKeys(config.store.url, keys, log)
    } catch (err) {
      io.stderr(`barbican: cannot read the API keys in PostgreSQL: ${(err as Error).message}\n`)
      await server.stop()
      await audit?.close()
      await store.close()
      await backends.close()
      await cluster?.leave()
      return 1
    }
  }
  if (sharedKeys) server.useSharedKeys(sharedKeys.follower)
  if (cluster) await serveInFleet(cluster, server, process.env, sharedKeys?.follower)
  const what =
    source.format === 'demo' ? 'embedded demo configuration' : `${source.path} (${source.format})`
  log.info(`serving ${what} at ${server.url}/mcp (also /sse and /ws)`, {
    url: server.url,
    config: what,
  })
  for (const h of config.held ?? []) {
    log.warn('upstream held back', {
      upstream: h.name,
      reason: h.reason,
      next: 'set the variable and restart; the other upstreams run (--strict refuses instead)',
    })
  }
  for (const u of config.upstreams) {
    if (u.transport !== 'stdio') continue
    const sandbox = describeConfinement(u.name, u.sandbox, u.command)
    // An upstream that runs unconfined only because sandbox.fallback accepts it is a warning.
    const level = confinementOf(u.sandbox, u.command) === 'unconfined' ? 'warn' : 'info'
    // The grants with their sources, when there are any (the full form: check --verbose).
    const grants = grantLines(u.sandbox)
    log[level]('upstream sandbox', {
      upstream: u.name,
      sandbox,
      ...(grants.length > 0 ? { grants } : {}),
    })
  }
  server.configLabel = what
  const reloadable = source.path
  if (reloadable !== undefined) {
    server.reloader = new ConfigReloader({
      path: reloadable,
      load: () => loadQuietly({ ...options, config: reloadable }),
      apply: async (next) => {
        const diff = await server.apply(next)
        return diff
      },
      log,
      // An edited Cedar file reloads like an edited config file.
      alsoRead: () => policyFilePaths(server.config),
      debounceMs: RELOAD_DEBOUNCE_MS,
      pollMs: RELOAD_POLL_MS,
      onReloaded: (outcome) => {
        // A reload may add tools: the budget is judged again on the new catalog.
        if (outcome.ok) void warnOverBudget(server.gateway, server.config, log).catch(() => {})
        shareReload(cluster, outcome.trigger, outcome.ok)
        return audit?.record({
          type: 'admin',
          action: 'config.reload',
          actor: outcome.trigger,
          target: reloadable,
          outcome: outcome.ok ? 'ok' : 'error',
          detail: outcome.ok
            ? describeDiff(outcome.diff!) +
              (outcome.needsRestart?.length
                ? `; needs restart: ${outcome.needsRestart.join(', ')}`
                : '')
            : outcome.error,
        })
      },
    })
    server.reloader.watch()
  }
  const onHangup = () => {
    if (server.reloader) void server.reloader.reload('SIGHUP')
    else log.warn('SIGHUP ignored: the embedded demo has no config file to reload')
  }
  process.on('SIGHUP', onHangup)
  let stopping = false
  // Once every eager upstream has connected or failed: one line that says how start-up went.
  void server.started
    .then(async () => {
      const first = config.servers.find((s) => s.name === 'default') ?? config.servers[0]
      if (!first || stopping) return
      const at = `${server.url}${first.path}`
      const held = heldStatus(server.config.held)
      const summary = await startupSummary(server.gateway, first.name, at, undefined, held)
      if (stopping) return
      if (summary.degraded) log.warn(summary.message, summary.fields)
      else log.info(summary.message, summary.fields)
      await warnOverBudget(server.gateway, server.config, log)
    })
    .catch((error: unknown) => log.error('start-up failed', { error }))
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      process.off('SIGHUP', onHangup)
      stopping = true
      logShutdown(log, server)
      ;(cluster?.withdraw() ?? Promise.resolve())
        .then(() => server.stop())
        // After the drain: the shutdown checkpoint covers the last call's record.
        .finally(() => audit?.close())
        .catch((error: unknown) => log.error('audit shutdown checkpoint failed', { error }))
        .finally(() => store.close())
        .finally(() => sharedKeys?.close())
        .finally(() => backends.close())
        .finally(() => cluster?.leave())
        // Last: the spans of the requests the drain let finish are exported too.
        .finally(() => stopTracing())
        .finally(() => {
          log.info('stopped')
          resolve()
        })
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  return 0
}

/** Quiet time after the last change to the config file before it is reloaded. */
export const RELOAD_DEBOUNCE_MS = 300
/** How often the config file is polled, for filesystems where fs.watch misses changes. */
export const RELOAD_POLL_MS = 2_000

/** Loads and validates the file in the config worker, keeping its complaint for the log. */
async function loadQuietly(
  options: CommandOptions,
): Promise<{ readonly config: Config } | { readonly error: string }> {
  let said = ''
  const quiet: CliIo = { stdout: () => {}, stderr: (text) => (said += text) }
  const loaded = await loadForCommand(options, quiet, false)
  if (loaded) return { config: loaded.config }
  return { error: said.replace(/^barbican: /gm, '').trim() || 'the config file cannot be loaded' }
}

/** Says what the shutdown waits for: requests to drain (bounded), then sessions and upstreams. */
function logShutdown(log: Logger, server: RunningServer): void {
  const requests = server.http.openRequests
  const deadlineMs = server.http.options.shutdownDeadlineMs
  const running = server.gateway
    .status()
    .filter((u) => u.state === 'ready' || u.state === 'connecting')
    .map((u) => u.name)
  const sessions = server.gateway.sessions.size
  const waits = [
    `${requests} HTTP request${requests === 1 ? '' : 's'} in flight (at most ${deadlineMs / 1000} s)`,
    `${sessions} client session${sessions === 1 ? '' : 's'} to close`,
    running.length === 0
      ? 'no upstream to stop'
      : `${running.length} upstream${running.length === 1 ? '' : 's'} to stop (${running.join(', ')})`,
  ]
  log.info(`shutting down: waiting for ${waits.join(', then ')}`, {
    requests,
    deadlineMs,
    sessions,
    upstreams: running,
  })
}

/** One line for an address that cannot be bound, with what to do; undefined for other errors. */
export function listenFailure(err: unknown, host: string, port: number): string | undefined {
  const code = (err as { code?: unknown } | undefined)?.code
  const address = host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`
  switch (code) {
    case 'EADDRINUSE':
      return `cannot listen on ${address}: the port is already in use (another barbican serve?); stop that process or choose another port with --listen HOST:PORT or listen: in the config`
    case 'EACCES':
      return `cannot listen on ${address}: permission denied (ports below 1024 need privileges); choose another port with --listen HOST:PORT or listen: in the config`
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${address}: no network interface has that address; choose another with --listen HOST:PORT or listen: in the config`
    default:
      return undefined
  }
}
