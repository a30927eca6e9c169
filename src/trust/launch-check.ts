/**
 * The check before a stdio upstream is launched: no shell strings, no inline code and no
 * floating package versions unless allowed (every package the command line names, not only the
 * first), and, when `barbican.lock` exists, exactly the pinned package, version,
 * registry integrity and files. A refusal names the package, what was expected and what was
 * found, so the operator knows whether to re-lock or to distrust the machine.
 */
import { BarbicanError } from '../common/errors.ts'
import { type CommandHint, plainHint } from './command-hint.ts'
import { type Launch, launchOf } from './launch.ts'
import { type LaunchContext, type LockEntry, type Lockfile, observeLaunch } from './lockfile.ts'

/** The parts of a stdio upstream's config the check reads. */
export interface LaunchSpec {
  readonly command: string
  readonly args: readonly string[]
  /** The process environment the config declares (`NODE_OPTIONS` can load code too). */
  readonly env?: Readonly<Record<string, string>>
}

export interface LaunchCheckOptions {
  readonly allowFloating: boolean
  /** Launch code given on the command line (`node -e`, `python -c`); never locked. Default false. */
  readonly allowInlineCode?: boolean
  /** The lockfile's content; undefined when there is no lockfile (integrity is not checked). */
  readonly lock: Lockfile | undefined
  readonly context: LaunchContext
  /** How suggested commands are spelt (default: without options). */
  readonly hint?: CommandHint
}

/** What a refusal carries besides its message (the error's `data`). */
export interface LaunchRefusal {
  readonly upstream: string
  /** Set when the refusal is for a floating version: which package, and the example given. */
  readonly floating?: {
    readonly ecosystem: 'npm' | 'pypi'
    readonly name: string
    readonly example: string
  }
}

/** Throws ERR_LAUNCH_REFUSED with a precise message, or returns what was verified. */
export function checkLaunch(
  upstream: string,
  spec: LaunchSpec,
  options: LaunchCheckOptions,
): Launch | undefined {
  const refuse = (message: string, data: Partial<LaunchRefusal> = {}): never => {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${upstream}": launch refused: ${message}`,
      {
        data: { upstream, ...data },
      },
    )
  }
  const hint = options.hint ?? plainHint
  const launch = launchOf(spec.command, spec.args, spec.env)
  if (!launch) return undefined
  if (launch.kind === 'shell') return refuse(`${launch.reason}; configure the server's own command`)
  if (launch.kind === 'inline') {
    if (options.allowInlineCode !== true)
      refuse(
        `${launch.reason}, which barbican.lock cannot pin; launch a script file or a package, ` +
          'or set trust.allowInlineCode: true',
      )
    // Allowed inline code has nothing a lockfile could compare.
    return launch
  }
  if (launch.kind === 'package' && !options.allowFloating) {
    const first = { ...launch, via: launch.runner }
    for (const pkg of [first, ...launch.also]) {
      if (pkg.exact) continue
      const asked = pkg.version === undefined ? 'no version' : `"${pkg.version}"`
      const example = launch.ecosystem === 'npm' ? `${pkg.name}@1.2.3` : `${pkg.name}==1.2.3`
      const via = pkg === first ? '' : ` (${pkg.via})`
      refuse(
        `${pkg.name}${via} is given with ${asked}, which floats to whatever the registry serves ` +
          `at launch; pin an exact version (e.g. ${example}) or set trust.allowFloating: true ` +
          '(--allow-floating for one run)',
        { floating: { ecosystem: launch.ecosystem, name: pkg.name, example } },
      )
    }
  }
  const lock = options.lock
  if (!lock) return launch
  const expected = lock.upstreams[upstream]
  const what = launch.kind === 'package' ? `package ${launch.name}` : `script ${launch.path}`
  if (!expected)
    return refuse(`${what} has no entry in barbican.lock; run \`${hint('lock')}\` to pin it`)
  if (launch.kind === 'package') {
    if (expected.package !== launch.name)
      refuse(
        `barbican.lock pins package ${expected.package ?? '(none)'}, the config launches ${launch.name}`,
      )
    const asked = launch.version?.replace(/^v/, '')
    if (launch.exact && asked !== expected.version)
      refuse(
        `barbican.lock pins ${launch.name}@${expected.version ?? '(none)'}, the config asks for ${launch.name}@${asked}`,
      )
  } else if (expected.path !== launch.path) {
    refuse(
      `barbican.lock pins script ${expected.path ?? '(none)'}, the config launches ${launch.path}`,
    )
  }
  let actual: LockEntry
  try {
    actual = observeLaunch(launch, options.context)
  } catch (err) {
    return refuse((err as Error).message)
  }
  const label =
    launch.kind === 'package'
      ? `${launch.name}@${expected.version ?? '?'}`
      : `script ${launch.path}`
  compareEntry(label, expected, actual, refuse)
  if (launch.kind === 'package') {
    const want = expected.with ?? []
    const got = actual.with ?? []
    const names = (entries: readonly LockEntry[]) => entries.map((e) => e.package).join(', ')
    if (names(want) !== names(got))
      refuse(
        `barbican.lock pins ${launch.name} with [${names(want)}], the config installs ` +
          `[${names(got)}] beside it; run \`${hint('lock')}\` to pin them`,
      )
    want.forEach((entry, i) => {
      compareEntry(`${entry.package}@${entry.version ?? '?'}`, entry, got[i]!, refuse)
    })
  }
  return launch
}

function compareEntry(
  label: string,
  expected: LockEntry,
  actual: LockEntry,
  refuse: (message: string) => never,
): void {
  for (const field of ['version', 'integrity', 'files'] as const) {
    const want = expected[field]
    if (want === undefined || want === '') continue
    const got = actual[field]
    if (got !== want) {
      refuse(
        `${label} does not match barbican.lock: ${field} expected ${want}, found ${got ?? '(none)'}`,
      )
    }
  }
}
