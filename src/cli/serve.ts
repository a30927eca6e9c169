/**
 * `barbican serve`: the gateway over HTTP (Streamable HTTP, legacy SSE, WebSocket) with health,
 * readiness and metrics endpoints, until SIGINT or SIGTERM, which drain in-flight requests. The
 * application is assembled in src/app/app.ts; this checks the arguments, starts it and waits.
 */
import { type ServeApp, StartError, startServeApp } from '../app/app.ts'
import { hasInboundAuth } from '../auth/bind-policy.ts'
import type { Config, LoadedConfig } from '../config/config.ts'
import { isLoopbackHost } from '../config/listen.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import { type CliIo, type CommandOptions, trustOptionsOf } from './command.ts'
import { loadForCommand } from './load.ts'
import { loggerFor } from './logging.ts'

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
  const { config } = loaded
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
  let app: ServeApp
  try {
    app = await startServeApp(loaded, {
      log,
      trust: trustOptionsOf(options),
      load: (path) => loadQuietly({ ...options, config: path }),
    })
  } catch (err) {
    if (!(err instanceof StartError)) throw err
    io.stderr(`barbican: ${err.message}\n`)
    return 1
  }
  const onHangup = () => {
    if (!app.reload('SIGHUP'))
      log.warn('SIGHUP ignored: the embedded demo has no config file to reload')
  }
  process.on('SIGHUP', onHangup)
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop)
      process.off('SIGTERM', stop)
      process.off('SIGHUP', onHangup)
      void app.stop().finally(resolve)
    }
    process.on('SIGINT', stop)
    process.on('SIGTERM', stop)
  })
  return 0
}

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
