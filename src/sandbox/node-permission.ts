/**
 * The confinement where bubblewrap is missing (ADR 030 "Fallback", ADR 097): a Node program run
 * by Barbican's own Node with `--permission`, granted the same file view as the bubblewrap
 * sandbox with `--allow-fs-read` / `--allow-fs-write`; no child processes, workers, addons or
 * WASI.
 *
 * The model has no deny rule, so a granted folder that holds something the server must not see
 * (Barbican's config, lockfile or store, `.barbican/`, a file that usually holds a secret) is
 * granted **entry by entry** instead: every entry of the folder but those. It has no writable
 * layer either, so an installed package that writes next to its own code runs from a copy of
 * itself in its state directory (src/sandbox/package-copy.ts).
 */
import { existsSync, mkdirSync, readdirSync, realpathSync, rmSync } from 'node:fs'
import { basename, join, resolve, sep } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import { hiddenEntry } from '../config/sandbox-grants.ts'
import { hostUserName, identityEnvironment } from './identity.ts'
import { packageCopy } from './package-copy.ts'
import {
  type Launch,
  makeStateDir,
  resolveCommand,
  type SandboxSpec,
  SYSTEM_DIRS,
  sandboxView,
} from './sandbox.ts'

/** The fallback where bubblewrap is missing, for Node servers only (ADR 030, "Fallback"). */
export const NODE_MECHANISM =
  'node-permission (Node.js permission model: files, no child processes, workers, addons or WASI)'
/** What the Node.js permission model leaves open. */
export const NODE_NOT_COVERED =
  'network (loopback and private addresses included); memory, process and CPU limits; ' +
  "other processes (it shares the host's process table and may signal processes of the same " +
  'user, Barbican included); symlinks already inside a granted folder are followed'

/**
 * Files whose mere existence popular packages probe with `fs.existsSync`, which under this model
 * throws ERR_ACCESS_DENIED for a path not granted instead of answering false: `is-wsl` (through
 * `open`, a dependency of mcp-remote and @playwright/mcp) looks for the first two at import time,
 * desktop-commander for `/.dockerenv`, and the server dies before it starts. Readable, as under
 * bubblewrap (whose fresh /proc shows the first; it has no /run/WSL nor /.dockerenv): they say
 * only whether the host is WSL or a Docker container. Exact paths, not their folders (ADR 108,
 * ADR 145).
 */
export const EXISTENCE_PROBES = ['/proc/sys/fs/binfmt_misc/WSLInterop', '/run/WSL', '/.dockerenv']

/** Node options that would loosen the permission model if they reached the server's Node. */
const LOOSENING = /^--(allow-|no-permission|no-experimental-permission)/

// Which entries of a split folder are left out is grants.ts's rule, shared with inference.
export { hiddenEntry }

/** True when `inner` is `outer` or inside it. */
function within(inner: string, outer: string): boolean {
  return inner === outer || inner.startsWith(outer.endsWith(sep) ? outer : outer + sep)
}

function entriesOf(dir: string): string[] {
  try {
    return readdirSync(dir)
  } catch {
    return []
  }
}

/**
 * The grants that give `dir` without what must stay hidden: `[dir]` itself when it holds none of
 * `protect` (existing or not: the store's `-wal` file appears later) and no hidden entry at its
 * top level; otherwise each of its entries but those, recursing only into a folder that holds a
 * protected path. Entries created later at a split level are not granted: the price of a model
 * without deny rules, and what keeps a store file made after the launch out of reach.
 */
export function grantEntries(dir: string, protect: readonly string[]): string[] {
  const names = entriesOf(dir)
  const guarded = protect.filter((p) => p !== dir && within(p, dir))
  if (guarded.length === 0 && !names.some(hiddenEntry)) return [dir]
  const grants: string[] = []
  for (const name of names) {
    const path = join(dir, name)
    if (hiddenEntry(name) || protect.includes(path)) continue
    if (guarded.some((p) => within(p, path))) grants.push(...grantEntries(path, protect))
    else grants.push(path)
  }
  return grants
}

/**
 * The Node.js permission model launch of `launch` (ADR 030 "Fallback", ADR 097): run by
 * Barbican's own Node (whose permission flags are known). Undefined when the command is not
 * Node. Throws ERR_LAUNCH_REFUSED when the entry's own Node options would loosen the model, or
 * a grant names one of Barbican's own files.
 */
export function nodePermissionLaunch(
  name: string,
  launch: Launch,
  spec: SandboxSpec,
): Launch | undefined {
  const resolved = resolveCommand(launch.command, launch.cwd ?? process.cwd(), launch.env.PATH)
  const isNode =
    realOrNull(resolved) === realOrNull(process.execPath) ||
    basename(realOrNull(resolved) ?? resolved).replace(/\.exe$/i, '') === 'node'
  if (!isNode) return undefined
  const refuse = (why: string): never => {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${name}" runs confined by the Node.js permission model (this host lacks ` +
        `bubblewrap), but ${why}. Install bubblewrap, or set \`sandbox: none\` on the entry.`,
    )
  }
  const firstArg = launch.args.findIndex((a) => !a.startsWith('-'))
  const options = launch.args.slice(0, Math.max(0, firstArg))
  const loosening = [...options, ...(launch.env.NODE_OPTIONS ?? '').split(/\s+/)].find((o) =>
    LOOSENING.test(o),
  )
  if (loosening !== undefined) refuse(`its Node option ${loosening} would loosen it`)
  makeStateDir(spec.stateDir)
  // A private temp, emptied at each start as bubblewrap's tmpfs would be.
  const temp = join(spec.stateDir, '.tmp')
  rmSync(temp, { recursive: true, force: true })
  mkdirSync(temp, { mode: 0o700 })
  // An installed package runs from its copy in the state directory, where it may write.
  const cwd = launch.cwd ?? process.cwd()
  const script = firstArg < 0 ? undefined : realOrNull(resolve(cwd, launch.args[firstArg]!))
  const copy = script === undefined ? undefined : packageCopy(script, spec.stateDir)
  const args =
    copy === undefined ? launch.args : launch.args.map((a, i) => (i === firstArg ? copy.script : a))
  const view = sandboxView({ ...launch, args }, resolved, spec)
  for (const path of spec.protect) {
    if ([...view.readOnly, ...view.readWrite].includes(path)) {
      refuse(`it would be granted ${path}, a file of Barbican's own`)
    }
  }
  // The state directory and temp are the server's own: never split, whatever it keeps there.
  const own = [spec.stateDir, temp]
  const split = (path: string) => (own.includes(path) ? [path] : grantEntries(path, spec.protect))
  const system = SYSTEM_DIRS.filter((d) => existsSync(d)).map((d) => realpathSync(d))
  const links = view.links.flat()
  const writable = view.readWrite.flatMap(split)
  const read = new Set([
    ...system,
    ...EXISTENCE_PROBES,
    ...[...view.readOnly, ...links].flatMap(split),
    ...(copy ? [copy.installed] : []),
    ...writable,
    temp,
  ])
  const write = new Set([...writable, temp])
  return {
    command: process.execPath,
    args: [
      '--permission',
      ...[...read].map((p) => `--allow-fs-read=${p}`),
      ...[...write].map((p) => `--allow-fs-write=${p}`),
      ...args,
    ],
    // Barbican's uid, so Barbican's user name; HOME its state directory (ADR 110).
    env: {
      ...launch.env,
      ...identityEnvironment(launch.env, spec.stateDir, hostUserName()),
      TMPDIR: temp,
    },
    cwd: launch.cwd ?? spec.stateDir,
    mechanism: 'node-permission',
  }
}

function realOrNull(path: string): string | undefined {
  try {
    return realpathSync(path)
  } catch {
    return undefined
  }
}
