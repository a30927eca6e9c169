/**
 * `barbican check`: validates the configuration, then connects to every upstream once and lists
 * what it offers. Exits non-zero with a precise message on the first class of fault found.
 */

import { jsonLogger } from '../common/log.ts'
import type { LoadedConfig } from '../config/config.ts'
import { Gateway } from '../gateway/gateway.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { lockfilePathOf, withTrust } from '../gateway/trust-setup.ts'
import { printableName } from '../protocol/item-names.ts'
import { memoryStore } from '../store/memory.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'
import { reportDrift } from './pins.ts'

export async function runCheck(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
  const { config, source } = loaded
  io.stdout(
    `config: ${source.path ?? 'embedded demo'} (${source.format}), ${config.upstreams.length} upstream(s), ${config.servers.length} virtual server(s)\n`,
  )
  const log = jsonLogger({ level: 'error' })
  // Launches are checked as serve checks them (lockfile, floating versions); nothing is pinned.
  const trust = { store: memoryStore(), lockfilePath: lockfilePathOf(source.path) }
  const gateway = new Gateway(withTrust(planFromConfig(config, log), config, trust, log), log)
  let failed = 0
  try {
    for (const upstream of gateway.upstreams.values()) {
      try {
        await upstream.connect()
        const tools = await upstream.list('tools')
        const info = upstream.info
        io.stdout(
          `ok    ${upstream.name}: ${String(info?.serverInfo.name ?? '?')} ${String(info?.serverInfo.version ?? '')}, MCP ${info?.protocolVersion}, ${tools.length} tool(s)\n`,
        )
      } catch (err) {
        failed++
        io.stdout(`FAIL  ${upstream.name}: ${(err as Error).message}\n`)
      }
    }
    for (const server of gateway.servers.values()) {
      const { catalog } = await server.catalog()
      for (const h of catalog.heldBack) {
        io.stdout(
          `warn  server ${server.name}: ${h.kind} "${printableName(h.original)}" of ${h.upstream} held back: ${h.reason}\n`,
        )
      }
      for (const c of catalog.conflicts) {
        io.stdout(
          `warn  server ${server.name}: ${c.kind} name "${c.name}" offered by ${c.upstreams.join(', ')}\n`,
        )
      }
    }
  } finally {
    await gateway.stop()
  }
  const drifted = await reportDrift(config, source.path, io)
  if (failed > 0) {
    io.stderr(`barbican: ${failed} upstream(s) failed\n`)
    return 1
  }
  if (drifted) {
    io.stderr('barbican: the configuration drifted from its approved baseline\n')
    return 1
  }
  return 0
}
