/**
 * `barbican pins` (list, diff, approve, reject, history, baseline) and `barbican lock`: the
 * operator's side of trust. Pins live in the store the configuration names; every decision is
 * recorded with who made it.
 */
import { existsSync } from 'node:fs'
import { userInfo } from 'node:os'
import { TRUST_DECISION, tellFleet } from '../app/fleet.ts'
import type { AuditLog } from '../audit/audit-log.ts'
import type { Config, LoadedConfig } from '../config/config.ts'
import { openAuditLog } from '../gateway/audit-setup.ts'
import { lockfilePathOf, openStore, storeConfigOf } from '../gateway/trust-setup.ts'
import { printableName } from '../protocol/item-names.ts'
import { installNpmPackage, npxPackageOf } from '../sandbox/npm-install.ts'
import type { PendingChange, Store } from '../store/store.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { wasmModuleHash } from '../transports/wasm-outbound.ts'
import { approveChange, rejectChange, reviewChanges } from '../trust/decisions.ts'
import { formatChanges } from '../trust/diff.ts'
import { approveBaseline, configDocument, configDrift } from '../trust/drift.ts'
import { QUARANTINE_SEVERITIES, type Severity } from '../trust/findings.ts'
import { launchOf } from '../trust/launch.ts'
import {
  findNpmPackage,
  type LockEntry,
  type Lockfile,
  observeLaunch,
  readLockfile,
  scriptsAllowed,
  writeLockfile,
} from '../trust/lockfile.ts'
import { type CliIo, type CommandOptions, suggestCommand, unknownWord } from './command.ts'
import { loadForCommand } from './load.ts'

/** Who is deciding: `--as NAME`, else the login name. */
export function actorOf(options: CommandOptions): string {
  if (options.actor) return options.actor
  try {
    return userInfo().username
  } catch {
    return 'operator'
  }
}

/** The subcommands of `barbican pins`. */
export const PINS_ACTIONS = ['list', 'diff', 'approve', 'reject', 'history', 'baseline'] as const

/** What every `pins` action works on: the loaded configuration, its store, what was named. */
interface PinsAction {
  readonly loaded: LoadedConfig
  readonly store: Store
  readonly options: CommandOptions
  readonly io: CliIo
  readonly upstream: string | undefined
  readonly key: string | undefined
}

export async function runPins(
  options: CommandOptions,
  args: readonly string[],
  io: CliIo,
): Promise<number> {
  const [action = 'list', upstream, key] = args
  // Named before the config loads: a typo needs no store to be answered.
  if (!(PINS_ACTIONS as readonly string[]).includes(action)) {
    io.stderr(
      `barbican: ${unknownWord('pins subcommand', action, PINS_ACTIONS)}; pins subcommands: ${PINS_ACTIONS.join(', ')}\n`,
    )
    return 2
  }
  const loaded = await loadForCommand(options, io, false)
  if (!loaded) return 1
  const store = await openStore(loaded.config, loaded.source.path)
  const context: PinsAction = { loaded, store, options, io, upstream, key }
  try {
    switch (action as (typeof PINS_ACTIONS)[number]) {
      case 'list':
        return await listPins(context)
      case 'diff':
        return await diffPins(context)
      case 'approve':
        return await decide(context, 'approve')
      case 'reject':
        return await decide(context, 'reject')
      case 'history':
        return await pinHistory(context)
      case 'baseline':
        return await approveConfigBaseline(context)
    }
  } catch (err) {
    io.stderr(`barbican: ${withConfig((err as Error).message, options)}\n`)
    return 1
  } finally {
    await store.close()
  }
}

/** `pins list`: how many items each upstream has pinned, and the changes awaiting review. */
async function listPins({ store, io, upstream }: PinsAction): Promise<number> {
  const pinned = await store.pins.pinned(upstream)
  const counts = new Map<string, number>()
  for (const p of pinned) counts.set(p.upstream, (counts.get(p.upstream) ?? 0) + 1)
  for (const [name, n] of counts) io.stdout(`pinned   ${name}: ${n} item(s)\n`)
  const reviews = await reviewChanges(store.pins, { upstream })
  for (const { change, changes } of reviews) {
    const fields = changes.map((c) => c.path).join(', ')
    io.stdout(
      `${change.status.padEnd(8)} ${change.upstream} ${printableName(change.key)}  ${change.reason}` +
        `${fields ? ` (${fields})` : ''}  seen ${change.seenAt}\n`,
    )
  }
  if (reviews.length === 0) io.stdout('no pending changes\n')
  return 0
}

/** `pins diff`: each change awaiting review against what was approved, with its findings. */
async function diffPins({ store, io, upstream, key }: PinsAction): Promise<number> {
  const reviews = await reviewChanges(store.pins, { upstream, key })
  for (const { change, approved, changes } of reviews) {
    io.stdout(
      `${change.upstream} ${printableName(change.key)}: ${change.reason}, ${change.status}` +
        `${approved ? ` (approved ${approved.approvedAt} by ${approved.approvedBy})` : ' (never approved)'}\n`,
    )
    for (const line of formatChanges(changes)) io.stdout(`  ${line}\n`)
    for (const f of change.findings as {
      rule?: string
      severity?: string
      message?: string
    }[])
      io.stdout(
        `  finding ${f.rule} (${f.severity}): ${printableName(f.message ?? '', Number.POSITIVE_INFINITY)}\n`,
      )
  }
  if (reviews.length === 0) io.stdout('no pending changes\n')
  return 0
}

/**
 * `pins approve|reject UPSTREAM (KEY|--all)`: each decision recorded with who made it, in the
 * store and in the audit log (an administrative act); the fleet is told once.
 */
async function decide(
  { loaded, store, options, io, upstream, key }: PinsAction,
  action: 'approve' | 'reject',
): Promise<number> {
  if (upstream === undefined || (key === undefined && !options.all)) {
    io.stderr(`barbican: pins ${action} needs UPSTREAM KEY (or UPSTREAM --all)\n`)
    return 2
  }
  const pending = await store.pins.pending(upstream)
  const keys =
    key !== undefined ? [key] : pending.filter((p) => p.status === 'pending').map((p) => p.key)
  if (action === 'approve') {
    const severe = pending.filter((p) => keys.includes(p.key) && severeFindings(p).length > 0)
    if (!(await confirmSevere(severe, io))) {
      io.stderr('barbican: nothing approved\n')
      return 1
    }
  }
  const actor = actorOf(options)
  const audit = await openAudit(loaded)
  try {
    for (const k of keys) {
      if (action === 'approve') await approveChange(store.pins, upstream, k, actor)
      else await rejectChange(store.pins, upstream, k, actor)
      await audit?.record({
        type: 'admin',
        action: `pin.${action}`,
        actor,
        upstream,
        target: k,
        outcome: 'ok',
      })
      io.stdout(
        `${action === 'approve' ? 'approved' : 'rejected'} ${upstream} ${printableName(k)}\n`,
      )
    }
    if (keys.length > 0) await tellFleet(loaded.config.redis, TRUST_DECISION, io.stderr)
    return 0
  } finally {
    await audit?.close()
  }
}

/** `pins history [UPSTREAM [KEY]]`: every decision recorded, oldest first. */
async function pinHistory({ store, options, io, upstream, key }: PinsAction): Promise<number> {
  const entries = await store.pins.history({
    ...(upstream === undefined ? {} : { upstream }),
    ...(key === undefined ? {} : { key }),
  })
  if (entries.length === 0) {
    const of = upstream === undefined ? '' : ` for ${upstream}${key === undefined ? '' : ` ${key}`}`
    io.stdout(
      `no decisions recorded yet${of}: pins are recorded once \`${suggestCommand(options, 'serve')}\` or \`${suggestCommand(options, 'check')}\` has seen the upstreams\n`,
    )
  }
  for (const e of entries) {
    io.stdout(
      `${e.at} ${e.upstream} ${printableName(e.key)} ${e.action} by ${e.actor} ${e.hash.slice(0, 12)}\n`,
    )
  }
  return 0
}

/** `pins baseline`: the configuration as it is becomes the approved drift baseline. */
async function approveConfigBaseline({ loaded, store, options, io }: PinsAction): Promise<number> {
  const document = configDocument(loaded.config, lockfilePathOf(loaded.source.path))
  const audit = await openAudit(loaded)
  try {
    const baseline = await approveBaseline(store.baselines, document, actorOf(options))
    await audit?.record({
      type: 'admin',
      action: 'config.baseline',
      actor: actorOf(options),
      target: baseline.hash,
      outcome: 'ok',
    })
    io.stdout(`approved the configuration as baseline ${baseline.hash.slice(0, 12)}\n`)
    return 0
  } finally {
    await audit?.close()
  }
}

/** The configuration's audit log, opened for this command's acts (no periodic work). */
function openAudit(loaded: LoadedConfig): Promise<AuditLog | undefined> {
  return openAuditLog(loaded.config, loaded.source.path, {
    log: jsonLogger({ level: 'error' }),
    running: false,
    stdoutFree: true,
  })
}

/** The findings of a pending change severe enough that the scan would quarantine it. */
function severeFindings(change: PendingChange): { rule?: string; message?: string }[] {
  return (change.findings as { rule?: string; severity?: string; message?: string }[]).filter((f) =>
    QUARANTINE_SEVERITIES.has(f.severity as Severity),
  )
}

/**
 * Warns before approving definitions the scan flags as high or critical, and on a terminal
 * asks first; without one (scripts, CI) the warning is printed and the approval goes ahead,
 * since the operator named the change explicitly.
 */
async function confirmSevere(severe: readonly PendingChange[], io: CliIo): Promise<boolean> {
  if (severe.length === 0) return true
  for (const change of severe) {
    io.stderr(
      `barbican: warning: ${change.upstream} ${printableName(change.key)} carries high scan findings:\n`,
    )
    for (const f of severeFindings(change))
      io.stderr(`  ${f.rule}: ${printableName(f.message ?? '', Number.POSITIVE_INFINITY)}\n`)
  }
  if (!io.ask) return true
  const answer = await io.ask('Approve anyway? [y/N] ')
  return /^y(es)?$/i.test(answer.trim())
}

/** A message from below the CLI that suggests a `barbican` command, with the user's --config. */
function withConfig(message: string, options: CommandOptions): string {
  return message.replace(
    /\(see: barbican ([a-z ]+)\)/,
    (_, args: string) => `(see: ${suggestCommand(options, args)})`,
  )
}

/**
 * `barbican lock`: writes `barbican.lock` beside the config from what is installed now, for
 * every stdio upstream launched from a package or script. Floating versions are locked to the
 * installed version only where the upstream allows floating.
 */
export async function runLock(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
): Promise<number> {
  const loaded = await loading
  if (!loaded) return 1
  const path = lockfilePathOf(loaded.source.path)
  let previous: Lockfile | undefined
  try {
    previous = readLockfile(path)
  } catch {
    previous = undefined
  }
  const upstreams: Record<string, LockEntry> = {}
  let failed = 0
  for (const u of loaded.config.upstreams) {
    if (u.transport === 'wasm') {
      try {
        const sha256 = await wasmModuleHash(u.source, u.maxModuleBytes)
        upstreams[u.name] = { runner: 'wasm', path: u.source, sha256, files: '' }
        const was = previous?.upstreams[u.name]
        const note = was === undefined ? 'added' : was.sha256 === sha256 ? 'unchanged' : 'updated'
        io.stdout(`locked  ${u.name}: ${u.source} sha256 ${sha256} (${note})\n`)
      } catch (err) {
        failed++
        io.stdout(`FAIL    ${u.name}: ${(err as Error).message}\n`)
      }
      continue
    }
    if (u.transport !== 'stdio') continue
    const launch = launchOf(u.command, u.args, u.env)
    if (!launch) continue
    if (launch.kind === 'inline' && u.trust?.allowInlineCode === true) {
      // Allowed inline code is launched unlocked: there is no file to pin.
      io.stdout(`skipped ${u.name}: ${launch.reason}, which cannot be locked\n`)
      continue
    }
    try {
      const packageCache = u.sandbox === 'none' ? undefined : u.sandbox.packageCache
      const context = { cwd: u.cwd ?? process.cwd(), home: u.env.HOME ?? process.env.HOME }
      // A confined npx package runs from Barbican's cache: lock what will run, installed now.
      const npx = packageCache === undefined ? undefined : npxPackageOf(u.command, u.args)
      if (
        npx &&
        packageCache &&
        !findNpmPackage(npx.name, npx.version, { ...context, packageCache })
      ) {
        const allowScripts = scriptsAllowed(previous, u.name) ? true : u.trust?.allowScripts
        await installNpmPackage(packageCache, npx.name, npx.version, { allowScripts })
      }
      const observed = observeLaunch(launch, { ...context, packageCache })
      // Allowing install scripts is the operator's word in the lock; relocking keeps it.
      const entry = previous?.upstreams[u.name]?.allowScripts
        ? { ...observed, allowScripts: true }
        : observed
      upstreams[u.name] = entry
      const was = previous?.upstreams[u.name]
      const label = entry.package ? `${entry.package}@${entry.version ?? '?'}` : entry.path
      const note = was === undefined ? 'added' : was.files === entry.files ? 'unchanged' : 'updated'
      io.stdout(`locked  ${u.name}: ${label} (${note})\n`)
    } catch (err) {
      failed++
      io.stdout(`FAIL    ${u.name}: ${(err as Error).message}\n`)
    }
  }
  if (failed > 0) {
    io.stderr(`barbican: ${failed} upstream(s) could not be locked; ${path} left unchanged\n`)
    return 1
  }
  writeLockfile(path, { lockfileVersion: 1, upstreams })
  io.stdout(`wrote ${path}\n`)
  return 0
}

/**
 * For `barbican check`: prints drift from the approved configuration baseline and returns
 * whether there is any. The store is only read, and only if it already exists.
 */
export async function reportDrift(
  config: Config,
  configPath: string | undefined,
  io: CliIo,
  hintOptions: CommandOptions = { allowInsecureNonLoopback: false },
): Promise<boolean> {
  const where = storeConfigOf(config, configPath)
  if (where.kind === 'memory' || (where.kind === 'sqlite' && !existsSync(where.path))) {
    io.stdout(
      `note  no configuration baseline yet (approve one with: ${suggestCommand(hintOptions, 'pins baseline')})\n`,
    )
    return false
  }
  const store = await openStore(config, configPath)
  try {
    const drift = await configDrift(
      store.baselines,
      configDocument(config, lockfilePathOf(configPath)),
    )
    if (!drift) {
      io.stdout(
        `note  no configuration baseline yet (approve one with: ${suggestCommand(hintOptions, 'pins baseline')})\n`,
      )
      return false
    }
    if (drift.changes.length === 0) {
      io.stdout(`ok    configuration matches the baseline approved ${drift.baseline.approvedAt}\n`)
      return false
    }
    io.stdout(
      `DRIFT configuration differs from the baseline approved ${drift.baseline.approvedAt} by ${drift.baseline.approvedBy}:\n`,
    )
    for (const line of formatChanges(drift.changes)) io.stdout(`  ${line}\n`)
    return true
  } finally {
    await store.close()
  }
}
