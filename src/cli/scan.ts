/**
 * `barbican scan`: connects to every upstream once and runs the poisoning and collision checks
 * over everything they advertise, across all upstreams of the configuration. Exits non-zero when
 * a high or critical finding (or an upstream that cannot be listed) needs attention.
 */

import type { LoadedConfig } from '../config/config.ts'
import { Gateway } from '../gateway/gateway.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { lockfilePathOf, withTrust } from '../gateway/trust-setup.ts'
import { printableName } from '../protocol/item-names.ts'
import { memoryStore } from '../store/memory.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { type Finding, QUARANTINE_SEVERITIES, type ScannedUpstream } from '../trust/findings.ts'
import { scanSurfaces } from '../trust/scan.ts'
import { itemKey, surfaceOf } from '../trust/surface.ts'
import type { CliIo, CommandOptions } from './command.ts'
import { loadForCommand } from './load.ts'

const RANK: Readonly<Record<Finding['severity'], number>> = {
  critical: 0,
  high: 1,
  medium: 2,
  low: 3,
}

export async function runScan(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
  const { config, source } = loaded
  const log = jsonLogger({ level: 'error' })
  // Scanning pins nothing: the store is a throwaway one.
  const store = memoryStore()
  const plan = withTrust(
    planFromConfig(config, log),
    config,
    { store, lockfilePath: lockfilePathOf(source.path) },
    log,
  )
  const gateway = new Gateway(plan, log)
  const surfaces: ScannedUpstream[] = []
  let failed = 0
  try {
    for (const upstream of gateway.upstreams.values()) {
      try {
        await upstream.connect()
        const [tools, prompts, resourceTemplates] = await Promise.all([
          upstream.list('tools'),
          upstream.list('prompts'),
          upstream.list('resourceTemplates'),
        ])
        const items = surfaceOf({
          tools,
          prompts,
          resourceTemplates,
          instructions: upstream.info?.instructions,
          serverInfo: upstream.info?.serverInfo,
        })
        surfaces.push({ upstream: upstream.name, items })
        io.stdout(`scanned ${upstream.name}: ${items.length} item(s)\n`)
      } catch (err) {
        failed++
        io.stdout(`FAIL    ${upstream.name}: ${(err as Error).message}\n`)
      }
    }
  } finally {
    await gateway.stop()
  }
  const findings = scanSurfaces(surfaces).sort((a, b) => RANK[a.severity] - RANK[b.severity])
  for (const f of findings) {
    // Names and messages quote what upstreams wrote: hidden characters are shown escaped, so a
    // hostile name cannot drive the operator's terminal.
    io.stdout(
      `${f.severity.padEnd(8)} ${f.upstream} ${itemKey(f.kind, printableName(f.name))} ${f.rule}: ` +
        `${printableName(f.message, Number.POSITIVE_INFINITY)}${f.field ? ` [${f.field}]` : ''}\n`,
    )
  }
  const severe = findings.filter((f) => QUARANTINE_SEVERITIES.has(f.severity)).length
  io.stdout(`${findings.length} finding(s), ${severe} high or critical\n`)
  return severe > 0 || failed > 0 ? 1 : 0
}
