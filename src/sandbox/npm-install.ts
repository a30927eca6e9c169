/**
 * Installs the package of a confined `npx PACKAGE@VERSION` launch outside the sandbox, into a
 * cache Barbican owns (docs/sandbox.md, ADR 043): the sandbox has no network, so the registry is
 * reached here, once, and the server then runs the installed bin inside with no network. Only an
 * exact version is installed; install scripts never run unless the operator named the package
 * (`trust.allowScripts` on the upstream, or `allowScripts: true` in its `barbican.lock` entry),
 * since they run outside the sandbox with Barbican's rights (ADR 107). The packages whose scripts
 * were skipped are recorded in the slot (`barbican-install.json`), so that every launch can say
 * so, and a package allowed later has its scripts run (`npm rebuild`) before the next launch.
 * The installed package is then verified against `barbican.lock` like any other
 * (launch-check.ts).
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join, sep } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import { findExecutable } from './sandbox.ts'

/** `@scope/name@1.2.3` → name and version (`latest` and ranges stay as written). */
export function splitNpmSpec(spec: string): { name: string; version: string | undefined } {
  const at = spec.indexOf('@', spec.startsWith('@') ? 1 : 0)
  if (at < 0) return { name: spec, version: undefined }
  return { name: spec.slice(0, at), version: spec.slice(at + 1) || undefined }
}

/** The package a plain `npx [-y] NAME@X.Y.Z …` runs; undefined for any other command line. */
export function npxPackageOf(
  command: string,
  args: readonly string[],
): { readonly name: string; readonly version: string } | undefined {
  if (basename(command).replace(/\.cmd$/i, '') !== 'npx') return undefined
  let i = 0
  while (args[i] === '-y' || args[i] === '--yes') i++
  const spec = args[i]
  if (spec === undefined || spec.startsWith('-')) return undefined
  const { name, version } = splitNpmSpec(spec)
  const exact = version?.replace(/^v/, '')
  // Only an exact version is installed on Barbican's own initiative: a range floats.
  if (exact === undefined || !/^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/.test(exact)) {
    return undefined
  }
  return { name, version: exact }
}

/** The folder of one package version in the cache (its `node_modules` is inside). */
export function cacheSlot(cache: string, name: string, version: string): string {
  return join(cache, `${name.replace('/', '+')}@${version}`)
}

/** Whether the cache holds `name@version` already. */
export function isCached(cache: string, name: string, version: string): boolean {
  const manifest = join(cacheSlot(cache, name, version), 'node_modules', name, 'package.json')
  if (!existsSync(manifest)) return false
  try {
    return (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version === version
  } catch {
    return false
  }
}

/**
 * Which packages may run their install scripts: their names (`trust.allowScripts`), or `true`
 * for every one (`allowScripts: true` in barbican.lock, the older form).
 */
export type AllowScripts = true | readonly string[]

export interface InstallOptions {
  /** Packages whose install scripts run; default none. */
  readonly allowScripts?: AllowScripts | undefined
  /** Longest the install may take (default 5 minutes). */
  readonly timeoutMs?: number | undefined
  /** Longest the allowed install scripts may take (default 15 minutes: a native build). */
  readonly scriptsTimeoutMs?: number | undefined
}

/** One installed package with install scripts, as the slot's record keeps it. */
export interface ScriptedPackage {
  readonly name: string
  readonly version: string
  /** What would run: `install: node-gyp rebuild`, `postinstall: …` (cut to 120 characters). */
  readonly scripts: readonly string[]
}

/** What became of the install scripts of a slot's packages. */
export interface ScriptsRecord {
  /** Packages whose scripts ran (allowed). */
  readonly ran: readonly ScriptedPackage[]
  /** Packages whose scripts were skipped (not allowed): a native module among them is unbuilt. */
  readonly skipped: readonly ScriptedPackage[]
}

/** The record beside the slot's `node_modules` (not inside it: npm would not know it). */
export const SCRIPTS_RECORD = 'barbican-install.json'

/** The lifecycle scripts npm runs at install, in its order. */
const INSTALL_SCRIPTS = ['preinstall', 'install', 'postinstall'] as const

/** In-flight installs and rebuilds, so two upstreams naming one package do it once. */
const installing = new Map<string, Promise<ScriptsRecord>>()

function allowed(allow: AllowScripts | undefined, name: string): boolean {
  return allow === true || (allow ?? []).includes(name)
}

/**
 * The slot's record. A slot installed before records were kept was installed without scripts
 * (unless barbican.lock allowed them all): npm's lock says which packages have them.
 */
export function scriptsRecord(slot: string): ScriptsRecord {
  try {
    const record = JSON.parse(readFileSync(join(slot, SCRIPTS_RECORD), 'utf8')) as ScriptsRecord
    return { ran: record.ran ?? [], skipped: record.skipped ?? [] }
  } catch {
    return { ran: [], skipped: packagesWithScripts(slot) }
  }
}

/** Whether `allow` names a package of the slot whose scripts were skipped. */
export function needsScripts(slot: string, allow: AllowScripts | undefined): boolean {
  return scriptsRecord(slot).skipped.some((p) => allowed(allow, p.name))
}

/**
 * Installs `name@version` into the cache unless it is there, then runs the install scripts of
 * the packages `allowScripts` names that have not run them yet; resolves with what became of
 * every package's scripts. The install goes to a temporary folder renamed into place, so a slot
 * is never half-installed.
 */
export function installNpmPackage(
  cache: string,
  name: string,
  version: string,
  options: InstallOptions = {},
): Promise<ScriptsRecord> {
  const slot = cacheSlot(cache, name, version)
  const cached = isCached(cache, name, version)
  if (cached && !needsScripts(slot, options.allowScripts)) {
    return Promise.resolve(scriptsRecord(slot))
  }
  let pending = installing.get(slot)
  if (pending === undefined) {
    const work = cached
      ? runAllowedScripts(slot, name, version, options)
      : install(slot, name, version, options)
    pending = work.finally(() => installing.delete(slot))
    installing.set(slot, pending)
  }
  return pending
}

function npmOrRefuse(name: string, version: string): string {
  const npm = findExecutable('npm')
  if (npm === undefined) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `${name}@${version} must be installed outside the sandbox, but npm is not on PATH; ` +
        `install it by hand (npm install ${name}@${version}) or install npm`,
    )
  }
  return npm
}

function runNpm(
  npm: string,
  args: readonly string[],
  cwd: string,
  timeoutMs: number,
  failure: (why: string) => string,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    execFile(
      npm,
      args,
      { cwd, timeout: timeoutMs, maxBuffer: 16 * 1024 * 1024 },
      (error, _stdout, stderr) => {
        if (!error) return resolve()
        const why = String(stderr).trim().split('\n').slice(-3).join(' ') || error.message
        reject(new BarbicanError('ERR_LAUNCH_REFUSED', failure(why), { cause: error }))
      },
    )
  })
}

async function install(
  slot: string,
  name: string,
  version: string,
  options: InstallOptions,
): Promise<ScriptsRecord> {
  const npm = npmOrRefuse(name, version)
  const temp = `${slot}.installing-${process.pid}`
  rmSync(temp, { recursive: true, force: true })
  mkdirSync(temp, { recursive: true, mode: 0o755 })
  writeFileSync(join(temp, 'package.json'), '{ "private": true }\n')
  // Always without scripts: which packages have them is known only once they are on disk.
  const args = [
    'install',
    '--save-exact',
    '--no-audit',
    '--no-fund',
    '--no-update-notifier',
    '--loglevel=error',
    '--ignore-scripts',
    `${name}@${version}`,
  ]
  let record: ScriptsRecord
  try {
    await runNpm(
      npm,
      args,
      temp,
      options.timeoutMs ?? 300_000,
      (why) => `cannot install ${name}@${version} outside the sandbox: ${why}`,
    )
    record = await runAllowedScripts(temp, name, version, options)
    rmSync(slot, { recursive: true, force: true })
    renameSync(temp, slot)
  } finally {
    rmSync(temp, { recursive: true, force: true })
  }
  return record
}

/**
 * The installed packages of `dir` that have install scripts, from npm's own lock
 * (`hasInstallScript`: a `preinstall`, `install` or `postinstall` script, or a `binding.gyp`,
 * which npm builds with `node-gyp rebuild`).
 */
export function packagesWithScripts(dir: string): ScriptedPackage[] {
  let lock: { packages?: Record<string, { version?: string; hasInstallScript?: boolean }> }
  try {
    lock = JSON.parse(readFileSync(join(dir, 'package-lock.json'), 'utf8'))
  } catch {
    return []
  }
  const found = new Map<string, ScriptedPackage>()
  for (const [where, entry] of Object.entries(lock.packages ?? {})) {
    if (entry.hasInstallScript !== true || where === '') continue
    const name = where.slice(where.lastIndexOf('node_modules/') + 'node_modules/'.length)
    const key = `${name}@${entry.version ?? '?'}`
    if (!found.has(key)) {
      found.set(key, { name, version: entry.version ?? '?', scripts: scriptsOf(join(dir, where)) })
    }
  }
  return [...found.values()].sort((a, b) => a.name.localeCompare(b.name))
}

function scriptsOf(dir: string): string[] {
  let manifest: { scripts?: Record<string, string>; gypfile?: boolean }
  try {
    manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8'))
  } catch {
    return []
  }
  const cut = (text: string) => (text.length > 120 ? `${text.slice(0, 120)}…` : text)
  const scripts = INSTALL_SCRIPTS.filter((s) => manifest.scripts?.[s] !== undefined).map((s) =>
    cut(`${s}: ${manifest.scripts?.[s]}`),
  )
  // npm's implicit build of a native module: binding.gyp and no install script of its own.
  if (
    scripts.every((s) => !s.startsWith('install:') && !s.startsWith('preinstall:')) &&
    existsSync(join(dir, 'binding.gyp'))
  ) {
    scripts.push('install: node-gyp rebuild (binding.gyp)')
  }
  return scripts
}

/**
 * Runs, in `dir` (a slot, or an install about to become `slot`), the install scripts of the
 * packages `options.allowScripts` names that have not run them, with `npm rebuild NAME…`, and
 * records what ran and what was skipped.
 */
async function runAllowedScripts(
  dir: string,
  name: string,
  version: string,
  options: InstallOptions,
): Promise<ScriptsRecord> {
  const previous = scriptsRecord(dir)
  const withScripts = [...previous.ran, ...previous.skipped]
  const ran = withScripts.filter(
    (p) => previous.ran.some((r) => r.name === p.name) || allowed(options.allowScripts, p.name),
  )
  const toRun = ran.filter((p) => !previous.ran.some((r) => r.name === p.name))
  if (toRun.length > 0) {
    const names = [...new Set(toRun.map((p) => p.name))]
    await runNpm(
      npmOrRefuse(name, version),
      ['rebuild', '--no-update-notifier', '--loglevel=error', ...names],
      dir,
      options.scriptsTimeoutMs ?? 900_000,
      (why) =>
        `the install scripts of ${names.join(', ')} (in ${name}@${version}, allowed by ` +
        `trust.allowScripts) failed outside the sandbox: ${why}`,
    )
  }
  const record: ScriptsRecord = {
    ran,
    skipped: withScripts.filter((p) => !ran.includes(p)),
  }
  writeFileSync(join(dir, SCRIPTS_RECORD), `${JSON.stringify(record, null, 2)}\n`)
  return record
}

/** True when `path` is inside the cache slot of `name@version`. */
export function inCacheSlot(path: string, cache: string, name: string, version: string): boolean {
  const slot = cacheSlot(cache, name, version)
  return path === slot || path.startsWith(`${slot}${sep}`)
}

/**
 * What to say when a slot holds packages whose install scripts were skipped: the packages, what
 * would have run, and the config line that allows them. Undefined when none were skipped.
 */
export function skippedScriptsMessage(
  upstream: string,
  record: ScriptsRecord,
): { message: string; packages: string[]; fix: string } | undefined {
  if (record.skipped.length === 0) return undefined
  const names = [...new Set(record.skipped.map((p) => p.name))]
  const fix = `trust: { allowScripts: [${names.map((n) => JSON.stringify(n)).join(', ')}] }`
  const listed = record.skipped
    .map((p) => `${p.name}@${p.version} (${p.scripts.join('; ') || 'install script'})`)
    .join(', ')
  return {
    packages: names,
    fix,
    message:
      `upstream "${upstream}": the install scripts of ${listed} were not run (Barbican runs none ` +
      'unless told: they run outside the sandbox, with its rights); a native module among them ' +
      `is not built and will not load. To run them, add to its entry ("${upstream}") in the ` +
      `config: ${fix} (only the packages you trust), then restart`,
  }
}
