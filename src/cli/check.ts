/**
 * `barbican check`: validates the configuration (and the files its auth section names), then
 * connects to every upstream once and lists what it offers; with `--pins`, compares what each
 * upstream advertises with its approved pins; with `--diff`, previews what reloading the file
 * would change on the running gateway (src/cli/reload-preview.ts). Exits non-zero with a precise message on any fault.
 */

import { existsSync } from 'node:fs'
import { checkAuth } from '../auth/auth-check.ts'
import type { LoadedConfig } from '../config/config.ts'
import { overBudget, TOKEN_ENCODING, toolCosts } from '../exposure/tool-tokens.ts'
import { Gateway } from '../gateway/gateway.ts'
import { exposedTools } from '../gateway/overview.ts'
import { planFromConfig } from '../gateway/plan.ts'
import { lockfilePathOf, openStore, storeConfigOf, withTrust } from '../gateway/trust-setup.ts'
import { readPolicyFiles, validatePolicies } from '../policies/cedar-engine.ts'
import { printableName } from '../protocol/item-names.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import {
  describeConfinement,
  describeConfinementInFull,
  mechanismGrantLines,
} from '../sandbox/confine.ts'
import { grantLines } from '../sandbox/grants.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import { memoryStore } from '../store/memory.ts'
import type { Store } from '../store/store.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { formatChanges } from '../trust/diff.ts'
import { comparePins } from '../trust/pin-check.ts'
import type { ListKey, Upstream } from '../upstreams/upstream.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'
import { type CliIo, type CommandOptions, trustOptionsOf } from './command.ts'
import { loadForCommand } from './load.ts'
import { reportDrift } from './pins.ts'
import { type NextServer, previewReload } from './reload-preview.ts'
import { fetchOverview } from './status.ts'

/** The floating-version refusal of src/trust/launch-check.ts. */
const FLOATING = /floats to whatever the registry serves at launch/

/** The lists besides tools that check asks for, so a failing one is reported. */
const OPTIONAL_KEYS: readonly ListKey[] = ['prompts', 'resources', 'resourceTemplates']

/** Parses the Cedar policy files and validates them against the shipped schema. */
function checkCedar(files: readonly string[], io: CliIo): boolean {
  let errors: string[]
  let count = 0
  try {
    const policies = readPolicyFiles(files)
    count = policies.length
    errors = validatePolicies(policies)
  } catch (err) {
    errors = [(err as Error).message]
  }
  for (const e of errors) io.stdout(`FAIL  cedar: ${e}\n`)
  if (errors.length === 0)
    io.stdout(
      `ok    cedar: ${count} polic${count === 1 ? 'y' : 'ies'} valid against the Barbican schema\n`,
    )
  return errors.length === 0
}

export async function runCheck(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> = loadForCommand(options, io, false),
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
  io.stdout(
    `config: ${source.path ?? 'embedded demo'} (${source.format}), ${config.upstreams.length} upstream(s), ${config.servers.length} virtual server(s)\n`,
  )
  // Entries a missing variable holds back (ADR 121): not tried, and a fault for check.
  const held = config.held ?? []
  for (const h of held) io.stdout(`HELD  ${h.name}: ${h.reason}\n`)
  const authFaults = checkAuthSection(config, io)
  if (config.cedar && !checkCedar(config.cedar.policies, io)) {
    io.stderr('barbican: the Cedar policies are invalid\n')
    return 1
  }
  let pins: Store | undefined
  if (options.pins) {
    pins = await openApprovedPins(loaded, io)
    if (pins === undefined) return 1
  }
  const tried = await tryEveryUpstream(loaded, options, pins, io)
  const unpreviewed = options.diff
    ? !(await previewAgainstRunning(loaded, tried, options, io))
    : false
  const drifted = await reportDrift(config, source.path, io, options)
  return verdict({ ...tried, authFaults, held: held.length, unpreviewed, drifted }, io)
}

/** Prints what the auth section's checks found; the number of faults (warnings aside). */
function checkAuthSection(config: LoadedConfig['config'], io: CliIo): number {
  let faults = 0
  for (const p of config.auth ? checkAuth(config.auth) : []) {
    if (p.level === 'fail') faults++
    io.stdout(`${p.level === 'fail' ? 'FAIL ' : 'warn '} ${p.key}: ${p.message}\n`)
  }
  return faults
}

/** The store of approved pins, for `--pins`; undefined (said why) when there can be none. */
async function openApprovedPins(
  { config, source }: LoadedConfig,
  io: CliIo,
): Promise<Store | undefined> {
  const where = storeConfigOf(config, source.path)
  if (where.kind === 'memory' || (where.kind === 'sqlite' && !existsSync(where.path))) {
    io.stdout(
      `FAIL  --pins: ${where.kind === 'memory' ? 'the store is kept in memory' : `${where.path} does not exist`}, so no pin is approved; ` +
        'run barbican serve once and review with barbican pins\n',
    )
    io.stderr('barbican: there are no approved pins to check against\n')
    return undefined
  }
  return await openStore(config, source.path)
}

/** What trying every upstream and server found. */
interface Tried {
  readonly failed: number
  /** Upstreams whose items differ from their approved pins (`--pins`). */
  readonly drifting: number
  /** The virtual servers as this file would serve them, for `--diff`. */
  readonly nextServers: readonly NextServer[]
}

/**
 * Starts a gateway on the file, connects to every upstream once and reads every server's
 * catalog, printing a line each; the gateway is stopped (and the pins closed) before returning.
 */
async function tryEveryUpstream(
  { config, source }: LoadedConfig,
  options: CommandOptions,
  pins: Store | undefined,
  io: CliIo,
): Promise<Tried> {
  const log = jsonLogger({ level: 'error' })
  // Launches are checked as serve checks them (lockfile, floating versions); nothing is pinned.
  const trust = {
    store: memoryStore(),
    lockfilePath: lockfilePathOf(source.path),
    ...trustOptionsOf(options),
  }
  const gateway = new Gateway(withTrust(planFromConfig(config, log), config, trust, log), log)
  let failed = 0
  let drifting = 0
  const nextServers: NextServer[] = []
  try {
    for (const upstream of gateway.upstreams.values()) {
      const verbose = options.verbose === true
      try {
        await checkUpstream(upstream, io)
        sandboxLines(config, upstream.name, verbose, io)
        if (pins && !(await pinsMatch(upstream, pins, io))) drifting++
      } catch (err) {
        failed++
        upstreamFailure(upstream, err as Error, source, io)
        sandboxLines(config, upstream.name, verbose, io)
      }
    }
    for (const server of gateway.servers.values()) {
      nextServers.push(await checkServer(server, config, io))
    }
  } finally {
    await gateway.stop()
    await pins?.close()
  }
  return { failed, drifting, nextServers }
}

/** Connects to one upstream and reads its lists; throws what stopped it. */
async function checkUpstream(upstream: Upstream, io: CliIo): Promise<void> {
  await upstream.connect()
  const tools = await upstream.list('tools')
  // The optional lists too: one the server answers with an error is held back alone.
  await Promise.all(OPTIONAL_KEYS.map((key) => upstream.list(key)))
  const info = upstream.info
  io.stdout(
    `ok    ${upstream.name}: ${String(info?.serverInfo.name ?? '?')} ${String(info?.serverInfo.version ?? '')}, MCP ${info?.protocolVersion}, ${tools.length} tool(s)\n`,
  )
  for (const held of upstream.heldLists) {
    io.stdout(
      `warn  ${upstream.name}: ${held.list} held back (its tools are kept): ${held.reason}\n`,
    )
    const hint = upstream.hints?.find(held.reason)
    if (hint) io.stdout(`      ${hint.message}\n`)
  }
}

/** An upstream that failed: why, and its fix when one is known. */
function upstreamFailure(
  upstream: Upstream,
  err: Error,
  source: LoadedConfig['source'],
  io: CliIo,
): void {
  io.stdout(`FAIL  ${upstream.name}: ${err.message}\n`)
  const hint = upstream.hints?.find(err.message)
  if (hint) io.stdout(`      ${hint.message}\n`)
  // A client's own file (Claude Desktop, Cursor, VS Code…) floats by habit (`npx -y PKG`):
  // `import` pins every entry at once instead of one edit per entry.
  if (FLOATING.test(err.message) && source.path && source.format !== 'native') {
    io.stdout(
      `hint  barbican import ${source.path} writes barbican.yaml with every package pinned ` +
        "to today's version; then serve that file\n",
    )
  }
}

/** One virtual server's catalog: what it holds back, its name conflicts, its token cost. */
async function checkServer(
  server: VirtualServer,
  config: LoadedConfig['config'],
  io: CliIo,
): Promise<NextServer> {
  const { catalog } = await server.catalog()
  const entry = config.servers.find((s) => s.name === server.name)
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
  for (const line of await tokenLines(server.name, catalog.tools, entry?.tokenBudget)) {
    io.stdout(line)
  }
  return { name: server.name, path: entry?.path ?? '', tools: exposedTools(catalog) }
}

/** `--diff`: what reloading the file would change on the running gateway; false if unreached. */
async function previewAgainstRunning(
  loaded: LoadedConfig,
  { nextServers }: Tried,
  options: CommandOptions,
  io: CliIo,
): Promise<boolean> {
  const running = await fetchOverview(options, io, Promise.resolve(loaded))
  if (!running) return false
  io.stdout(`reload preview against the gateway at ${running.origin}:\n`)
  const next = { upstreams: loaded.config.upstreams.map((u) => u.name), servers: nextServers }
  for (const line of previewReload(running.overview, next)) io.stdout(`diff  ${line}\n`)
  return true
}

/** The exit code, with a line on stderr for each kind of fault found. */
function verdict(
  found: Tried & {
    readonly authFaults: number
    readonly held: number
    readonly unpreviewed: boolean
    readonly drifted: boolean
  },
  io: CliIo,
): number {
  const { authFaults, failed, held, unpreviewed, drifting, drifted } = found
  if (authFaults > 0) io.stderr(`barbican: the auth section has ${authFaults} fault(s)\n`)
  if (failed > 0) io.stderr(`barbican: ${failed} upstream(s) failed\n`)
  if (held > 0) {
    io.stderr(
      `barbican: ${held} upstream(s) held back: a variable they use is not set (serve runs the others; with --strict it refuses to start)\n`,
    )
  }
  if (authFaults > 0 || failed > 0 || held > 0 || unpreviewed) return 1
  if (drifting > 0) {
    io.stderr(`barbican: ${drifting} upstream(s) differ from their approved pins\n`)
    return 1
  }
  if (drifted) {
    io.stderr('barbican: the configuration drifted from its approved baseline\n')
    return 1
  }
  return 0
}

/**
 * How a stdio upstream is confined: one short line (ADR 109); with `--verbose`, the mechanism
 * in full, then every grant with where it came from and every path named but not granted.
 */
function sandboxLines(config: LoadedConfig['config'], name: string, verbose: boolean, io: CliIo) {
  const entry = config.upstreams.find((u) => u.name === name)
  if (entry?.transport !== 'stdio') return
  const describe = verbose ? describeConfinementInFull : describeConfinement
  io.stdout(`      sandbox: ${describe(entry.name, entry.sandbox, entry.command)}\n`)
  if (!verbose) return
  const lines = [...grantLines(entry.sandbox), ...mechanismGrantLines(entry.sandbox, entry.command)]
  for (const line of lines) io.stdout(`      ${line}\n`)
}

/** How many tokens the server's tools cost a model, its costliest tools, and its budget. */
async function tokenLines(
  server: string,
  tools: readonly JsonObject[],
  budget: number | undefined,
): Promise<string[]> {
  const { tools: costs, total } = await toolCosts(tools)
  const costliest = [...costs]
    .sort((a, b) => b.tokens - a.tokens)
    .slice(0, 5)
    .map((c) => `${printableName(c.name)} ${c.tokens}`)
  const over = overBudget(server, total, budget)
  const head = over
    ? `warn  ${over}`
    : `ok    server ${server}: ${costs.length} tool(s) cost ${total} tokens (${TOKEN_ENCODING})` +
      (budget === undefined ? '' : `, within its budget of ${budget}`)
  return [`${head}\n`, ...(costliest.length ? [`      costliest: ${costliest.join(', ')}\n`] : [])]
}

/** Prints how an upstream's advertised items differ from their pins; true when none does. */
async function pinsMatch(upstream: Upstream, store: Store, io: CliIo): Promise<boolean> {
  const [tools, prompts, resourceTemplates] = await Promise.all([
    upstream.list('tools'),
    upstream.list('prompts'),
    upstream.list('resourceTemplates'),
  ])
  const info = upstream.info
  const pinned = await store.pins.pinned(upstream.name)
  const mismatches = comparePins(
    {
      tools,
      prompts,
      resourceTemplates,
      instructions: info?.instructions,
      serverInfo: info?.serverInfo,
    },
    pinned,
  )
  const differing = mismatches.filter((m) => m.kind !== 'gone')
  for (const m of mismatches.filter((m) => m.kind === 'gone'))
    io.stdout(`note  ${upstream.name}: ${printableName(m.key)} is pinned but no longer offered\n`)
  if (differing.length === 0) {
    io.stdout(`ok    ${upstream.name}: every item matches its approved pin\n`)
    return true
  }
  io.stdout(`PINS  ${upstream.name}: ${differing.length} item(s) differ from the approved pins\n`)
  for (const m of differing) {
    io.stdout(
      `  ${m.kind === 'changed' ? 'changed since approved' : 'never approved'}: ${printableName(m.key)}\n`,
    )
    for (const line of formatChanges(m.changes)) io.stdout(`    ${line}\n`)
  }
  return false
}
