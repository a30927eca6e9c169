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
import { describeConfinement, describeConfinementInFull } from '../sandbox/confine.ts'
import { grantLines } from '../sandbox/grants.ts'
import { mechanismSettingError } from '../sandbox/sandbox.ts'
import { memoryStore } from '../store/memory.ts'
import type { Store } from '../store/store.ts'
import { jsonLogger } from '../telemetry/log.ts'
import { formatChanges } from '../trust/diff.ts'
import { comparePins } from '../trust/pin-check.ts'
import type { ListKey, Upstream } from '../upstreams/upstream.ts'
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
  let authFaults = 0
  for (const p of config.auth ? checkAuth(config.auth) : []) {
    if (p.level === 'fail') authFaults++
    io.stdout(`${p.level === 'fail' ? 'FAIL ' : 'warn '} ${p.key}: ${p.message}\n`)
  }
  if (config.cedar && !checkCedar(config.cedar.policies, io)) {
    io.stderr('barbican: the Cedar policies are invalid\n')
    return 1
  }
  let pins: Store | undefined
  if (options.pins) {
    const where = storeConfigOf(config, source.path)
    if (where.kind === 'memory' || (where.kind === 'sqlite' && !existsSync(where.path))) {
      io.stdout(
        `FAIL  --pins: ${where.kind === 'memory' ? 'the store is kept in memory' : `${where.path} does not exist`}, so no pin is approved; ` +
          'run barbican serve once and review with barbican pins\n',
      )
      io.stderr('barbican: there are no approved pins to check against\n')
      return 1
    }
    pins = await openStore(config, source.path)
  }
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
      try {
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
        sandboxLines(config, upstream.name, options.verbose === true, io)
        if (pins && !(await pinsMatch(upstream, pins, io))) drifting++
      } catch (err) {
        failed++
        io.stdout(`FAIL  ${upstream.name}: ${(err as Error).message}\n`)
        const hint = upstream.hints?.find((err as Error).message)
        if (hint) io.stdout(`      ${hint.message}\n`)
        // A client's own file (Claude Desktop, Cursor, VS Code…) floats by habit (`npx -y PKG`):
        // `import` pins every entry at once instead of one edit per entry.
        if (FLOATING.test((err as Error).message) && source.path && source.format !== 'native') {
          io.stdout(
            `hint  barbican import ${source.path} writes barbican.yaml with every package pinned ` +
              "to today's version; then serve that file\n",
          )
        }
        sandboxLines(config, upstream.name, options.verbose === true, io)
      }
    }
    for (const server of gateway.servers.values()) {
      const { catalog } = await server.catalog()
      const path = config.servers.find((s) => s.name === server.name)?.path ?? ''
      nextServers.push({ name: server.name, path, tools: exposedTools(catalog) })
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
      const budget = config.servers.find((s) => s.name === server.name)?.tokenBudget
      for (const line of await tokenLines(server.name, catalog.tools, budget)) io.stdout(line)
    }
  } finally {
    await gateway.stop()
    await pins?.close()
  }
  let unpreviewed = false
  if (options.diff) {
    const running = await fetchOverview(options, io, Promise.resolve(loaded))
    if (running) {
      io.stdout(`reload preview against the gateway at ${running.origin}:\n`)
      const next = { upstreams: config.upstreams.map((u) => u.name), servers: nextServers }
      for (const line of previewReload(running.overview, next)) io.stdout(`diff  ${line}\n`)
    } else unpreviewed = true
  }
  const drifted = await reportDrift(config, source.path, io, options)
  if (authFaults > 0) io.stderr(`barbican: the auth section has ${authFaults} fault(s)\n`)
  if (failed > 0) io.stderr(`barbican: ${failed} upstream(s) failed\n`)
  if (held.length > 0) {
    io.stderr(
      `barbican: ${held.length} upstream(s) held back: a variable they use is not set (serve runs the others; with --strict it refuses to start)\n`,
    )
  }
  if (authFaults > 0 || failed > 0 || held.length > 0 || unpreviewed) return 1
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
  if (verbose) for (const line of grantLines(entry.sandbox)) io.stdout(`      ${line}\n`)
}

/** Prints how an upstream's advertised items differ from their pins; true when none does. */
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
