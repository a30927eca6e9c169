/**
 * What a stdio upstream's command line launches: a package run by a package runner (`npx`,
 * `uvx`) with the version it asks for, or a script run by an interpreter (`node`, `python`).
 * Knowing that lets Barbican refuse a floating version and check the package against
 * `barbican.lock` before anything runs.
 */
import { basename } from 'node:path'

/** A launch Barbican knows how to pin. */
export type Launch =
  | {
      readonly kind: 'package'
      readonly runner: 'npx' | 'uvx'
      readonly ecosystem: 'npm' | 'pypi'
      readonly name: string
      /** The version or range asked for; undefined when none was given. */
      readonly version: string | undefined
      /** Whether `version` names exactly one release. */
      readonly exact: boolean
    }
  | { readonly kind: 'script'; readonly runner: 'node' | 'python'; readonly path: string }
  /** A runner used in a way that hides what it runs (a shell string): never launched. */
  | { readonly kind: 'shell'; readonly runner: string; readonly reason: string }

const EXACT_SEMVER = /^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/
const EXACT_PEP440 = /^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$/

/** npx options that take a value (the next argument, or after `=`). */
const NPX_VALUE_FLAGS = new Set(['-p', '--package', '--cache', '--userconfig', '--registry'])
/** uvx options that take a value. */
const UVX_VALUE_FLAGS = new Set([
  '--from',
  '--with',
  '--with-editable',
  '--with-requirements',
  '--python',
  '-p',
  '--index-url',
  '--extra-index-url',
  '--index',
  '--default-index',
  '--constraints',
  '--overrides',
  '--cache-dir',
])

/** Recognizes the launch in an exact argv; undefined when it is some other program. */
export function launchOf(command: string, args: readonly string[]): Launch | undefined {
  const program = basename(command).replace(/\.(exe|cmd)$/i, '')
  if (program === 'npx') return npxLaunch(args)
  if (program === 'uvx' || (program === 'uv' && args[0] === 'tool' && args[1] === 'run'))
    return uvxLaunch(program === 'uv' ? args.slice(2) : args)
  if (program === 'node' || program === 'nodejs' || command === process.execPath)
    return scriptLaunch('node', args, new Set(['-r', '--require', '--import', '--loader']))
  if (/^python(\d+(\.\d+)?)?$/.test(program))
    return scriptLaunch('python', args, new Set(['-W', '-X']))
  return undefined
}

function npxLaunch(args: readonly string[]): Launch | undefined {
  let spec: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-c' || arg === '--call' || arg.startsWith('--call='))
      return { kind: 'shell', runner: 'npx', reason: 'npx -c runs its argument through a shell' }
    if (arg === '--') {
      spec ??= args[i + 1]
      break
    }
    const [flag, inline] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
    if (NPX_VALUE_FLAGS.has(flag)) {
      const value = inline ?? args[++i]
      if ((flag === '-p' || flag === '--package') && value !== undefined) spec ??= value
      continue
    }
    if (arg.startsWith('-')) continue
    spec ??= arg
    break
  }
  if (spec === undefined) return undefined
  const { name, version } = splitNpmSpec(spec)
  return {
    kind: 'package',
    runner: 'npx',
    ecosystem: 'npm',
    name,
    version,
    exact: version !== undefined && EXACT_SEMVER.test(version),
  }
}

function uvxLaunch(args: readonly string[]): Launch | undefined {
  let spec: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const [flag, inline] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
    if (UVX_VALUE_FLAGS.has(flag)) {
      const value = inline ?? args[++i]
      if (flag === '--from' && value !== undefined) spec = value
      continue
    }
    if (arg.startsWith('-')) continue
    spec ??= arg
    break
  }
  if (spec === undefined) return undefined
  const { name, version } = splitPythonSpec(spec)
  return {
    kind: 'package',
    runner: 'uvx',
    ecosystem: 'pypi',
    name,
    version,
    exact: version !== undefined && EXACT_PEP440.test(version),
  }
}

function scriptLaunch(
  runner: 'node' | 'python',
  args: readonly string[],
  valueFlags: ReadonlySet<string>,
): Launch | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-e' || arg === '--eval' || arg === '-c' || arg === '-p' || arg === '--print')
      return {
        kind: 'shell',
        runner,
        reason: `${runner} ${arg} runs code given on the command line`,
      }
    if (runner === 'python' && arg === '-m') return undefined
    if (valueFlags.has(arg)) {
      i++
      continue
    }
    if (arg.startsWith('-')) continue
    return { kind: 'script', runner, path: arg }
  }
  return undefined
}

function splitInline(arg: string): [string, string | undefined] {
  const eq = arg.indexOf('=')
  return eq < 0 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)]
}

/** `@scope/name@1.2.3` → name and version (`latest` and ranges stay as written). */
export function splitNpmSpec(spec: string): { name: string; version: string | undefined } {
  const at = spec.indexOf('@', spec.startsWith('@') ? 1 : 0)
  if (at < 0) return { name: spec, version: undefined }
  return { name: spec.slice(0, at), version: spec.slice(at + 1) || undefined }
}

/** `name==1.2`, `name@1.2`, `name[extra]>=1` → name and the version part as written. */
export function splitPythonSpec(spec: string): { name: string; version: string | undefined } {
  const pinned = /^([A-Za-z0-9._-]+)(\[[^\]]*\])?(==|@)([^,;\s]+)$/.exec(spec)
  if (pinned) return { name: pinned[1]!, version: pinned[4] }
  const bare = /^([A-Za-z0-9._-]+)(\[[^\]]*\])?(.*)$/.exec(spec)
  const rest = bare?.[3]?.trim()
  return { name: bare?.[1] ?? spec, version: rest ? rest : undefined }
}
