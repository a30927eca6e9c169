/**
 * Grants inferred from the entry itself (ADR 094, docs/sandbox.md): what a confined server
 * plainly needs, read from the `command`, `args` and `env` the user already wrote, each with
 * where it came from, so that `barbican check` and the start-up log can say
 * `write /srv/data (env MEMORY_FILE_PATH)` or `connect 127.0.0.1:5432 (arg 1)`.
 *
 * - A path (absolute, `~`-relative, or relative with a `/` and existing) is granted read-write: a
 *   folder as it is, an existing file that file, a file not yet there its folder. In the
 *   system's read-only parts it is granted read-only.
 * - A path that names one of Barbican's own files (config, store, keys, lockfile, `.barbican/`)
 *   refuses the whole entry: a server must never be handed them by an argument.
 * - A home directory, `/`, `/etc` and their like are never inferred (`sandbox.fs` can still list
 *   them): said, not granted.
 * - A command inside a virtualenv or any prefix with `bin/` and `lib/` brings that prefix in,
 *   read-only, so its interpreter finds its modules.
 * - A URL-shaped value names a host and port the server may connect to (loopback included).
 *
 * Inference reads the file system (whether a path exists, is a folder) but changes nothing. It
 * is part of reading the config (normalize.ts); the grants in words, for `barbican check` and the
 * start-up log, are src/sandbox/grants.ts.
 */
import { accessSync, constants, existsSync, realpathSync, statSync } from 'node:fs'
import { basename, delimiter, dirname, isAbsolute, join, resolve, sep } from 'node:path'
import { within } from '../common/paths.ts'

/** A path a confined server may read or write. */
export interface PathGrant {
  /** Absolute, as the entry names it (symlinks not resolved: the server uses this name). */
  readonly path: string
  readonly access: 'read' | 'write'
  /** Where it came from: `arg 2`, `env MEMORY_FILE_PATH`, `command`, `sandbox.fs.write`. */
  readonly source: string
  /** Under /tmp: the host's /tmp, to be bound over the sandbox's private one. */
  readonly tmp?: boolean | undefined
}

/**
 * One host:port a confined server may reach by any TCP protocol, and where that was read
 * (carried by src/sandbox/forwarders.ts).
 */
export interface ConnectGrant {
  readonly host: string
  readonly port: number
  /** Where the grant came from, e.g. `arg 1` or `env DATABASE_URL`. */
  readonly source: string
}

/** A path the entry names that is not granted, and why. */
export interface RefusedGrant {
  readonly path: string
  readonly source: string
  readonly reason: string
  /**
   * True when the path names one of Barbican's own files: then the entry itself is refused
   * (`grantRefusal`); otherwise the server runs without that path.
   */
  readonly fatal: boolean
}

/** Everything a confined server is granted besides its own code, state and the system. */
export interface Grants {
  /** Inferred path grants, then the explicit `sandbox.fs` ones. */
  readonly paths: readonly PathGrant[]
  readonly connect: readonly ConnectGrant[]
  /** Virtualenv and other prefixes of the command, read-only. */
  readonly prefixes: readonly PathGrant[]
  readonly refused: readonly RefusedGrant[]
  /** Files in `args` that are the server's own code (its script): read-only with their package. */
  readonly code: readonly string[]
}

/** What inference reads of an entry. */
export interface GrantEntry {
  readonly command: string
  readonly args: readonly string[]
  readonly env: Readonly<Record<string, string>>
  readonly cwd?: string | undefined
}

/** What inference must know besides the entry. */
export interface GrantContext {
  /** Barbican's own files and folders (config, store, keys, lockfile, `.barbican/`). */
  readonly protect: readonly string[]
  /** The user's home, for `~` and for refusing it as a grant. */
  readonly home?: string | undefined
  /** The server's state directory: paths inside it are its own already. */
  readonly stateDir?: string | undefined
  /** `sandbox.fs`: granted as written (broad folders included), after the inferred ones. */
  readonly explicit?: { readonly read: readonly string[]; readonly write: readonly string[] }
}

/** No grants: what an unconfined or not yet inferred entry carries. */
export const NO_GRANTS: Grants = { paths: [], connect: [], prefixes: [], refused: [], code: [] }

/** The system's read-only parts: a path there is granted read-only. */
const SYSTEM_READ_ONLY = ['/usr', '/etc', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32']
/** Kernel file systems the sandbox has its own of: never a grant, never worth a word. */
const KERNEL = ['/proc', '/sys', '/dev']
/** Folders too broad to infer; `sandbox.fs` may still name them. */
const BROAD = [
  '/',
  '/root',
  '/home',
  '/Users',
  '/etc',
  '/usr',
  '/usr/local',
  '/var',
  '/var/lib',
  '/var/tmp',
  '/tmp',
  '/opt',
  '/boot',
  '/run',
  '/bin',
  '/sbin',
  '/lib',
  '/lib32',
  '/lib64',
  '/libx32',
]

/**
 * Names never inferred as grants, and left out when a granted folder is granted entry by entry (node-permission.ts): Barbican's own folder and
 * config names, other MCP clients' configs (they hold servers' tokens), and the usual homes of
 * secrets (dotenv files, keys, credential stores).
 */
const HIDDEN_ENTRY =
  /^(\.barbican|barbican\.(ya?ml|json|lock)|mcp\.json|\.mcp\.json|claude_desktop_config\.json|\.cursor|\.env(\..*)?|\.npmrc|\.netrc|\.pgpass|\.git-credentials|\.ssh|\.aws|\.gnupg|\.docker|credentials\.json|id_(rsa|dsa|ecdsa|ed25519)|.*\.(pem|key|p12|pfx))$/i

/** Whether a folder's entry of this name is never granted when the folder is split. */
export function hiddenEntry(name: string): boolean {
  return HIDDEN_ENTRY.test(name)
}

/** Default ports of the schemes a URL-shaped value may carry. */
const DEFAULT_PORTS: Readonly<Record<string, number>> = {
  http: 80,
  https: 443,
  ws: 80,
  wss: 443,
  postgres: 5432,
  postgresql: 5432,
  redis: 6379,
  rediss: 6379,
  mysql: 3306,
  mariadb: 3306,
  mongodb: 27017,
  amqp: 5672,
  amqps: 5671,
  nats: 4222,
  mssql: 1433,
  sqlserver: 1433,
  bolt: 7687,
  neo4j: 7687,
  ldap: 389,
  ldaps: 636,
  ftp: 21,
  smtp: 25,
  smtps: 465,
  clickhouse: 9000,
}

/** Commands whose first file argument is the program they run: its code, never a grant. */
const INTERPRETER =
  /^(node|nodejs|deno|bun|tsx|ts-node|python[0-9.]*|pypy[0-9.]*|ruby|perl|php|bash|sh|java)$/

function realOrSelf(path: string): string {
  try {
    return realpathSync(path)
  } catch {
    return path
  }
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}

function isFile(path: string): boolean {
  try {
    return statSync(path).isFile()
  } catch {
    return false
  }
}

/** Whether `path` is a home directory: the user's, /root, or one level under /home or /Users. */
function isHome(path: string, home: string | undefined): boolean {
  if (home !== undefined && path === resolve(home)) return true
  return path === '/root' || /^\/(home|Users)\/[^/]+$/.test(path)
}

/** Why a folder is too broad to infer, or undefined. */
function tooBroad(path: string, home: string | undefined): string | undefined {
  if (isHome(path, home)) return 'a home directory'
  if (BROAD.includes(path)) return path === '/' ? 'the whole file system' : 'a system folder'
  return undefined
}

/** The absolute path a value names, or undefined when it is not path-shaped. */
function pathOf(value: string, cwd: string, home: string | undefined): string | undefined {
  if (value === '' || value.includes('\n') || value.includes('\0') || value.includes(':')) {
    return undefined
  }
  if (value === '~' || value.startsWith('~/')) {
    return home === undefined ? undefined : resolve(home, value.slice(2))
  }
  if (isAbsolute(value)) return resolve(value)
  // A relative value is a path only when it exists: `text/plain` may be anything.
  if (value.includes('/')) {
    const path = resolve(cwd, value)
    return existsSync(path) ? path : undefined
  }
  return undefined
}

/** The value of an argument: itself, or what follows `=` in `--option=value`. */
function argValue(arg: string): string {
  const option = /^--?[A-Za-z0-9][A-Za-z0-9_.-]*=(.*)$/s.exec(arg)
  return option ? option[1]! : arg
}

/** The host and port a URL-shaped value names, or undefined. */
function connectOf(value: string): { host: string; port: number } | undefined {
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(value)?.[1]?.toLowerCase()
  if (scheme === undefined) return undefined
  const base = scheme.replace(/\+.*$/, '')
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return undefined
  }
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1')
  if (host === '') return undefined
  const port = url.port === '' ? DEFAULT_PORTS[base] : Number(url.port)
  if (port === undefined || !Number.isInteger(port) || port <= 0) return undefined
  return { host, port }
}

/** Finds a bare command on PATH (the entry's, else Barbican's), as the launch will. */
function commandPath(entry: GrantEntry, cwd: string): string | undefined {
  if (entry.command.includes('/')) return resolve(cwd, entry.command)
  const path = entry.env.PATH ?? process.env.PATH ?? ''
  for (const dir of path.split(delimiter)) {
    if (dir === '') continue
    const candidate = join(dir, entry.command)
    try {
      accessSync(candidate, constants.X_OK)
      if (isFile(candidate)) return candidate
    } catch {
      // Not here.
    }
  }
  return undefined
}

/**
 * The prefix a program sits in (`PREFIX/bin/python`): a virtualenv (it has `pyvenv.cfg`), or any
 * prefix with `bin/` and `lib/` (a Python or Node installed in its own folder).
 */
function prefixOf(program: string): string | undefined {
  const bin = dirname(program)
  if (basename(bin) !== 'bin' && basename(bin) !== 'Scripts') return undefined
  const prefix = dirname(bin)
  if (existsSync(join(prefix, 'pyvenv.cfg'))) return prefix
  return isDirectory(join(prefix, 'lib')) ? prefix : undefined
}

/**
 * A file argument that is code, not data: the script an interpreter runs, or a file inside
 * installed packages (`node_modules`, `site-packages`). It is bound read-only with its package.
 */
function isCode(file: string, script: boolean): boolean {
  if (script) return true
  const parts = realOrSelf(file).split(sep)
  return parts.includes('node_modules') || parts.includes('site-packages')
}

/** The grants an entry implies; see the module comment for the rules. */
export function inferGrants(entry: GrantEntry, context: GrantContext): Grants {
  const cwd = entry.cwd ?? process.cwd()
  const home = context.home
  const protect = context.protect.map((p) => resolve(p))
  const paths = new Map<string, PathGrant>()
  const connect = new Map<string, ConnectGrant>()
  const prefixes = new Map<string, PathGrant>()
  const refused: RefusedGrant[] = []
  const code: string[] = []
  const refuse = (path: string, source: string, reason: string, fatal = false) => {
    if (!refused.some((r) => r.path === path && r.source === source))
      refused.push({ path, source, reason, fatal })
  }
  const grant = (path: string, access: 'read' | 'write', source: string) => {
    const known = paths.get(path)
    if (known !== undefined && (known.access === 'write' || access === 'read')) return
    paths.set(path, { path, access, source, ...(within(path, '/tmp') ? { tmp: true } : {}) })
  }
  const ownFile = (path: string): string | undefined => {
    const real = realOrSelf(path)
    return protect.find((p) => within(path, p) || within(real, realOrSelf(p)))
  }
  const command = commandPath(entry, cwd)
  const interpreted = INTERPRETER.test(basename(entry.command).replace(/\.exe$/i, ''))

  /** `script`: the interpreter's first positional argument, the program it runs. */
  const consider = (value: string, source: string, script: boolean) => {
    const url = connectOf(value)
    if (url !== undefined) {
      const key = `${url.host}:${url.port}`
      if (!connect.has(key)) connect.set(key, { ...url, source })
      return
    }
    const path = pathOf(value, cwd, home)
    if (path === undefined || KERNEL.some((k) => within(path, k))) return
    // Its own state directory (inside `.barbican/`) is bound read-write already.
    if (context.stateDir !== undefined && within(path, resolve(context.stateDir))) return
    const own = ownFile(path)
    if (own !== undefined) {
      refuse(
        path,
        source,
        `it is Barbican's own ${own === path ? 'file' : `(inside ${own})`}`,
        true,
      )
      return
    }
    if (isFile(path) && isCode(path, script)) {
      code.push(path)
      return
    }
    let target = path
    if (!existsSync(path)) {
      target = dirname(path)
      if (!isDirectory(target)) {
        refuse(path, source, 'neither it nor its folder exists')
        return
      }
    }
    if (hiddenEntry(basename(path))) {
      refuse(
        path,
        source,
        "a secret's or a client config's usual name, never granted from an entry; list it in sandbox.fs.read to grant it",
      )
      return
    }
    const broad = tooBroad(target, home)
    if (broad !== undefined) {
      const what = target === path ? '' : ` (the folder of ${path}, which does not exist yet)`
      refuse(
        target,
        source,
        `${broad}${what}, too broad to grant from an entry; list it in sandbox.fs.write to grant it`,
      )
      return
    }
    const readOnly = SYSTEM_READ_ONLY.some((s) => within(realOrSelf(target), s))
    grant(target, readOnly ? 'read' : 'write', source)
  }
  let positional = false
  entry.args.forEach((arg, index) => {
    // Options are not paths; `--option=value` is its value.
    if (arg.startsWith('-') && !arg.includes('=')) return
    const script = interpreted && !positional && !arg.startsWith('-')
    if (!arg.startsWith('-')) positional = true
    consider(argValue(arg), `arg ${index + 1}`, script)
  })
  for (const [name, value] of Object.entries(entry.env)) consider(value, `env ${name}`, false)

  for (const program of new Set(command === undefined ? [] : [command, realOrSelf(command)])) {
    const prefix = prefixOf(program)
    if (prefix === undefined || SYSTEM_READ_ONLY.some((s) => within(prefix, s))) continue
    const broad = tooBroad(prefix, home)
    if (broad !== undefined) {
      refuse(prefix, 'command', `${broad}, too broad to grant; list it in sandbox.fs.read`)
      continue
    }
    if (ownFile(prefix) !== undefined) continue
    if (!prefixes.has(prefix))
      prefixes.set(prefix, { path: prefix, access: 'read', source: 'command' })
  }

  for (const path of context.explicit?.read ?? []) grant(resolve(path), 'read', 'sandbox.fs.read')
  for (const path of context.explicit?.write ?? [])
    grant(resolve(path), 'write', 'sandbox.fs.write')
  return {
    paths: [...paths.values()],
    connect: [...connect.values()],
    prefixes: [...prefixes.values()],
    refused,
    code,
  }
}
