/**
 * `barbican serve`: the gateway over HTTP (Streamable HTTP, legacy SSE, WebSocket) with health,
 * readiness and metrics endpoints, until SIGINT or SIGTERM, which drain in-flight requests.
 */
import type { ServerResponse } from 'node:http'
import { AuthRuntime } from '../auth/auth-runtime.ts'
import { hasInboundAuth } from '../auth/bind-policy.ts'
import { jsonLogger, type Logger } from '../common/log.ts'
import { startTracing, stopTracing } from '../common/tracing.ts'
import { VERSION } from '../common/version.ts'
import type { Config, LoadedConfig } from '../config/config.ts'
import { isLoopbackHost } from '../config/listen.ts'
import { Gateway } from '../gateway/gateway.ts'
import { landingPage } from '../gateway/landing-page.ts'
import { metricsRoute } from '../gateway/metrics-endpoint.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { lockfilePathOf, openStore, type TrustSetup, withTrust } from '../gateway/trust-setup.ts'
import { memoryStore } from '../store/memory.ts'
import { createHttpInbound, type HttpInbound } from '../transports/http-inbound.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

export interface RunningServer {
  readonly gateway: Gateway
  readonly http: HttpInbound
  readonly url: string
  /** Identity and credentials (present when the config has `auth:`). */
  readonly auth: AuthRuntime | undefined
  /** Settles when every eager upstream has connected or failed to (the gateway's start). */
  readonly started: Promise<void>
  stop(): Promise<void>
}

/**
 * Starts a gateway and its HTTP listener from a configuration (used by the CLI and tests).
 * `trust` holds the pin store and lockfile; by default pins are kept in memory only.
 */
export async function startServer(
  config: Config,
  log: Logger,
  trust: TrustSetup = { store: memoryStore() },
): Promise<RunningServer> {
  const auth = config.auth ? new AuthRuntime(config.auth, log.child({ part: 'auth' })) : undefined
  const plan = withTrust(planFromConfig(config, log, auth), config, trust, log)
  // Only `serve` has a /metrics endpoint: other commands never load prom-client.
  const { enabled, maxTools } = config.metrics
  const gateway = new Gateway(enabled ? { ...plan, metrics: { maxTools } } : plan, log)
  const http = createHttpInbound(
    gateway,
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
    log,
  )
  http.routes.set('/readyz', (_req, res) => {
    const upstreams = gateway.status()
    const ready = upstreams.every((u) => u.state === 'ready' || u.state === 'idle')
    sendJson(res, ready ? 200 : 503, { status: ready ? 'ready' : 'degraded', upstreams })
  })
  http.routes.set(
    '/',
    landingPage({
      version: VERSION,
      authenticated: hasInboundAuth(config.auth),
      servers: config.servers.map((s) => s.name),
      status: () => gateway.status(),
    }),
  )
  http.routes.set(
    '/metrics',
    metricsRoute(gateway.metrics, config.metrics, {
      loopback: isLoopbackHost(config.listen.host),
      authenticator: auth && hasInboundAuth(config.auth) ? auth.authenticator : undefined,
      token: config.metrics.token,
    }),
  )
  await http.listen()
  auth?.install(
    http,
    config.servers.map((s) => s.name),
  )
  // Upstreams connect in the background: the listener answers at once, lists degrade meanwhile.
  const started = gateway.start()
  return {
    gateway,
    http,
    url: http.url,
    auth,
    started,
    async stop() {
      await http.close()
      await gateway.stop()
      await auth?.close()
    },
  }
}

export async function runServe(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, true),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
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
  const log = jsonLogger({ level: config.log.level })
  try {
    if (await startTracing(process.env, log)) log.info('tracing on: spans exported over OTLP')
  } catch (error) {
    io.stderr(`barbican: ${(error as Error).message}\n`)
    return 1
  }
  const store = await openStore(config, source.path)
  const server = await startServer(config, log, {
    store,
    lockfilePath: lockfilePathOf(source.path),
  })
  const what =
    source.format === 'demo' ? 'embedded demo configuration' : `${source.path} (${source.format})`
  log.info('barbican listening', { url: server.url, config: what })
  io.stderr(`Barbican is serving ${what} at ${server.url}/mcp (also /sse and /ws)\n`)
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      log.info('shutting down')
      server
        .stop()
        .finally(() => store.close())
        // Last: the spans of the requests the drain let finish are exported too.
        .finally(() => stopTracing())
        .finally(resolve)
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  return 0
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' })
  res.end(JSON.stringify(body))
}
