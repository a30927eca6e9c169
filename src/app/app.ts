/**
 * The application `barbican serve` runs (ADR 118): the store, backends, fleet membership and
 * audit log opened in order, the server started on them, the configuration file followed for
 * reloads, and one stack of clean-up steps that a failed start unwinds and a stop runs, last
 * opened first. The CLI parses arguments, calls `startServeApp`, and waits for a signal.
 */
import type { AuditLog } from '../audit/audit-log.ts'
import type { Cluster } from '../cluster/cluster.ts'
import type { Config, LoadedConfig } from '../config/config.ts'
import { openBackends } from '../gateway/backends.ts'
import { heldStatus } from '../gateway/gateway.ts'
import { policyFilePaths } from '../gateway/reload.ts'
import { followPostgresKeys } from '../gateway/shared-api-keys.ts'
import { startupSummary } from '../gateway/startup-summary.ts'
import { warnOverBudget } from '../gateway/token-budget.ts'
import { lockfilePathOf, type TrustSetup } from '../gateway/trust-setup.ts'
import { confinementOf, describeConfinement } from '../sandbox/confine.ts'
import { grantLines } from '../sandbox/grants.ts'
import type { Logger } from '../telemetry/log.ts'
import { Disposers } from './disposers.ts'
import { joinFleet, serveInFleet, shareReload } from './fleet.ts'
import { opening, openParts, StartError, warnHeld } from './parts.ts'
import { ConfigReloader, describeDiff } from './reloader.ts'
import { type RunningServer, startServer } from './server.ts'

/** Quiet time after the last change to the config file before it is reloaded. */
export const RELOAD_DEBOUNCE_MS = 300
/** How often the config file is polled, for filesystems where fs.watch misses changes. */
export const RELOAD_POLL_MS = 2_000

export interface ServeAppOptions {
  readonly log: Logger
  /** What the CLI adds to trust (suggested commands, `--allow-floating`). */
  readonly trust: Omit<TrustSetup, 'store'>
  /**
   * Loads and validates the configuration file again, for a reload (the CLI's loader, in the
   * config worker); its complaint is kept for the log.
   */
  readonly load: (path: string) => Promise<{ readonly config: Config } | { readonly error: string }>
}

export interface ServeApp {
  readonly server: RunningServer
  /** Reloads the configuration file (SIGHUP); false: the embedded demo has none. */
  reload(trigger: string): boolean
  /** Withdraws from the fleet, drains, then closes everything, last opened first. */
  stop(): Promise<void>
}

/**
 * Starts everything `serve` runs. Throws a StartError (one line for the operator) when a part
 * cannot be opened or the address cannot be bound, after closing what was opened before it.
 */
export async function startServeApp(
  loaded: LoadedConfig,
  options: ServeAppOptions,
): Promise<ServeApp> {
  const { config, source } = loaded
  const { log } = options
  const stack = new Disposers()
  const { store, audit } = await openParts(stack, loaded, log, true)
  const backends = await opening(stack, undefined, () => openBackends(config))
  stack.push('backends', () => backends.close())
  const cluster = await opening(stack, undefined, () => joinFleet(config.redis, process.env, log))
  // Left at a failed start too: its heartbeat would keep the refused process running.
  if (cluster) stack.push('fleet', () => cluster.leave())
  const trust = { store, lockfilePath: lockfilePathOf(source.path), ...options.trust }
  let server: RunningServer
  try {
    server = await startServer(config, log, trust, audit, backends)
  } catch (err) {
    await stack.dispose()
    // An address that cannot be bound is the operator's to fix; anything else is a bug.
    const why = listenFailure(err, config.listen.host, config.listen.port)
    throw why === undefined ? err : new StartError(why, { cause: err })
  }
  // With PostgreSQL, API keys live there too: every replica follows the one table.
  const keys = server.auth?.apiKeys
  const postgres = config.store?.kind === 'postgres' ? config.store : undefined
  const sharedKeys =
    postgres !== undefined && keys !== undefined
      ? await opening(stack, 'cannot read the API keys in PostgreSQL', () =>
          followPostgresKeys(postgres.url, keys, log).catch(async (err: unknown) => {
            await server.stop()
            throw err
          }),
        )
      : undefined
  // One step: the keys are followed until the drain has ended.
  stack.push('server', async () => {
    await server.stop()
    await sharedKeys?.close()
  })
  if (sharedKeys) server.useSharedKeys(sharedKeys.follower)
  if (cluster) {
    await serveInFleet(cluster, server, process.env, sharedKeys?.follower)
    // First at a stop: the others stop relaying here, so clients get the spec's 404.
    stack.push('withdrawal from the fleet', () => cluster.withdraw())
  }
  announce(loaded, server, log)
  followFile(loaded, server, options, { cluster, audit })
  let stopping = false
  void summarizeStart(server, config, log, () => stopping)
  return {
    server,
    reload(trigger) {
      if (!server.reloader) return false
      void server.reloader.reload(trigger)
      return true
    },
    async stop() {
      stopping = true
      logShutdown(log, server)
      await stack.dispose((name, error) =>
        name === 'audit'
          ? log.error('audit shutdown checkpoint failed', { error })
          : log.error(`stopping the ${name} failed`, { error }),
      )
      log.info('stopped')
    },
  }
}

/** Says what is served where, and how each stdio upstream is confined. */
function announce(loaded: LoadedConfig, server: RunningServer, log: Logger): void {
  const { config, source } = loaded
  const what =
    source.format === 'demo' ? 'embedded demo configuration' : `${source.path} (${source.format})`
  log.info(`serving ${what} at ${server.url}/mcp (also /sse and /ws)`, {
    url: server.url,
    config: what,
  })
  warnHeld(config, log)
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
}

/** Reloads the configuration file when it (or a Cedar file it names) changes. */
function followFile(
  loaded: LoadedConfig,
  server: RunningServer,
  options: ServeAppOptions,
  { cluster, audit }: { cluster: Cluster | undefined; audit: AuditLog | undefined },
): void {
  const reloadable = loaded.source.path
  if (reloadable === undefined) return
  const { log } = options
  server.reloader = new ConfigReloader({
    path: reloadable,
    load: () => options.load(reloadable),
    apply: (next) => server.apply(next),
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

/** Once every eager upstream has connected or failed: one line that says how start-up went. */
async function summarizeStart(
  server: RunningServer,
  config: Config,
  log: Logger,
  stopping: () => boolean,
): Promise<void> {
  try {
    await server.started
    const first = config.servers.find((s) => s.name === 'default') ?? config.servers[0]
    if (!first || stopping()) return
    const at = `${server.url}${first.path}`
    const held = heldStatus(server.config.held)
    const summary = await startupSummary(server.gateway, first.name, at, undefined, held)
    if (stopping()) return
    if (summary.degraded) log.warn(summary.message, summary.fields)
    else log.info(summary.message, summary.fields)
    await warnOverBudget(server.gateway, server.config, log)
  } catch (error) {
    log.error('start-up failed', { error })
  }
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

export { StartError }
