/**
 * `barbican stdio`: one virtual server on stdin/stdout, for hosts that launch MCP servers as
 * processes. Logs go to stderr; stdout carries nothing but JSON-RPC.
 */
import { Gateway } from '../gateway.ts'
import { planFromConfig } from '../gateway-plan.ts'
import { jsonLogger } from '../log.ts'
import { serveStdio } from '../transports/stdio-inbound.ts'
import { loadForCommand } from './load.ts'
import type { CliIo, CommandOptions } from './main.ts'

export async function runStdio(options: CommandOptions, io: CliIo): Promise<number> {
  const loaded = await loadForCommand(options, io, true)
  if (!loaded) return 1
  const { config } = loaded
  const server = options.server ?? config.servers[0]?.name ?? 'default'
  const log = jsonLogger({ level: config.log.level })
  const gateway = new Gateway(planFromConfig(config, log), log)
  if (!gateway.hasServer(server)) {
    io.stderr(`barbican: no virtual server named "${server}"\n`)
    return 1
  }
  const transport = serveStdio(gateway, { server, jsonLimits: config.limits })
  void gateway.start()
  await new Promise<void>((resolve) => {
    const previous = transport.onclose
    transport.onclose = () => {
      previous?.()
      resolve()
    }
    process.once('SIGTERM', () => void transport.close())
    process.once('SIGINT', () => void transport.close())
  })
  await gateway.stop()
  return 0
}
