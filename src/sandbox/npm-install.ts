/**
 * Installs the package of a confined `npx PACKAGE@VERSION` launch outside the sandbox, into a
 * cache Barbican owns (docs/sandbox.md, ADR 043): the sandbox has no network, so the registry is
 * reached here, once, and the server then runs the installed bin inside with no network. Only an
 * exact version is installed; lifecycle scripts never run unless the upstream's `barbican.lock`
 * entry says `allowScripts: true`, since they would run with Barbican's rights. The installed
 * package is then verified against `barbican.lock` like any other (launch-check.ts).
 */
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
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

export interface InstallOptions {
  /** Run the package's lifecycle scripts (only when barbican.lock allows them). */
  readonly scripts: boolean
  /** Longest the install may take (default 5 minutes). */
  readonly timeoutMs?: number | undefined
}

/** In-flight installs, so two upstreams naming one package install it once. */
const installing = new Map<string, Promise<string>>()

/**
 * Installs `name@version` into the cache unless it is there; resolves with its slot. The
 * install goes to a temporary folder renamed into place, so a slot is never half-installed.
 */
export function installNpmPackage(
  cache: string,
  name: string,
  version: string,
  options: InstallOptions,
): Promise<string> {
  const slot = cacheSlot(cache, name, version)
  if (isCached(cache, name, version)) return Promise.resolve(slot)
  let pending = installing.get(slot)
  if (pending === undefined) {
    pending = install(slot, name, version, options).finally(() => installing.delete(slot))
    installing.set(slot, pending)
  }
  return pending
}

async function install(
  slot: string,
  name: string,
  version: string,
  options: InstallOptions,
): Promise<string> {
  const npm = findExecutable('npm')
  if (npm === undefined) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `${name}@${version} must be installed outside the sandbox, but npm is not on PATH; ` +
        `install it by hand (npm install ${name}@${version}) or install npm`,
    )
  }
  const temp = `${slot}.installing-${process.pid}`
  rmSync(temp, { recursive: true, force: true })
  mkdirSync(temp, { recursive: true, mode: 0o755 })
  writeFileSync(join(temp, 'package.json'), '{ "private": true }\n')
  const args = [
    'install',
    '--save-exact',
    '--no-audit',
    '--no-fund',
    '--no-update-notifier',
    '--loglevel=error',
    ...(options.scripts ? [] : ['--ignore-scripts']),
    `${name}@${version}`,
  ]
  try {
    await new Promise<void>((resolve, reject) => {
      execFile(
        npm,
        args,
        { cwd: temp, timeout: options.timeoutMs ?? 300_000, maxBuffer: 4 * 1024 * 1024 },
        (error, _stdout, stderr) => {
          if (!error) return resolve()
          const why = String(stderr).trim().split('\n').slice(-3).join(' ') || error.message
          reject(
            new BarbicanError(
              'ERR_LAUNCH_REFUSED',
              `cannot install ${name}@${version} outside the sandbox: ${why}`,
              { cause: error },
            ),
          )
        },
      )
    })
    rmSync(slot, { recursive: true, force: true })
    renameSync(temp, slot)
  } finally {
    rmSync(temp, { recursive: true, force: true })
  }
  return slot
}
