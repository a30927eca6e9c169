/**
 * Every refusal names its fix (issue 29 point 6, ADR 100). A confined server that fails on a
 * path or host outside its grants reports it in its own words: `EROFS: read-only file system,
 * open '/srv/x'`, `[Errno 13] Permission denied: '/srv/x'`, `connect ECONNREFUSED
 * 127.0.0.1:5432`, the egress proxy's `… is not in sandbox.network.allow`. This module finds the
 * path or host in that text, compares it with what the server was granted, and, when the
 * sandbox is the likely cause, says so with the exact config line that grants it. Servers that
 * reach paths chosen at call time (a shell, a file manager) cannot be granted ahead from their
 * config: for them this message is the whole experience.
 *
 * Only error results and error replies of confined upstreams are inspected, so calls that work
 * pay nothing; the grants are worked out at the first error, once.
 */
import { existsSync, statSync } from 'node:fs'
import { dirname, isAbsolute, normalize, sep } from 'node:path'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import {
  type Launch,
  resolveCommand,
  type SandboxSpec,
  SYSTEM_DIRS,
  sandboxView,
} from './sandbox.ts'

/** What a confined server may reach; paths absolute. */
export interface HintGrants {
  /** Readable (the system's read-only parts, its package, `fs.read`). */
  readonly read: readonly string[]
  /** Writable (its state directory, its folders, `fs.write`). */
  readonly write: readonly string[]
  /** `host:port` it may connect to (URL hosts of its entry, `network.allow` entries). */
  readonly connect: readonly string[]
}

/** A refusal found in a server's error text, with the line that would grant what it wanted. */
export interface RefusalHint {
  /** `capability`: what the Node.js permission model never allows (child processes, …). */
  readonly kind: 'path' | 'host' | 'capability'
  /** The path, `host:port`, or the capability (`child processes`). */
  readonly target: string
  readonly access: 'read' | 'write' | 'connect' | 'use'
  /** The config line: `sandbox: { fs: { write: ["/srv/x"] } }`; absent when no grant helps. */
  readonly fix?: string | undefined
  /** The sentence appended to the server's error for the client. */
  readonly message: string
}

/** System calls that write (Node's error messages name the call). */
const WRITES = new Set([
  'mkdir',
  'mkdtemp',
  'rmdir',
  'rm',
  'unlink',
  'rename',
  'copyfile',
  'cp',
  'symlink',
  'link',
  'chmod',
  'chown',
  'lchown',
  'utime',
  'futime',
  'truncate',
  'write',
  'open',
])

/** Node: `EROFS: read-only file system, open '/x'` (also inside longer messages). */
const NODE_FS = /\b(EROFS|EACCES|EPERM|ENOENT)\b[^'\n]*?,\s*([a-z]+)\s+'([^'\n]+)'/
/** Python: `[Errno 30] Read-only file system: '/x'`. */
const PYTHON_FS = /\[Errno (1|2|13|30)\] [^:\n]+: '([^'\n]+)'/
const PYTHON_CODES: Readonly<Record<string, string>> = {
  '1': 'EPERM',
  '2': 'ENOENT',
  '13': 'EACCES',
  '30': 'EROFS',
}
/** Node's permission model: `Access to this API has been restricted. Use --allow-fs-write …`. */
const NODE_PERMISSION = /Access to this API has been restricted[^\n]*?--allow-fs-(read|write)/
/**
 * Node's permission model refusing what no grant allows (`Use --allow-child-process …`): Barbican
 * never passes these flags (ADR 097), since a child process would run with Barbican's rights.
 */
const NODE_CAPABILITY =
  /Access to this API has been restricted[^\n]*?--allow-(child-process|worker|addons|wasi)\b/
const CAPABILITIES: Readonly<Record<string, string>> = {
  'child-process': 'child processes',
  worker: 'worker threads',
  addons: 'native addons',
  wasi: 'WASI',
}
/** An absolute path standing alone in a message, without the sentence's closing mark. */
const BARE_PATH = /(?:^|\s)(\/[^\s'"()]*[^\s'"().,;:])/
/** The egress proxy's refusal: `example.com:443 is not in sandbox.network.allow`. */
const EGRESS = /([\w.-]+|\[[\da-f:.]+\]):(\d+) is not in sandbox\.network\.allow/i
/** `connect ECONNREFUSED 127.0.0.1:5432` (Node), and the same from most runtimes. */
const REFUSED = /ECONNREFUSED\s+(\[[\da-f:.]+\]|[\w.-]+):(\d+)/
/** libpq: `connection to server at "127.0.0.1", port 5432 failed: Connection refused`. */
const LIBPQ = /server at "([^"]+)"(?: \([^)]*\))?, port (\d+) failed: Connection refused/
/** `getaddrinfo EAI_AGAIN example.com`: DNS inside the sandbox is unreachable. */
const DNS = /getaddrinfo (?:EAI_AGAIN|ENOTFOUND) ([\w.-]+)/

function within(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : `${dir}${sep}`)
}

/** The config line that grants `paths` with `access` (YAML flow, which JSON readers recognise). */
function fsLine(access: 'read' | 'write', path: string): string {
  return `sandbox: { fs: { ${access}: [${JSON.stringify(path)}] } }`
}

/** The path to grant for `path`: itself when it exists, else its nearest existing folder. */
function grantable(path: string): string | undefined {
  for (let p = path; p !== dirname(p); p = dirname(p)) {
    if (existsSync(p)) return p
  }
  return undefined
}

/** A path refusal, or undefined when the grants already cover it or the sandbox is not the cause. */
export function pathHint(
  upstream: string,
  grants: HintGrants,
  code: string,
  syscall: string | undefined,
  raw: string,
): RefusalHint | undefined {
  if (!isAbsolute(raw)) return undefined
  const path = normalize(raw)
  const writes = code === 'EROFS' || (code !== 'ENOENT' && WRITES.has(syscall ?? 'open'))
  const writable = grants.write.some((dir) => within(path, dir))
  const readable = writable || grants.read.some((dir) => within(path, dir))
  if (writes ? writable : readable) return undefined
  const intro = `Barbican: upstream "${upstream}" is sandboxed`
  if (writes && SYSTEM_DIRS.some((dir) => within(path, dir))) {
    return {
      kind: 'path',
      target: path,
      access: 'write',
      message: `${intro}; ${path} is in the system's read-only part, which no grant makes writable (only \`sandbox: none\` on its entry does).`,
    }
  }
  // ENOENT is the sandbox's doing only when the path (or its folder) exists on the host.
  const target = grantable(path)
  if (target === undefined || target === '/') return undefined
  if (code === 'ENOENT' && target !== path && !statSync(target).isDirectory()) return undefined
  // A file to be created: its folder (temporary files and renames land beside it).
  const access = writes || (code === 'ENOENT' && target !== path) ? 'write' : 'read'
  const fix = fsLine(access, target)
  const where = readable ? 'is granted read-only' : 'is outside its grants'
  return {
    kind: 'path',
    target: path,
    access,
    fix,
    message: `${intro}; ${path} ${where}. To grant it, add to its entry ("${upstream}") in the config: ${fix}`,
  }
}

/** A host refusal, or undefined when the host is granted (the refusal is then the host's own). */
export function hostHint(
  upstream: string,
  host: string,
  port: string,
  proxy: boolean,
): RefusalHint {
  const target = `${host}:${port}`
  const fix = `sandbox: { network: { allow: [${JSON.stringify(target)}] } }`
  const how = proxy ? 'the egress proxy refused it' : 'it has no network but what its entry grants'
  const tcp = proxy
    ? ''
    : " (that carries HTTP and TLS through Barbican's egress proxy; a client of another protocol, such as a database driver, reaches a host and port named in a URL among its args or env)"
  return {
    kind: 'host',
    target,
    access: 'connect',
    fix,
    message: `Barbican: upstream "${upstream}" is sandboxed and ${target} is outside its grants: ${how}. To grant it, add to its entry ("${upstream}") in the config: ${fix}${tcp}`,
  }
}

/** The refusal `text` reports, if the sandbox is its likely cause. */
export function refusalIn(
  upstream: string,
  grants: HintGrants,
  text: string,
): RefusalHint | undefined {
  if (text.includes('Barbican: upstream')) return undefined
  const node = NODE_FS.exec(text)
  if (node) return pathHint(upstream, grants, node[1]!, node[2], node[3]!)
  const python = PYTHON_FS.exec(text)
  if (python) return pathHint(upstream, grants, PYTHON_CODES[python[1]!]!, undefined, python[2]!)
  const capability = NODE_CAPABILITY.exec(text)
  if (capability) {
    const what = CAPABILITIES[capability[1]!]!
    return {
      kind: 'capability',
      target: what,
      access: 'use',
      message: `Barbican: upstream "${upstream}" is sandboxed by the Node.js permission model (this host has no usable bubblewrap), which never allows ${what}: no grant helps. It runs confined under bubblewrap, or unconfined with sandbox: none on its entry ("${upstream}").`,
    }
  }
  const permission = NODE_PERMISSION.exec(text)
  if (permission) {
    const access = permission[1] as 'read' | 'write'
    // Quoted by Node (`open '/x'`), or bare in the server's own words (`for path: /x.`).
    const named = (/'(\/[^'\n]+)'/.exec(text) ?? BARE_PATH.exec(text))?.[1]
    // A read refused on a path that does not exist yet comes before creating it (a server
    // resolves the path first): a read grant would only turn it into ENOENT, so grant the write.
    const creates = named !== undefined && !existsSync(named)
    const syscall = access === 'write' || creates ? 'open' : 'stat'
    const hint = named && pathHint(upstream, grants, 'EACCES', syscall, named)
    if (hint) return hint
    return {
      kind: 'path',
      target: '(not named by the server)',
      access,
      message: `Barbican: upstream "${upstream}" is sandboxed (Node.js permission model) and was refused a ${access} outside its grants; the server did not say which path. To grant one, add to its entry ("${upstream}") in the config: ${fsLine(access, '/the/path')}`,
    }
  }
  const egress = EGRESS.exec(text)
  if (egress) return hostHint(upstream, egress[1]!, egress[2]!, true)
  const refused = REFUSED.exec(text) ?? LIBPQ.exec(text)
  if (refused) {
    const target = `${refused[1]}:${refused[2]}`
    if (grants.connect.includes(target)) return undefined
    return hostHint(upstream, refused[1]!, refused[2]!, false)
  }
  const dns = DNS.exec(text)
  if (dns) return hostHint(upstream, dns[1]!, '443', false)
  return undefined
}

/** The text of a tool result's content (its text items) or of an error reply. */
function textOf(content: unknown): string {
  if (!Array.isArray(content)) return ''
  return content
    .map((c: unknown) =>
      typeof (c as { text?: unknown })?.text === 'string' ? (c as { text: string }).text : '',
    )
    .join('\n')
}

/** A reply as the relay returns it (protocol/model.ts), in the parts read here. */
type Reply =
  | { kind: 'result'; result: JsonObject }
  | { kind: 'error'; message: string; data?: unknown }

/**
 * The refusal hints of one confined upstream: its grants (worked out at the first error) and
 * the log its warn lines go to.
 */
export class RefusalHints {
  readonly upstream: string
  readonly #grants: () => HintGrants
  #known: HintGrants | undefined

  constructor(upstream: string, grants: () => HintGrants) {
    this.upstream = upstream
    this.#grants = grants
  }

  get grants(): HintGrants {
    this.#known ??= this.#grants()
    return this.#known
  }

  /** The refusal in `text`, if any. */
  find(text: string): RefusalHint | undefined {
    try {
      return refusalIn(this.upstream, this.grants, text)
    } catch {
      // A hint is a courtesy: a path that vanished mid-check never fails the call.
      return undefined
    }
  }

  /**
   * `reply` with the hint appended when it is an error whose text names a refusal: a text item
   * for a tool result with `isError`, a sentence for an error reply. Logged at warn with the
   * upstream, the path or host and the fix. Anything else is returned as is.
   */
  annotate<R extends Reply>(reply: R, log: Logger): R {
    let text: string
    if (reply.kind === 'error') text = `${reply.message}\n${JSON.stringify(reply.data ?? '')}`
    else if (reply.result.isError === true) text = textOf(reply.result.content)
    else return reply
    const hint = this.find(text)
    if (hint === undefined) return reply
    log.warn('sandbox refusal', {
      upstream: this.upstream,
      [hint.kind]: hint.target,
      access: hint.access,
      ...(hint.fix === undefined ? {} : { fix: hint.fix }),
    })
    if (reply.kind === 'error') return { ...reply, message: `${reply.message}. ${hint.message}` }
    const content = Array.isArray(reply.result.content) ? reply.result.content : []
    return {
      ...reply,
      result: { ...reply.result, content: [...content, { type: 'text', text: hint.message }] },
    }
  }
}

/**
 * What a confined server was granted, for hints: the system's read-only parts, its package and
 * Barbican's package cache, `fs.read` (read); its state directory, its folders and `fs.write`
 * (write); `network.allow` and the URL hosts of its entry (connect). The same view bubblewrap
 * binds (sandbox.ts `sandboxView`); without it (the command cannot be found), the spec alone.
 */
export function grantsForHints(launch: Launch, spec: SandboxSpec): HintGrants {
  const read = [...SYSTEM_DIRS, ...spec.read, ...(spec.packageCache ? [spec.packageCache] : [])]
  const write = [spec.stateDir, ...spec.write]
  try {
    const cwd = launch.cwd ?? process.cwd()
    const view = sandboxView(
      launch,
      resolveCommand(launch.command, cwd, launch.env.PATH ?? process.env.PATH),
      spec,
    )
    read.push(...view.readOnly)
    write.push(...view.readWrite)
  } catch {
    // The command is not there: the launch will say so; the spec's own grants still count.
  }
  // Hosts the entry's URLs name (grants.ts), reachable by TCP.
  const urls = spec.connect ?? []
  return {
    read,
    write,
    connect: [...(spec.network?.allow ?? []), ...urls.map((c) => `${c.host}:${c.port}`)],
  }
}
