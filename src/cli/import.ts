/**
 * `barbican import [FILE…]`: turns the MCP client configs a user already has (Claude Desktop,
 * Cursor, Windsurf, VS Code, Claude Code) into one native `barbican.yaml`, with every floating
 * npx package pinned to the exact version it resolves to today, and prints how to point each
 * client at Barbican instead. Placeholders (`${VAR}`) are kept as written, so secrets that lived
 * in the environment stay there.
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { basename, dirname, join, resolve } from 'node:path'
// Static: this module is itself loaded only when `barbican import` runs.
import { stringify } from 'yaml'
import { DEFAULT_STATE_ROOT, DEFAULT_STORE_PATH } from '../config/defaults.ts'
import { convertForeign, detectFormat, relevantPart } from '../config/formats.ts'
import { parseText } from '../config/parse-text.ts'
import { inferGrants } from '../config/sandbox-grants.ts'
import { confinementOf, confinementSummary } from '../sandbox/confine.ts'
import { grantLines } from '../sandbox/grants.ts'
import { type SandboxFacility, sandboxFacility } from '../sandbox/sandbox.ts'
import { launchOf } from '../trust/launch.ts'
import { npmResolver, type VersionResolver } from '../trust/registry-version.ts'
import type { CliIo } from './command.ts'

/** The clients whose files import knows, and how each is pointed at Barbican afterwards. */
export type Client = 'Claude Desktop' | 'Cursor' | 'Windsurf' | 'VS Code' | 'Claude Code'

/** Where import looks, and how it resolves versions; injectable for tests. */
export interface ImportEnvironment {
  readonly cwd: string
  readonly home: string
  readonly platform: NodeJS.Platform
  readonly env: Readonly<Record<string, string | undefined>>
  readonly resolveVersion: VersionResolver
  /** The confinement programs of this host (sandboxFacility), to say what each entry gets. */
  readonly facility: SandboxFacility | { missing: string }
}

export interface ImportOptions {
  /** Where to write (default: barbican.yaml in the working directory). */
  readonly output?: string | undefined
}

/** The usual config files of each client on this platform, user-wide and in the project. */
export function clientConfigPaths(e: Omit<ImportEnvironment, 'resolveVersion' | 'facility'>): {
  client: Client
  path: string
}[] {
  const appData =
    e.platform === 'win32'
      ? (e.env.APPDATA ?? join(e.home, 'AppData', 'Roaming'))
      : e.platform === 'darwin'
        ? join(e.home, 'Library', 'Application Support')
        : (e.env.XDG_CONFIG_HOME ?? join(e.home, '.config'))
  return [
    { client: 'Claude Desktop', path: join(appData, 'Claude', 'claude_desktop_config.json') },
    { client: 'Cursor', path: join(e.home, '.cursor', 'mcp.json') },
    { client: 'Cursor', path: join(e.cwd, '.cursor', 'mcp.json') },
    { client: 'Windsurf', path: join(e.home, '.codeium', 'windsurf', 'mcp_config.json') },
    { client: 'VS Code', path: join(appData, 'Code', 'User', 'mcp.json') },
    { client: 'VS Code', path: join(e.cwd, '.vscode', 'mcp.json') },
    { client: 'Claude Code', path: join(e.home, '.claude.json') },
    { client: 'Claude Code', path: join(e.cwd, '.mcp.json') },
  ]
}

/** Which client a file given by name belongs to, from its name and place. */
function clientOf(path: string, format: 'claude' | 'vscode'): Client {
  const name = basename(path)
  if (name === 'claude_desktop_config.json') return 'Claude Desktop'
  if (name === 'mcp_config.json') return 'Windsurf'
  if (name === '.claude.json' || name === '.mcp.json') return 'Claude Code'
  if (/[\\/]\.cursor[\\/]/.test(path)) return 'Cursor'
  return format === 'vscode' ? 'VS Code' : 'Claude Desktop'
}

type Entry = Record<string, unknown>

export async function runImport(
  files: readonly string[],
  options: ImportOptions,
  io: CliIo,
  environment: Partial<ImportEnvironment> = {},
): Promise<number> {
  const e: ImportEnvironment = {
    cwd: process.cwd(),
    home: homedir(),
    platform: process.platform,
    env: process.env,
    resolveVersion: npmResolver,
    facility: sandboxFacility(),
    ...environment,
  }
  const output = resolve(e.cwd, options.output ?? 'barbican.yaml')
  if (existsSync(output)) {
    io.stderr(`barbican: ${output} exists; remove it or write elsewhere with --output FILE\n`)
    return 1
  }
  const sources =
    files.length > 0
      ? files.map((f) => ({ client: undefined, path: resolve(e.cwd, f) }))
      : clientConfigPaths(e).filter((c) => existsSync(c.path))
  if (sources.length === 0) {
    io.stderr(
      'barbican: found no client config at the usual places; name one: barbican import FILE\n' +
        clientConfigPaths(e)
          .map((c) => `  ${c.client}: ${c.path}\n`)
          .join(''),
    )
    return 1
  }
  const upstreams: Record<string, Entry> = {}
  const clients = new Map<Client, string[]>()
  let failed = 0
  for (const source of sources) {
    let value: unknown
    try {
      value = parseText(readFileSync(source.path, 'utf8'), { json: true, file: source.path }).value
    } catch (err) {
      io.stderr(`barbican: cannot read ${source.path}: ${(err as Error).message}\n`)
      failed++
      continue
    }
    const detected = detectFormat(value)
    if ('issue' in detected || detected.format === 'native') {
      io.stderr(`barbican: ${source.path} is not a client config (no "mcpServers" or "servers")\n`)
      failed++
      continue
    }
    const format = detected.format
    const warnings: string[] = []
    const relevant = relevantPart(value as Entry, format, warnings)
    // Claude Code keeps project servers under projects[DIR].mcpServers of ~/.claude.json.
    const project = (value as { projects?: Record<string, { mcpServers?: unknown }> }).projects?.[
      e.cwd
    ]?.mcpServers
    if (format === 'claude' && project && typeof project === 'object')
      relevant.mcpServers = { ...(project as Entry), ...(relevant.mcpServers as Entry) }
    const conversion = convertForeign(relevant, format, { baseDir: e.cwd, warnings })
    for (const issue of conversion.issues) {
      io.stderr(`barbican: ${source.path}: ${issue.path.join('.')}: ${issue.message}\n`)
      failed++
    }
    for (const w of warnings) io.stderr(`barbican: warning: ${source.path}: ${w}\n`)
    const client = source.client ?? clientOf(source.path, format)
    const names: string[] = []
    for (const [name, entry] of Object.entries(conversion.native.upstreams as Entry)) {
      const taken = Object.entries(upstreams).find(([n]) => n === name)
      if (taken && JSON.stringify(taken[1]) === JSON.stringify(entry)) continue
      let unique = name
      for (let n = 2; unique in upstreams; n++) unique = `${name}-${n}`
      upstreams[unique] = entry as Entry
      names.push(unique)
    }
    clients.set(client, [...(clients.get(client) ?? []), source.path])
    io.stdout(`read    ${source.path} (${client}): ${names.length} server(s)\n`)
  }
  failed += await pinVersions(upstreams, e.resolveVersion, io)
  for (const [name, entry] of Object.entries(upstreams)) {
    if (typeof entry.command !== 'string') continue
    const kind = confinementOf(entry.sandbox === 'none' ? 'none' : {}, entry.command, e.facility)
    io.stdout(`sandbox ${name}: ${confinementSummary(kind, e.facility)}\n`)
    if (kind === 'bubblewrap' || kind === 'node-permission') {
      const lines = importedGrants(name, entry, output, e.home)
      if (lines.length === 0) io.stdout('        grants: none beyond its own package and state\n')
      for (const line of lines) io.stdout(`        ${line}\n`)
    }
  }
  const header =
    '# Written by `barbican import` from:\n' +
    [...clients.values()]
      .flat()
      .map((p) => `#   ${p}\n`)
      .join('')
  writeFileSync(output, `${header}${stringify({ upstreams })}`)
  io.stdout(`wrote   ${output}: ${Object.keys(upstreams).length} upstream(s)\n\n`)
  io.stdout(pointing(clients, output))
  if (failed > 0) {
    io.stderr(`barbican: ${failed} problem(s) above; fix them in ${output} before serving\n`)
    return 1
  }
  return 0
}

/**
 * What an imported entry will be granted when `output` is served (ADR 094), each with where it
 * came from: the same inference serve makes, with the defaults of a file written here (its
 * lockfile, `.barbican/` and state directory beside it), as `grant:` / `not granted:` lines.
 */
function importedGrants(name: string, entry: Entry, output: string, home: string): string[] {
  const base = dirname(output)
  const fs = (entry.sandbox as { fs?: { read?: unknown; write?: unknown } } | undefined)?.fs
  const paths = (list: unknown) =>
    Array.isArray(list) ? list.map((p) => resolve(base, String(p))) : []
  const env = (entry.env ?? {}) as Record<string, unknown>
  const grants = inferGrants(
    {
      command: String(entry.command),
      args: Array.isArray(entry.args) ? entry.args.map(String) : [],
      env: Object.fromEntries(Object.entries(env).map(([k, v]) => [k, String(v)])),
      cwd: typeof entry.cwd === 'string' ? resolve(base, entry.cwd) : undefined,
    },
    {
      protect: [output, join(base, 'barbican.lock'), join(base, dirname(DEFAULT_STORE_PATH))],
      home,
      stateDir: join(base, DEFAULT_STATE_ROOT, name),
      explicit: { read: paths(fs?.read), write: paths(fs?.write) },
    },
  )
  return grantLines({ grants })
}

/**
 * Rewrites every floating npx package to `name@version` as resolved today; returns how many
 * could not be pinned (uvx packages, or npm packages neither the registry nor the cache knows).
 */
async function pinVersions(
  upstreams: Record<string, Entry>,
  resolveVersion: VersionResolver,
  io: CliIo,
): Promise<number> {
  let unpinned = 0
  for (const [name, entry] of Object.entries(upstreams)) {
    if (typeof entry.command !== 'string' || !Array.isArray(entry.args)) continue
    const args = entry.args.map(String)
    const launch = launchOf(entry.command, args)
    if (launch?.kind !== 'package') continue
    for (const pkg of [launch, ...launch.also]) {
      if (pkg.exact) continue
      const resolved =
        launch.ecosystem === 'npm'
          ? await resolveVersion(pkg.name).catch(() => undefined)
          : undefined
      if (!resolved) {
        io.stderr(
          `barbican: ${name}: could not resolve an exact version of ${pkg.name}; pin it by hand\n`,
        )
        unpinned++
        continue
      }
      const index = args.findIndex(
        (a) => a === pkg.name || a.startsWith(`${pkg.name}@`) || a.endsWith(`=${pkg.name}`),
      )
      if (index < 0) continue
      const arg = args[index]!
      const at = arg.endsWith(`=${pkg.name}`) ? arg.length : arg.indexOf(pkg.name) + pkg.name.length
      args[index] = `${arg.slice(0, at)}@${resolved.version}`
      io.stdout(`pinned  ${name}: ${pkg.name}@${resolved.version} (from the ${resolved.source})\n`)
    }
    entry.args = args
  }
  return unpinned
}

/** How to point each client that was read at Barbican instead of its own servers. */
function pointing(clients: ReadonlyMap<Client, readonly string[]>, config: string): string {
  const url = 'http://127.0.0.1:7300/mcp'
  const serve = `barbican serve --config ${config}`
  // Claude Desktop launches its servers itself: it runs `barbican stdio`, nothing else to start.
  // The others connect to a URL: they need the gateway running (`serve`), started once.
  const ways: Record<Client, string> = {
    'Claude Desktop': `Claude Desktop starts Barbican itself (stdio); nothing to run beside it.\n    In its config, replace "mcpServers" with {"barbican": {"command": "barbican", "args": ["stdio", "--config", ${JSON.stringify(config)}]}}`,
    Cursor: `Cursor connects over HTTP: keep \`${serve}\` running.\n    In its config, replace "mcpServers" with {"barbican": {"url": "${url}"}}`,
    Windsurf: `Windsurf connects over HTTP: keep \`${serve}\` running.\n    In its config, replace "mcpServers" with {"barbican": {"serverUrl": "${url}"}}`,
    'VS Code': `VS Code connects over HTTP: keep \`${serve}\` running.\n    In its mcp.json, replace "servers" with {"barbican": {"type": "http", "url": "${url}"}}`,
    'Claude Code': `Claude Code connects over HTTP: keep \`${serve}\` running.\n    Then: claude mcp add --transport http barbican ${url}`,
  }
  const lines = ['Point each client at Barbican, in place of the servers it launched itself:']
  for (const client of clients.keys()) lines.push(`  ${ways[client]}`)
  return `${lines.join('\n')}\n`
}
