/**
 * The exact version a floating package name resolves to today: asked of the npm registry
 * (`npm view NAME version`), or, offline, read from the npx cache (~/.npm/_npx), where the
 * packages `npx -y NAME` already ran are installed. Used by `barbican import` to pin what a
 * client config leaves floating, and by the launch refusal to name the version to pin.
 */
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { homedir } from 'node:os'
import { join } from 'node:path'

export interface ResolvedVersion {
  readonly version: string
  /** Where the version came from, for the operator: `registry` or `npx cache`. */
  readonly source: 'registry' | 'npx cache'
}

/** Resolves a package name to an exact version; undefined when neither source knows it. */
export type VersionResolver = (name: string) => Promise<ResolvedVersion | undefined>

/** How long `npm view` may take before the npx cache is used instead. */
export const REGISTRY_TIMEOUT_MS = 10_000

const EXACT = /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/

/** Asks `npm view`; undefined when npm is missing, offline, slow or the package is unknown. */
export function registryVersion(
  name: string,
  timeoutMs: number = REGISTRY_TIMEOUT_MS,
): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile(
      'npm',
      ['view', `${name}@latest`, 'version', '--json'],
      { timeout: timeoutMs, windowsHide: true, shell: process.platform === 'win32' },
      (err, stdout) => {
        if (err) return resolve(undefined)
        try {
          const version = JSON.parse(stdout) as unknown
          resolve(typeof version === 'string' && EXACT.test(version) ? version : undefined)
        } catch {
          resolve(undefined)
        }
      },
    )
  })
}

/** The npx cache directory: `$npm_config_cache/_npx`, else ~/.npm/_npx. */
export function npxCacheDir(env: Readonly<Record<string, string | undefined>> = process.env) {
  return join(env.npm_config_cache ?? join(homedir(), '.npm'), '_npx')
}

/** The highest version of `name` installed in the npx cache, if any. */
export function npxCacheVersion(
  name: string,
  cacheDir: string = npxCacheDir(),
): string | undefined {
  let best: string | undefined
  let entries: string[]
  try {
    entries = readdirSync(cacheDir)
  } catch {
    return undefined
  }
  for (const entry of entries) {
    try {
      const manifest = JSON.parse(
        readFileSync(join(cacheDir, entry, 'node_modules', name, 'package.json'), 'utf8'),
      ) as { name?: unknown; version?: unknown }
      const version = manifest.version
      if (manifest.name !== name || typeof version !== 'string' || !EXACT.test(version)) continue
      if (best === undefined || compareVersions(version, best) > 0) best = version
    } catch {
      // Not installed in this cache entry.
    }
  }
  return best
}

/** Compares the numeric release parts of two exact versions (prereleases sort below). */
export function compareVersions(a: string, b: string): number {
  const parts = (v: string) => v.split(/[-+]/)[0]!.split('.').map(Number)
  const [pa, pb] = [parts(a), parts(b)]
  for (let i = 0; i < 3; i++) if (pa[i] !== pb[i]) return (pa[i] ?? 0) - (pb[i] ?? 0)
  return Number(!a.includes('-')) - Number(!b.includes('-'))
}

/** The registry first, the npx cache when the registry does not answer. */
export const npmResolver: VersionResolver = async (name) => {
  const fromRegistry = await registryVersion(name)
  if (fromRegistry !== undefined) return { version: fromRegistry, source: 'registry' }
  const cached = npxCacheVersion(name)
  return cached === undefined ? undefined : { version: cached, source: 'npx cache' }
}
