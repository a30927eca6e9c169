/**
 * What a stdio upstream's command line launches: a package run by a package runner (`npx`,
 * `uvx`) with the version it asks for, or a script run by an interpreter (`node`, `python`).
 * Knowing that lets Barbican refuse a floating version and check the package against
 * `barbican.lock` before anything runs.
 */
import { basename } from 'node:path'
import { splitNpmSpec } from '../sandbox/npm-install.ts'
import {
  bunRun,
  denoRun,
  type InterpreterRun,
  nodeOptionsRun,
  nodeRun,
  pythonRun,
} from './inline-code.ts'

export { splitNpmSpec }

/** One package a runner installs, and where the command line names it. */
export interface PackageRef {
  readonly name: string
  /** The version or range asked for; undefined when none was given. */
  readonly version: string | undefined
  /** Whether `version` names exactly one release. */
  readonly exact: boolean
  /** How the command line names it (`npx -p`, `uvx --with`, …), for refusal messages. */
  readonly via: string
}

/** A launch Barbican knows how to pin. */
export type Launch =
  | {
      readonly kind: 'package'
      readonly runner: 'npx' | 'uvx'
      readonly ecosystem: 'npm' | 'pypi'
      /** The package whose command runs. */
      readonly name: string
      /** The version or range asked for; undefined when none was given. */
      readonly version: string | undefined
      /** Whether `version` names exactly one release. */
      readonly exact: boolean
      /** Every other package installed beside it (`npx -p a -p b`, `uvx --with b`). */
      readonly also: readonly PackageRef[]
    }
  | { readonly kind: 'script'; readonly runner: 'node' | 'python'; readonly path: string }
  /** Code no file holds (`node -e`, `python -c`, a `data:` import): not lockable. */
  | { readonly kind: 'inline'; readonly runner: string; readonly reason: string }
  /** A runner used in a way that hides what it runs (a shell string): never launched. */
  | { readonly kind: 'shell'; readonly runner: string; readonly reason: string }

const EXACT_SEMVER = /^v?\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$/
const EXACT_PEP440 = /^\d+(\.\d+)*((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?$/

/** npx options that take a value (the next argument, or after `=`). */
const NPX_VALUE_FLAGS = new Set(['--cache', '--userconfig', '--registry'])
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
export function launchOf(
  command: string,
  args: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Launch | undefined {
  // NODE_OPTIONS reaches every node the command starts, npx's included.
  const fromEnv = env.NODE_OPTIONS === undefined ? undefined : nodeOptionsRun(env.NODE_OPTIONS)
  if (fromEnv?.kind === 'inline') return { kind: 'inline', runner: 'node', reason: fromEnv.reason }
  const program = basename(command).replace(/\.(exe|cmd)$/i, '')
  if (program === 'env') return envLaunch(args, env)
  if (program === 'npx') return npxLaunch(args)
  // `npm exec` (alias `npm x`) is npx under another name, with the same options.
  if (program === 'npm' && (args[0] === 'exec' || args[0] === 'x')) return npxLaunch(args.slice(1))
  if (program === 'uvx' || (program === 'uv' && args[0] === 'tool' && args[1] === 'run'))
    return uvxLaunch(program === 'uv' ? args.slice(2) : args)
  if (program === 'uv' && args[0] === 'run') return uvRunLaunch(args.slice(1))
  if (program === 'node' || program === 'nodejs' || command === process.execPath)
    return interpreterLaunch('node', program, nodeRun(args, program))
  if (/^python(\d+(\.\d+)?)?$/.test(program))
    return interpreterLaunch('python', program, pythonRun(args, program))
  if (program === 'deno') return interpreterLaunch(undefined, program, denoRun(args))
  if (program === 'bun') return interpreterLaunch(undefined, program, bunRun(args))
  return undefined
}

/**
 * A package runner starting an interpreter (`npx node@22 -e …`, `uvx python -c …`): the
 * interpreter's own inline forms count as they would without the runner.
 */
function inlineInterpreter(program: string, args: readonly string[]): Launch | undefined {
  if (!INTERPRETERS.test(program)) return undefined
  const launch = launchOf(program, args)
  return launch?.kind === 'inline' ? launch : undefined
}

const INTERPRETERS = /^(node|nodejs|deno|bun|python(\d+(\.\d+)?)?)$/

/** `uv run [options] COMMAND …`: only the wrapped interpreter's inline forms are read. */
function uvRunLaunch(args: readonly string[]): Launch | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-')
      return { kind: 'inline', runner: 'uv', reason: 'uv run - reads its program from stdin' }
    const [flag, inline] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
    if (UVX_VALUE_FLAGS.has(flag) || flag === '--package' || flag === '--project') {
      if (inline === undefined) i++
      continue
    }
    if (arg.startsWith('-')) continue
    return inlineInterpreter(basename(arg), args.slice(i + 1))
  }
  return undefined
}

/** `env [-i] [NAME=VALUE]... command args`: what the wrapped command launches. */
function envLaunch(
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Launch | undefined {
  const assigned: Record<string, string> = { ...env }
  let i = 0
  for (; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '--') {
      i++
      break
    }
    if (arg.startsWith('-')) {
      // -u NAME, -C DIR, -S STRING take a value; -S splits a string into an argv: a shell-like
      // form Barbican does not read, so it is refused like one.
      if (arg === '-S' || arg.startsWith('--split-string') || /^-[^-]*S/.test(arg))
        return { kind: 'shell', runner: 'env', reason: 'env -S splits a string into a command' }
      if (arg === '-u' || arg === '-C' || arg === '--unset' || arg === '--chdir') i++
      continue
    }
    const eq = arg.indexOf('=')
    if (eq <= 0) break
    assigned[arg.slice(0, eq)] = arg.slice(eq + 1)
  }
  const command = args[i]
  return command === undefined ? undefined : launchOf(command, args.slice(i + 1), assigned)
}

function interpreterLaunch(
  lockable: 'node' | 'python' | undefined,
  runner: string,
  run: InterpreterRun,
): Launch | undefined {
  if (run === undefined) return undefined
  if (run.kind === 'inline') return { kind: 'inline', runner, reason: run.reason }
  return lockable === undefined ? undefined : { kind: 'script', runner: lockable, path: run.path }
}

/**
 * npm's option parser expands an unambiguous abbreviation (`--pack` is `--package`); anything
 * spelled like the start of `--package` is read as it.
 */
function isNpxPackageFlag(flag: string): boolean {
  return flag === '-p' || (flag.length >= 5 && '--package'.startsWith(flag))
}

function npxLaunch(args: readonly string[]): Launch | undefined {
  const named: { spec: string; via: string }[] = []
  let positional: string | undefined
  let binArgs: readonly string[] = []
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    if (arg === '-c' || arg === '--call' || arg.startsWith('--call='))
      return { kind: 'shell', runner: 'npx', reason: 'npx -c runs its argument through a shell' }
    if (arg === '--') {
      positional = args[i + 1]
      binArgs = args.slice(i + 2)
      break
    }
    const [flag, inline] = arg.startsWith('-') ? splitInline(arg) : [arg, undefined]
    if (isNpxPackageFlag(flag)) {
      const value = inline ?? args[++i]
      if (value !== undefined) named.push({ spec: value, via: `npx ${flag}` })
      continue
    }
    if (NPX_VALUE_FLAGS.has(flag)) {
      if (inline === undefined) i++
      continue
    }
    if (arg.startsWith('-')) continue
    positional = arg
    binArgs = args.slice(i + 1)
    break
  }
  // With --package the positional argument is a command of those packages; without, it is
  // the package itself.
  if (named.length === 0) {
    if (positional === undefined) return undefined
    named.push({ spec: positional, via: 'npx' })
  }
  const bin =
    named.length === 1 && named[0]!.via === 'npx' ? splitNpmSpec(positional!).name : positional
  const wrapped = bin === undefined ? undefined : inlineInterpreter(bin, binArgs)
  if (wrapped) return wrapped
  const [first, ...rest] = named.map(({ spec, via }) => npmRef(spec, via))
  return {
    kind: 'package',
    runner: 'npx',
    ecosystem: 'npm',
    name: first!.name,
    version: first!.version,
    exact: first!.exact,
    also: rest,
  }
}

function npmRef(spec: string, via: string): PackageRef {
  const { name, version } = splitNpmSpec(spec)
  return { name, version, exact: version !== undefined && EXACT_SEMVER.test(version), via }
}

function pypiRef(spec: string, via: string): PackageRef {
  const { name, version } = splitPythonSpec(spec)
  return { name, version, exact: version !== undefined && EXACT_PEP440.test(version), via }
}

/** uvx options that install packages besides the one whose command runs. */
const UVX_EXTRA_FLAGS = new Set(['--with', '--with-editable', '--with-requirements'])

function uvxLaunch(args: readonly string[]): Launch | undefined {
  let from: PackageRef | undefined
  const also: PackageRef[] = []
  let command: string | undefined
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!
    const [flag, inline] = arg.startsWith('--') ? splitInline(arg) : [arg, undefined]
    if (UVX_VALUE_FLAGS.has(flag)) {
      const value = inline ?? args[++i]
      if (value === undefined) continue
      if (flag === '--from') from = pypiRef(value, 'uvx --from')
      else if (flag === '--with')
        // uv splits --with on commas: `--with a==1,b` installs both.
        for (const spec of value.split(',')) also.push(pypiRef(spec.trim(), 'uvx --with'))
      else if (UVX_EXTRA_FLAGS.has(flag))
        // A local directory or a requirements file: no version Barbican could check.
        also.push({ name: value, version: undefined, exact: false, via: `uvx ${flag}` })
      continue
    }
    if (arg.startsWith('-')) continue
    command = arg
    const wrapped = inlineInterpreter(splitPythonSpec(arg).name, args.slice(i + 1))
    if (wrapped) return wrapped
    break
  }
  const main = from ?? (command === undefined ? undefined : pypiRef(command, 'uvx'))
  if (main === undefined) return undefined
  return {
    kind: 'package',
    runner: 'uvx',
    ecosystem: 'pypi',
    name: main.name,
    version: main.version,
    exact: main.exact,
    also,
  }
}

function splitInline(arg: string): [string, string | undefined] {
  const eq = arg.indexOf('=')
  return eq < 0 ? [arg, undefined] : [arg.slice(0, eq), arg.slice(eq + 1)]
}

/** `name==1.2`, `name@1.2`, `name[extra]>=1` → name and the version part as written. */
export function splitPythonSpec(spec: string): { name: string; version: string | undefined } {
  // A URL or a path (`git+https://…`, `./pkg`) names no version at all.
  if (/^[A-Za-z][A-Za-z0-9+.-]*:\/\/|^[./~]/.test(spec) || spec.includes(' @ '))
    return { name: spec, version: undefined }
  const pinned = /^([A-Za-z0-9._-]+)(\[[^\]]*\])?(==|@)([^,;\s]+)$/.exec(spec)
  if (pinned) return { name: pinned[1]!, version: pinned[4] }
  const bare = /^([A-Za-z0-9._-]+)(\[[^\]]*\])?(.*)$/.exec(spec)
  const rest = bare?.[3]?.trim()
  return { name: bare?.[1] ?? spec, version: rest ? rest : undefined }
}
