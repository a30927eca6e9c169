/** Loading the configuration for a command: the named file, the default file, or the demo. */

import type { LoadedConfig } from '../config/config.ts'
import { demoConfig } from '../config/demo.ts'
import { loadConfig } from '../config/load.ts'
import type { CliIo, CommandOptions } from './main.ts'

/**
 * Returns the loaded configuration, or `undefined` after printing why it cannot be loaded.
 * With `demo`, a missing default file yields the embedded demo configuration.
 */
export async function loadForCommand(
  options: CommandOptions,
  io: CliIo,
  demo: boolean,
): Promise<LoadedConfig | undefined> {
  try {
    const loaded = await loadConfig({
      path: options.config,
      cwd: process.cwd(),
      env: process.env,
      listen: options.listen,
    })
    if (loaded) {
      for (const warning of loaded.warnings) io.stderr(`barbican: warning: ${warning}\n`)
      return loaded
    }
    if (!demo) {
      io.stderr('barbican: no configuration: pass --config FILE or create barbican.yaml here\n')
      return undefined
    }
    return demoConfig({ listen: options.listen })
  } catch (err) {
    io.stderr(`barbican: ${(err as Error).message}\n`)
    return undefined
  }
}
