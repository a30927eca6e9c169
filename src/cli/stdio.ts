/**
 * `barbican stdio`: one virtual server on stdin/stdout, for hosts that launch MCP servers as
 * processes. The application is assembled in src/app/stdio.ts; this parses and waits.
 */
import { StartError } from '../app/parts.ts'
import { startStdioApp } from '../app/stdio.ts'
import type { LoadedConfig } from '../config/config.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import { type CliIo, type CommandOptions, trustOptionsOf } from './command.ts'
import { loadForCommand } from './load.ts'
import { loggerFor } from './logging.ts'

export async function runStdio(
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
  let app: Awaited<ReturnType<typeof startStdioApp>>
  try {
    app = await startStdioApp(loaded, {
      logFor: (config) => loggerFor(config.log),
      trust: trustOptionsOf(options),
      server: options.server,
    })
  } catch (err) {
    if (!(err instanceof StartError)) throw err
    io.stderr(`barbican: ${err.message}\n`)
    return 1
  }
  const stop = () => void app.stop()
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
  await app.closed
  process.off('SIGTERM', stop)
  process.off('SIGINT', stop)
  await app.stop()
  return 0
}
