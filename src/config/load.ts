/**
 * Finds, reads and validates a configuration file in any format Barbican accepts, and returns
 * the normalized Config. Order of work: parse → detect format → interpolate `${VAR}` → convert
 * foreign formats → validate everything at once → apply defaults. A missing variable is one
 * more issue, never a reason to stop before validation. Every error is one ConfigError
 * listing each problem at its key path and line in the operator's own file. A missing variable
 * used only inside upstream entries holds back those entries alone, with the reason, unless
 * `strict` (ADR 121).
 */
import { readFile } from 'node:fs/promises'
import { basename, dirname, extname, resolve } from 'node:path'
import type { Config, HeldUpstream, LoadedConfig } from './config.ts'
import { ConfigError, type ConfigIssue, type KeyPath } from './config-error.ts'
import { DEFAULT_CONFIG_FILES } from './defaults.ts'
import { convertForeign, detectFormat, relevantPart } from './formats.ts'
import { interpolate, isUnsetVariable } from './interpolate.ts'
import { buildConfig, stateRootOf, validateNative } from './normalize.ts'
import { parseText } from './parse-text.ts'

export { DEFAULT_CONFIG_FILES }

/** Where to look and what to substitute. */
export interface LoadOptions {
  /** The config file; relative to `cwd`. Absent: the first of DEFAULT_CONFIG_FILES in `cwd`. */
  readonly path?: string | undefined
  /** Directory to resolve `path` in and search for default files. Default: process.cwd(). */
  readonly cwd?: string | undefined
  /** Variables for `${VAR}`. Default: process.env. */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined
  /** `HOST:PORT` replacing the file's `listen` (the CLI's `--listen`). */
  readonly listen?: string | undefined
  /**
   * A placeholder that cannot be resolved is an error wherever it is (the CLI's `--strict`).
   * Default: one inside an upstream entry holds back that entry alone (`config.held`).
   */
  readonly strict?: boolean | undefined
}

/**
 * Loads the configuration. Resolves to `undefined` when no path was given and no default file
 * exists, so the CLI can start the demo (`loadDemoConfig`). Rejects with ConfigError
 * (`ERR_CONFIG_INVALID`) for a missing explicit file or any invalid content.
 */
export async function loadConfig(options: LoadOptions = {}): Promise<LoadedConfig | undefined> {
  const cwd = options.cwd ?? process.cwd()
  const candidates =
    options.path === undefined
      ? DEFAULT_CONFIG_FILES.map((name) => resolve(cwd, name))
      : [resolve(cwd, options.path)]
  for (const file of candidates) {
    let text: string
    try {
      text = await readFile(file, 'utf8')
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code
      if (code === 'ENOENT' && options.path === undefined) continue
      const reason = code === 'ENOENT' ? 'the file does not exist' : (err as Error).message
      throw new ConfigError([{ path: [], message: `cannot read config file: ${reason}` }], { file })
    }
    return parseConfigText(text, { ...options, file })
  }
  return undefined
}

/** Options for parsing config text that did not necessarily come from disk. */
export interface ParseOptions extends Omit<LoadOptions, 'path'> {
  /** Path the text came from: names errors, picks JSON by extension, anchors relative paths. */
  readonly file?: string | undefined
  /** Treat the text as JSON(C) regardless of `file`. */
  readonly json?: boolean
}

/** Parses, validates and normalizes config text (YAML or JSON, any accepted format). */
export function parseConfigText(text: string, options: ParseOptions = {}): LoadedConfig {
  const file = options.file
  const json = options.json ?? (file !== undefined && /^\.jsonc?$/i.test(extname(file)))
  const baseDir = file === undefined ? (options.cwd ?? process.cwd()) : dirname(file)
  const parsed = parseText(text, { json, ...(file === undefined ? {} : { file }) })
  const fail = (issues: ConfigIssue[], mapPath: (path: KeyPath) => KeyPath = (p) => p) => {
    const located = issues.map((issue) => {
      const path = mapPath(issue.path)
      const pos = parsed.locate(path)
      return pos ? { ...issue, path, line: pos.line, column: pos.column } : { ...issue, path }
    })
    located.sort(
      (a, b) => (a.line ?? Number.MAX_SAFE_INTEGER) - (b.line ?? Number.MAX_SAFE_INTEGER),
    )
    return new ConfigError(located, { file })
  }

  const detected = detectFormat(parsed.value)
  if ('issue' in detected) throw fail([detected.issue])
  const format = detected.format
  const warnings: string[] = []
  const relevant = relevantPart(parsed.value as Record<string, unknown>, format, warnings)
  const context = {
    env: options.env ?? process.env,
    ...(file === undefined ? {} : { workspaceFolder: workspaceFolderOf(baseDir) }),
  }
  // A missing variable does not stop the load: every other mistake is reported with it. The
  // placeholder stays in the value, so schema complaints about that very key are dropped below.
  const interpolated = interpolate(relevant, context)
  const unresolved = interpolated.issues.map((issue) => issue.path)

  let native = interpolated.value
  let mapPath = (path: KeyPath): KeyPath => path
  const issues: ConfigIssue[] = [...interpolated.issues]
  if (format !== 'native') {
    const conversion = convertForeign(interpolated.value as Record<string, unknown>, format, {
      baseDir,
      warnings,
    })
    // Conversion issues already use the file's own paths, which mapPath leaves alone.
    issues.push(...conversion.issues)
    native = conversion.native
    mapPath = conversion.mapPath
  }
  const validation = validateNative(native)
  if (!validation.ok)
    issues.push(
      ...validation.issues.filter(
        (issue) => !unresolved.some((path) => startsWith(mapPath(issue.path), path)),
      ),
    )
  const names = Object.keys((native as { upstreams?: object }).upstreams ?? {})
  const held = options.strict === true ? [] : heldUpstreams(interpolated.issues, names, mapPath)
  const heldIssues = new Set(held.flatMap((h) => h.issues))
  const left = issues.filter((issue) => !heldIssues.has(issue))
  if (left.length > 0 || (!validation.ok && held.length === 0)) throw fail(issues, mapPath)
  // A held entry may be invalid only for its placeholder (`url: ${URL}`): it is validated and
  // built as a stub, then left out, so the servers naming it keep their namespacing.
  const valid = held.length === 0 ? validation : validateNative(withStubs(native, held))
  if (!valid.ok) throw fail([...issues, ...valid.issues], mapPath)
  const built = buildConfig(valid.value, {
    baseDir,
    // Text without a file resolves its paths in `cwd`, but has no folder of its own to keep its
    // state in: that goes to the temp directory (stateRootOf), not into someone's checkout.
    ...(file === undefined ? { stateRoot: stateRootOf({}) } : {}),
    env: context.env,
    listen: options.listen,
    ...(file === undefined ? {} : { configPath: file }),
  })
  const config = held.length === 0 ? built : withoutHeld(built, held)
  return { config, source: { path: file, format }, warnings }
}

/**
 * The upstream entries an unresolved placeholder sits in, each with its issues. When any such
 * issue lies outside every upstream entry, that one stays an error and nothing is held for it.
 * `mapPath` turns a native path into the file's own (a foreign file names its entries its way).
 */
function heldUpstreams(
  unresolved: readonly ConfigIssue[],
  names: readonly string[],
  mapPath: (path: KeyPath) => KeyPath,
): (HeldUpstream & { readonly issues: readonly ConfigIssue[] })[] {
  const byName = new Map<string, ConfigIssue[]>()
  for (const issue of unresolved) {
    if (!isUnsetVariable(issue)) continue
    const name = names.find((n) => startsWith(issue.path, mapPath(['upstreams', n])))
    if (name === undefined) continue
    byName.set(name, [...(byName.get(name) ?? []), issue])
  }
  return [...byName].map(([name, issues]) => ({
    name,
    reason: issues.map((issue) => `${keyOf(issue.path)} ${issue.message}`).join('; '),
    issues,
  }))
}

/** `a.b[0].c`, as the operator's file spells the key. */
function keyOf(path: KeyPath): string {
  return path
    .map((part, i) => (typeof part === 'number' ? `[${part}]` : i === 0 ? part : `.${part}`))
    .join('')
}

/** The native value with each held entry replaced by a remote entry no one will connect to. */
function withStubs(native: unknown, held: readonly HeldUpstream[]): unknown {
  const value = native as { upstreams: Record<string, unknown> }
  const upstreams = { ...value.upstreams }
  for (const { name } of held) upstreams[name] = { url: 'https://held.invalid/mcp' }
  return { ...value, upstreams }
}

/**
 * The configuration without the held upstreams: not started, not in any server. Servers keep
 * the namespacing their full member list gave them, so names do not change once the variable
 * is set.
 */
function withoutHeld(config: Config, held: readonly HeldUpstream[]): Config {
  const out = new Set(held.map((h) => h.name))
  return {
    ...config,
    upstreams: config.upstreams.filter((u) => !out.has(u.name)),
    servers: config.servers.map((s) => ({
      ...s,
      upstreams: s.upstreams.filter((name) => !out.has(name)),
    })),
    held: held.map(({ name, reason }) => ({ name, reason })),
  }
}

function startsWith(path: KeyPath, prefix: KeyPath): boolean {
  return prefix.length <= path.length && prefix.every((part, i) => part === path[i])
}

/** `.vscode/mcp.json` and `.cursor/mcp.json` belong to the folder above them. */
function workspaceFolderOf(dir: string): string {
  const name = basename(dir)
  return name === '.vscode' || name === '.cursor' ? dirname(dir) : dir
}
