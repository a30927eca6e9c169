/**
 * The confinement of a stdio upstream (docs/sandbox.md, ADR 030): the command line that runs a
 * server inside bubblewrap with its own mount, PID, network, IPC and UTS namespaces, resource
 * limits set by `prlimit`, and, when Barbican runs as root, an unprivileged uid set by `setpriv`
 * (Linux does not apply the process-count limit to uid 0).
 *
 * What the server sees of the file system: the system's read-only parts, its own command and
 * package (read-only), a private /tmp, its state directory (read-write, also its HOME), and the
 * paths its entry grants. Barbican's own files (config, store, lockfile, keys) are masked even
 * when a granted path contains them. `--die-with-parent` and the PID namespace make the kernel
 * kill the whole tree when Barbican or the sandbox ends, so no watchdog process is needed.
 */
import { chownSync, existsSync, mkdirSync, readlinkSync, statSync } from 'node:fs'
import { basename, dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { BarbicanError } from '../common/errors.ts'
import { within } from '../common/paths.ts'
import { type Grants, inferGrants } from '../config/sandbox-grants.ts'
import {
  runsAsRoot,
  type SandboxLimits,
  type SandboxNetwork,
  type SandboxSpec,
  sandboxUid,
} from '../config/sandbox-spec.ts'
import { findExecutable } from './executables.ts'
import { fileViewArgs, layersOf, realOrNull, type SandboxView, SYSTEM_DIRS } from './file-view.ts'
import {
  EGRESS_PORT,
  EGRESS_SOCKET_INSIDE,
  forwarderPrefix,
  hostsPath,
  planConnects,
  proxyEnvironment,
  RUN_INSIDE,
  writeSandboxHosts,
} from './forwarders.ts'
import { grantRefusal } from './grants.ts'
import { hostUserName, identityEnvironment, identityFiles, sandboxUserName } from './identity.ts'
import { idmapPrefix, rootOwned, stageGrants } from './idmap.ts'
import { seccompArch, seccompProgram } from './seccomp.ts'

export type { SandboxLimits, SandboxNetwork, SandboxSpec }

/** Whether a sandbox gets an egress proxy. */
export function wantsEgress(spec: SandboxSpec): boolean {
  return (spec.network?.allow.length ?? 0) > 0
}

export { DEFAULT_SANDBOX_LIMITS } from '../config/sandbox-spec.ts'
export { EGRESS_PORT, EGRESS_SOCKET_INSIDE, proxyEnvironment }

/** A sandbox refusal (launch that cannot be confined, egress refused), audited and counted. */
export interface SandboxRefusal {
  readonly upstream: string
  readonly kind: 'launch' | 'egress'
  /** What was refused: the destination `host:port` of an egress attempt. */
  readonly target?: string | undefined
  readonly reason: string
}

/** Told of every sandbox refusal (src/sandbox/refusals.ts records and counts them). */
export type SandboxRefusalSink = (refusal: SandboxRefusal) => void

/** The programs confinement needs, found on the host. */
export interface SandboxFacility {
  readonly bwrap: string
  readonly prlimit: string
  readonly setpriv: string
}

export { findExecutable }

/**
 * The host lacks a mechanism: `missing` names what. `invalid`: the lack is a bad
 * `BARBICAN_SANDBOX_MECHANISM` value, which no fallback may paper over (src/sandbox/confine.ts
 * refuses every confined upstream then, Node ones and `sandbox.fallback: unconfined` included).
 */
export interface MissingFacility {
  readonly missing: string
  readonly invalid?: true | undefined
}

let facility: SandboxFacility | MissingFacility | undefined

/**
 * `BARBICAN_SANDBOX_MECHANISM`: `auto` (default: bubblewrap when the host has it) or
 * `node-permission` (skip bubblewrap, as on a host without it: for Linux hosts where bwrap is
 * installed but user namespaces are off, and to test the fallback). Anything else is an error
 * at start-up (`mechanismSettingError`, ADR 109) and refuses every confined launch: a typo must
 * never run a server with less than the operator asked for.
 */
export const MECHANISM_ENV = 'BARBICAN_SANDBOX_MECHANISM'
/** The values `BARBICAN_SANDBOX_MECHANISM` may take (unset and empty mean `auto`). */
export const MECHANISM_VALUES = ['auto', 'node-permission'] as const

/**
 * ERR_CONFIG_INVALID naming the bad value and the good ones when `BARBICAN_SANDBOX_MECHANISM`
 * is set to something Barbican does not know; undefined otherwise. `serve`, `stdio` and `check`
 * stop on it before anything starts.
 */
export function mechanismSettingError(
  env: Readonly<Record<string, string | undefined>> = process.env,
): BarbicanError | undefined {
  const value = env[MECHANISM_ENV]
  if (
    value === undefined ||
    value === '' ||
    (MECHANISM_VALUES as readonly string[]).includes(value)
  )
    return undefined
  return new BarbicanError(
    'ERR_CONFIG_INVALID',
    `${MECHANISM_ENV}=${JSON.stringify(value)} is not a sandbox mechanism; expected ` +
      `${MECHANISM_VALUES.join(' or ')} (or unset). Barbican does not start a confined server ` +
      'under a mechanism it cannot name: fix or unset the variable.',
  )
}

/** The host's confinement programs, looked up once; `missing` names the first one absent. */
export function sandboxFacility(): SandboxFacility | MissingFacility {
  const forced = process.env[MECHANISM_ENV]
  if (forced === 'node-permission') {
    return { missing: `bubblewrap (not used: ${MECHANISM_ENV}=node-permission)` }
  }
  const bad = mechanismSettingError()
  if (bad !== undefined) return { missing: bad.message, invalid: true }
  if (facility !== undefined) return facility
  if (process.platform !== 'linux') {
    facility = { missing: `bubblewrap (Linux only; this host is ${process.platform})` }
    return facility
  }
  const bwrap = findExecutable('bwrap')
  const prlimit = findExecutable('prlimit')
  const setpriv = findExecutable('setpriv')
  if (!bwrap)
    facility = { missing: 'bubblewrap (the `bwrap` program; Debian: apt-get install bubblewrap)' }
  else if (!prlimit) facility = { missing: '`prlimit` (util-linux)' }
  else if (!setpriv) facility = { missing: '`setpriv` (util-linux)' }
  else facility = { bwrap, prlimit, setpriv }
  return facility
}

/** The one-line description of a confinement, for the startup log and `barbican check`. */
export const MECHANISM =
  'bubblewrap (mount, pid, net, ipc, uts namespaces) + prlimit' +
  (seccompArch() === undefined ? '' : ' + seccomp')
/** What the mechanism leaves open, said wherever the mechanism is named. */
export const NOT_COVERED =
  'memory limit is per process (RLIMIT_DATA), not per tree' +
  (seccompArch() === undefined ? `; no seccomp filter on ${process.arch}` : '')

/**
 * A bubblewrap confinement in one line for the startup log and `barbican check`: the mechanism,
 * the uid, the network and what it leaves open (src/sandbox/confine.ts says the other cases).
 */
export function describeBubblewrap(name: string, sandbox: SandboxSpec): string {
  const uid = runsAsRoot() ? `, uid ${sandboxUid(name)} (root-owned write grants idmapped)` : ''
  const { forwards, unreachable } = planConnects(sandbox.connect)
  const connect = [
    ...forwards.map((f) => `${f.grant.host}:${f.grant.port}`),
    ...unreachable.map((u) => `${u.grant.host}:${u.grant.port} (not forwarded: an address)`),
  ]
  const proxy = wantsEgress(sandbox)
    ? `the egress proxy to ${sandbox.network!.allow.join(' ')}`
    : undefined
  const tcp = connect.length > 0 ? `TCP forwards to ${connect.join(' ')}` : undefined
  const network =
    proxy === undefined && tcp === undefined
      ? ', no network'
      : `, network only through ${[proxy, tcp].filter((x) => x !== undefined).join(' and ')}`
  return `${MECHANISM}${uid}${network}, state ${sandbox.stateDir}; not covered: ${NOT_COVERED}`
}

export { runsAsRoot, sandboxUid }

/** A command line to spawn. */
export interface Launch {
  readonly command: string
  readonly args: readonly string[]
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string | undefined
  /**
   * How it is confined, when it is: bubblewrap kills its tree itself, node-permission not;
   * `unconfined`: no mechanism of this host could, and `sandbox.fallback: unconfined` accepted it.
   */
  readonly mechanism?: 'bubblewrap' | 'node-permission' | 'unconfined' | undefined
  /** Runs under the shell watchdog of stdio-outbound.ts, which reads its control pipe on fd 3. */
  readonly watchdog?: boolean | undefined
  /** A seccomp program bwrap reads on fd 3 (`--seccomp 3`), written there at spawn. */
  readonly seccomp?: Buffer | undefined
}

/**
 * Where `command` lives: a path as given (against `cwd`) or the first match on PATH, with its
 * symlinks kept: a virtualenv's `bin/python` finds its environment only by the name it was
 * started as (ADR 094).
 */
export function resolveCommand(command: string, cwd: string, path: string | undefined): string {
  const found = command.includes('/') ? resolve(cwd, command) : findExecutable(command, path)
  if (found === undefined || !existsSync(found)) {
    throw new BarbicanError('ERR_UPSTREAM_UNAVAILABLE', `command "${command}" not found`)
  }
  return found
}

/**
 * The read-only folder that holds a program or script and what it imports: the outermost
 * `node_modules` on its path (where a package's dependencies are hoisted), else the nearest
 * folder with a package.json, else the file's own folder.
 */
export function packageRootOf(file: string): string {
  const parts = file.split(sep)
  const modules = parts.indexOf('node_modules')
  if (modules > 0) return parts.slice(0, modules + 1).join(sep)
  let dir = dirname(file)
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir
    const parent = dirname(dir)
    if (parent === dir) return dirname(file)
    dir = parent
  }
}

export { SYSTEM_DIRS }

/**
 * The symlinks on the way to `path` (`/work/wt/node_modules` → `/work/main/node_modules`), so
 * the path the server was given still leads to what is bound at its real location.
 */
export function symlinksOn(path: string): Array<readonly [link: string, target: string]> {
  const links: Array<readonly [string, string]> = []
  const parts = resolve(path)
    .split(sep)
    .filter((p) => p !== '')
  let current = ''
  for (const part of parts) {
    const next = `${current}${sep}${part}`
    let target: string | undefined
    try {
      target = readlinkSync(next)
    } catch {
      target = undefined
    }
    if (target !== undefined) {
      links.push([next, resolve(dirname(next), target)])
      const real = realOrNull(next)
      if (real === undefined) return links
      current = real
    } else current = next
  }
  return links
}

export type { SandboxView }

/**
 * Decides what the server sees: its command and code (files in its `args` that are not data it
 * was granted) read-only with their package, and the grants of its entry (grants.ts, ADR 094):
 * prefixes read-only, paths as granted, `sandbox.fs` as written.
 */
export function sandboxView(launch: Launch, resolved: string, spec: SandboxSpec): SandboxView {
  const cwd = launch.cwd ?? process.cwd()
  const grants = spec.grants ?? grantsOfLaunch(launch, spec)
  const readOnly = new Set<string>()
  const readWrite = new Set<string>([spec.stateDir])
  const links = new Map<string, string>()
  const follow = (path: string) => {
    for (const [link, target] of symlinksOn(path)) links.set(link, target)
  }
  const addPackage = (file: string) => {
    const root = packageRootOf(file)
    readOnly.add(root)
    // A node_modules that is a symlink (a worktree sharing an install) must exist inside too.
    const modules = realOrNull(join(root, 'node_modules'))
    if (modules !== undefined && modules !== join(root, 'node_modules')) readOnly.add(modules)
  }
  // Launched by the name it was given (a venv's bin/python link), bound at its real place.
  addPackage(realOrNull(resolved) ?? resolved)
  follow(resolved)
  if (launch.cwd !== undefined) {
    readOnly.add(realOrNull(launch.cwd) ?? launch.cwd)
    follow(launch.cwd)
  }
  const granted = new Set(grants.paths.map((g) => realOrNull(g.path) ?? g.path))
  for (const arg of launch.args) {
    if (arg.startsWith('-') || arg.includes('\n')) continue
    const candidate = isAbsolute(arg) ? arg : arg.includes('/') ? resolve(cwd, arg) : undefined
    if (candidate === undefined) continue
    const real = realOrNull(candidate)
    // Folders and data files come from the grants; what is left is code.
    if (real === undefined || granted.has(real) || statSync(real).isDirectory()) continue
    follow(candidate)
    addPackage(real)
  }
  for (const grant of [...grants.prefixes, ...grants.paths]) {
    const real = realOrNull(grant.path)
    if (real === undefined) continue
    follow(grant.path)
    if (grant.access === 'write') readWrite.add(real)
    else readOnly.add(real)
  }
  for (const path of [...spec.read, ...spec.write]) follow(path)
  // A grant that does not exist is left out (the server gets ENOENT, as it would outside), never
  // made inside: under /tmp that would be a folder of the private /tmp, its writes lost.
  for (const path of spec.read) {
    const real = realOrNull(path)
    if (real !== undefined) readOnly.add(real)
  }
  for (const path of spec.write) {
    const real = realOrNull(path)
    if (real !== undefined) readWrite.add(real)
  }
  for (const path of readWrite) readOnly.delete(path)
  const bound = [...SYSTEM_DIRS, ...readOnly, ...readWrite]
  const masked = spec.protect.filter(
    (path) => existsSync(path) && bound.some((dir) => within(path, dir)),
  )
  return {
    readOnly: [...readOnly].filter((p) => !SYSTEM_DIRS.some((s) => within(p, s))),
    readWrite: [...readWrite],
    masked,
    // A link inside a bound folder is there already (and that folder may be read-only).
    links: [...links].filter(([link]) => !bound.some((dir) => within(link, dir))),
  }
}

/** The grants of a launch whose spec carries none (a spec built in code, not from a config). */
export function grantsOfLaunch(launch: Launch, spec: SandboxSpec): Grants {
  return inferGrants(launch, {
    protect: spec.protect,
    stateDir: spec.stateDir,
    explicit: { read: spec.read, write: spec.write },
  })
}

/** ERR_LAUNCH_REFUSED when the entry names one of Barbican's own files (ADR 094). */
export function refuseOwnFiles(name: string, launch: Launch, spec: SandboxSpec): void {
  const why = grantRefusal(name, spec.grants ?? grantsOfLaunch(launch, spec))
  if (why !== undefined) throw new BarbicanError('ERR_LAUNCH_REFUSED', why)
}

/**
 * The bwrap command line that runs `launch` confined by `spec`. Creates the state directory
 * (owned by the sandbox uid when Barbican is root) and brings the package's writable layer in
 * step (ADR 095). `runDir`: the private host folder of the sandbox's sockets (the egress proxy's
 * `proxy.sock`, a `connect-N.sock` per connect grant, the sandbox's `hosts`), which the caller
 * serves (src/sandbox/host-side.ts). Throws ERR_LAUNCH_REFUSED when the host lacks a facility;
 * never falls back to running unconfined (`launchConfined` in confine.ts chooses what runs
 * without bubblewrap).
 */
export function confinedLaunch(
  name: string,
  launch: Launch,
  spec: SandboxSpec,
  found: SandboxFacility | MissingFacility = sandboxFacility(),
  runDir?: string,
): Launch {
  // Without bubblewrap, src/sandbox/confine.ts chooses the fallback; this is bubblewrap only.
  if ('missing' in found) {
    throw new BarbicanError(
      'ERR_LAUNCH_REFUSED',
      `upstream "${name}": this host lacks ${found.missing}`,
    )
  }
  const egress = wantsEgress(spec)
  const { forwards } = planConnects(spec.connect)
  const network = egress || forwards.length > 0
  if (network && runDir === undefined) {
    throw new BarbicanError('ERR_INTERNAL', `upstream "${name}": no sandbox sockets were started`)
  }
  const forwarder = network ? forwarderPrefix(name, egress, forwards) : undefined
  const arch = seccompArch()
  const seccomp = arch === undefined ? undefined : seccompProgram(arch)
  const cwd = launch.cwd ?? spec.stateDir
  const resolved = resolveCommand(launch.command, launch.cwd ?? process.cwd(), launch.env.PATH)
  const root = runsAsRoot()
  const uid = sandboxUid(name)
  makeStateDir(spec.stateDir)
  if (root) chownSync(spec.stateDir, uid, uid)
  const view = sandboxView(launch, resolved, spec)
  // As root, root-owned write grants are idmapped for the sandbox uid (ADR 096), each onto a
  // staging place of its own beside the state directory (root's, never bound inside).
  const staged = root ? stageGrants(`${spec.stateDir}.idmap`, rootOwned(view.readWrite)) : undefined
  const idmap = staged === undefined ? undefined : idmapPrefix(uid, staged)
  // Without the program (no Perl, another architecture), the grants are bound as they are.
  const stages = idmap === undefined ? new Map<string, string>() : staged!
  const args: string[] = [
    '--die-with-parent',
    '--unshare-pid',
    '--unshare-net',
    '--unshare-ipc',
    '--unshare-uts',
    '--unshare-cgroup-try',
    // The seccomp filter (seccomp.ts, ADR 044), written on fd 3 when the process is spawned.
    ...(seccomp ? ['--seccomp', '3'] : []),
    // Without root, namespaces need a user namespace; as root the uid switch below does better.
    ...(root ? [] : ['--unshare-user']),
    '--clearenv',
  ]
  for (const [key, value] of Object.entries(launch.env)) args.push('--setenv', key, value)
  // HOME is its state directory; USER and LOGNAME the name of its uid (identity.ts, ADR 110).
  const user = root ? sandboxUserName(name) : hostUserName()
  for (const [key, value] of Object.entries(identityEnvironment(launch.env, spec.stateDir, user)))
    args.push('--setenv', key, value)
  args.push('--setenv', 'TMPDIR', '/tmp')
  if (egress) {
    for (const [key, value] of proxyEnvironment(forwards)) args.push('--setenv', key, value)
  }
  args.push(
    ...fileViewArgs(
      view,
      layersOf(launch, resolved, spec.stateDir, root ? uid : undefined),
      stages,
    ),
  )
  // As root, its uid has no passwd entry on the host: the sandbox's own /etc/passwd gives one.
  if (root) args.push(...identityFiles(spec.stateDir, uid, user, name))
  if (network) {
    args.push('--perms', '0755', '--dir', dirname(RUN_INSIDE))
    args.push('--perms', '0755', '--dir', RUN_INSIDE)
    if (egress) args.push('--bind', join(runDir!, 'proxy.sock'), EGRESS_SOCKET_INSIDE)
    for (const f of forwards)
      args.push('--bind', join(runDir!, f.socket), `${RUN_INSIDE}/${f.socket}`)
    if (forwards.some((f) => f.name !== undefined)) {
      args.push('--ro-bind', writeSandboxHosts(runDir!, forwards), hostsPath())
    }
  }
  args.push('--chdir', cwd, '--')
  const l = spec.limits
  args.push(
    found.prlimit,
    `--nproc=${l.processes}`,
    `--data=${l.memoryBytes}`,
    // SIGXCPU at the limit says why; SIGKILL a second later if the process ignores it.
    `--cpu=${l.cpuSeconds}:${l.cpuSeconds + 1}`,
    `--fsize=${l.fileBytes}`,
    '--',
  )
  if (root) {
    args.push(
      found.setpriv,
      `--reuid=${uid}`,
      `--regid=${uid}`,
      '--clear-groups',
      '--no-new-privs',
      '--inh-caps=-all',
      '--bounding-set=-all',
      '--',
    )
  }
  if (forwarder) args.push(...forwarder)
  args.push(resolved, ...launch.args)
  if (idmap !== undefined) {
    const [perl, ...rest] = idmap
    return {
      command: perl!,
      args: [...rest, found.bwrap, ...args],
      env: {},
      mechanism: 'bubblewrap',
      seccomp,
    }
  }
  return { command: found.bwrap, args, env: {}, mechanism: 'bubblewrap', seccomp }
}

/**
 * Creates a state directory (0700) and any missing parent (0755: as root, the server's own uid
 * must cross `.barbican/state` when a bound folder, such as its working directory, holds it).
 */
export function makeStateDir(stateDir: string): void {
  mkdirSync(dirname(stateDir), { recursive: true, mode: 0o755 })
  mkdirSync(stateDir, { recursive: true, mode: 0o700 })
}

/**
 * Whether `command` runs a Node program: Node itself (by name, or Barbican's own binary), or
 * `npx`, whose plain form a confined launch rewrites to an installed bin run with Barbican's
 * Node (src/trust/installed-launch.ts) and whose other forms are refused below (npx itself
 * spawns npm, a child process).
 */
export function runsOnNode(command: string): boolean {
  const name = basename(command).replace(/\.(exe|cmd)$/i, '')
  return name === 'node' || name === 'npx' || realOrNull(command) === realOrNull(process.execPath)
}
