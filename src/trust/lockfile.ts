/**
 * `barbican.lock`: for every stdio upstream launched from a package or script, the exact
 * version and what is installed, written by `barbican lock` and checked before each launch.
 * Registry integrity (npm's sha512) is taken from the package-lock that installed the package;
 * the files hash covers what actually runs (the manifest and its bin entries, or the script),
 * so a package edited on disk after installation is caught as well.
 */
import { createHash } from 'node:crypto'
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import type { Launch } from './launch.ts'

export const LOCKFILE_NAME = 'barbican.lock'

/** What one upstream launches, as pinned. */
export interface LockEntry {
  readonly runner: string
  /** Package launches: the package name and exact version. */
  readonly package?: string
  readonly version?: string
  /** npm's registry integrity (`sha512-…`) from the lock that installed it, when known. */
  readonly integrity?: string
  /** Script launches: the script as the config names it. */
  readonly path?: string
  /** Wasm modules: the module's SHA-256, in hex as `sha256sum` prints it. */
  readonly sha256?: string
  /** `sha256-…` over what runs; empty where it cannot be found before launch (uvx, Wasm). */
  readonly files: string
  /** Package launches: every other package installed beside it (`npx -p`, `uvx --with`). */
  readonly with?: readonly LockEntry[]
  /**
   * Written by hand: lets Barbican run the package's install scripts when it installs a
   * confined npx package (src/sandbox/npm-install.ts). Default: scripts never run.
   */
  readonly allowScripts?: boolean
}

export interface Lockfile {
  readonly lockfileVersion: 1
  readonly upstreams: Readonly<Record<string, LockEntry>>
}

/** Where a launch happens: the upstream's working directory and environment. */
export interface LaunchContext {
  readonly cwd: string
  readonly home: string | undefined
  /** Where Barbican installs the packages of confined npx launches (npm-install.ts). */
  readonly packageCache?: string | undefined
}

/** Reads a lockfile; undefined when there is none. A malformed one is a config error. */
export function readLockfile(path: string): Lockfile | undefined {
  if (!existsSync(path)) return undefined
  let value: unknown
  try {
    value = JSON.parse(readFileSync(path, 'utf8'))
  } catch (err) {
    throw new BarbicanError('ERR_CONFIG_INVALID', `${path}: ${(err as Error).message}`)
  }
  const lock = value as Partial<Lockfile> | null
  if (lock?.lockfileVersion !== 1 || typeof lock.upstreams !== 'object' || !lock.upstreams)
    throw new BarbicanError(
      'ERR_CONFIG_INVALID',
      `${path}: not a barbican.lock (expected lockfileVersion 1 and an "upstreams" object)`,
    )
  return lock as Lockfile
}

/** Writes a lockfile with sorted upstreams, so diffs in version control stay small. */
export function writeLockfile(path: string, lock: Lockfile): void {
  const upstreams = Object.fromEntries(
    Object.entries(lock.upstreams).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)),
  )
  writeFileSync(path, `${JSON.stringify({ lockfileVersion: 1, upstreams }, null, 2)}\n`)
}

/** What is installed now for `launch`; refuses when the package cannot be found. */
export function observeLaunch(launch: Launch, ctx: LaunchContext): LockEntry {
  if (launch.kind === 'shell' || launch.kind === 'inline')
    throw new BarbicanError('ERR_LAUNCH_REFUSED', `${launch.reason}; it cannot be locked`)
  if (launch.kind === 'script') {
    const path = isAbsolute(launch.path) ? launch.path : resolve(ctx.cwd, launch.path)
    if (!existsSync(path))
      throw new BarbicanError('ERR_LAUNCH_REFUSED', `script ${path} does not exist`)
    return { runner: launch.runner, path: launch.path, files: filesHash([path]) }
  }
  const main = observePackage(launch.runner, launch.ecosystem, launch, ctx)
  if (launch.also.length === 0) return main
  return {
    ...main,
    with: launch.also.map((pkg) => observePackage(launch.runner, launch.ecosystem, pkg, ctx)),
  }
}

function observePackage(
  runner: string,
  ecosystem: 'npm' | 'pypi',
  launch: { readonly name: string; readonly version: string | undefined },
  ctx: LaunchContext,
): LockEntry {
  if (ecosystem === 'pypi') {
    return {
      runner,
      package: launch.name,
      ...(launch.version === undefined ? {} : { version: launch.version }),
      files: '',
    }
  }
  const dir = findNpmPackage(launch.name, launch.version, ctx)
  if (!dir) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `package ${launch.name}${launch.version ? `@${launch.version}` : ''} is not installed ` +
        `(looked in node_modules above ${ctx.cwd} and in the npx cache), so it cannot be ` +
        'verified before launch; install it first (npm install --no-save ' +
        `${launch.name}${launch.version ? `@${launch.version}` : ''})`,
    )
  }
  const manifest = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as {
    version?: unknown
    bin?: unknown
  }
  const bins =
    typeof manifest.bin === 'string'
      ? [manifest.bin]
      : manifest.bin && typeof manifest.bin === 'object'
        ? Object.values(manifest.bin).filter((b): b is string => typeof b === 'string')
        : []
  const files = [join(dir, 'package.json'), ...bins.map((b) => resolve(dir, b))]
  const integrity = registryIntegrity(dir, launch.name)
  return {
    runner,
    package: launch.name,
    version: String(manifest.version),
    ...(integrity === undefined ? {} : { integrity }),
    files: filesHash(files),
  }
}

/** `sha256-<base64>` over each file's relative name and content, in a stable order. */
export function filesHash(paths: readonly string[]): string {
  const hash = createHash('sha256')
  const base = dirname(paths[0] ?? '.')
  for (const path of [...new Set(paths)].sort()) {
    const name = path.startsWith(base + sep) ? path.slice(base.length + 1) : path
    hash.update(`${name}\u0000`)
    hash.update(existsSync(path) ? readFileSync(path) : Buffer.from('(missing)'))
    hash.update('\u0000')
  }
  return `sha256-${hash.digest('base64')}`
}

/** The installed package directory: node_modules above `cwd`, then the npx cache. */
export function findNpmPackage(
  name: string,
  version: string | undefined,
  ctx: LaunchContext,
): string | undefined {
  for (let dir = resolve(ctx.cwd); ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return candidate
    if (dirname(dir) === dir) break
  }
  if (ctx.packageCache !== undefined && version !== undefined) {
    const slot = `${name.replace('/', '+')}@${version.replace(/^v/, '')}`
    const candidate = join(ctx.packageCache, slot, 'node_modules', name)
    if (existsSync(join(candidate, 'package.json'))) return candidate
  }
  if (ctx.home === undefined) return undefined
  const cache = join(ctx.home, '.npm', '_npx')
  let found: string | undefined
  for (const entry of safeList(cache)) {
    const candidate = join(cache, entry, 'node_modules', name)
    const manifest = join(candidate, 'package.json')
    if (!existsSync(manifest)) continue
    const installed = (JSON.parse(readFileSync(manifest, 'utf8')) as { version?: string }).version
    if (version === undefined || installed === version.replace(/^v/, '')) return candidate
    found ??= candidate
  }
  return found
}

/** The `integrity` npm recorded for the package in the lock beside its node_modules. */
function registryIntegrity(packageDir: string, name: string): string | undefined {
  // packageDir = <root>/node_modules/<name>; the locks live in <root> and <root>/node_modules.
  const root = dirname(packageDir.slice(0, packageDir.length - name.length - 1))
  for (const lock of [
    join(root, 'node_modules', '.package-lock.json'),
    join(root, 'package-lock.json'),
  ]) {
    if (!existsSync(lock)) continue
    try {
      const parsed = JSON.parse(readFileSync(lock, 'utf8')) as {
        packages?: Record<string, { integrity?: unknown }>
      }
      const integrity = parsed.packages?.[`node_modules/${name}`]?.integrity
      if (typeof integrity === 'string') return integrity
    } catch {
      // An unreadable lock only means no registry integrity; the files hash still applies.
    }
  }
  return undefined
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/** Whether `barbican.lock` lets this upstream's package run its install scripts. */
export function scriptsAllowed(lock: Lockfile | undefined, upstream: string): boolean {
  return lock?.upstreams[upstream]?.allowScripts === true
}
