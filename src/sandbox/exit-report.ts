/**
 * Why a stdio upstream went away, in words a person can act on: its exit code or the signal that
 * killed it, and the last lines it wrote on stderr (where servers say why they stop). The lines
 * are kept in a small ring, cut to a bounded length and redacted of what looks like a secret,
 * because they end up in `barbican check`, `/readyz`, the log and the errors clients receive.
 */
import { statSync } from 'node:fs'

/** Stderr lines kept per process (the last ones). */
export const STDERR_TAIL_LINES = 10
/** Stderr lines quoted in an error message (the last ones of the tail). */
export const STDERR_QUOTED_LINES = 5
/** Longest stderr line kept, in characters; the rest is cut with an ellipsis. */
export const STDERR_TAIL_LINE_CHARS = 300

const REDACTED = '[redacted]'

/**
 * What looks like a secret in a line of text: `key=value` pairs whose key names a secret,
 * `Bearer`/`Basic` credentials, passwords in URLs, and well-known token shapes (OpenAI/Anthropic
 * `sk-…`, GitHub, Slack, AWS access keys, JWTs).
 */
const SECRET_PATTERNS: readonly [RegExp, string][] = [
  [
    /\b([\w-]*(?:token|secret|passw(?:or)?d|pwd|api[_-]?key|apikey|credential|private[_-]?key)[\w-]*)(["']?\s*[:=]\s*["']?)[^\s"',;]+/gi,
    `$1$2${REDACTED}`,
  ],
  [/\b(bearer|basic)\s+[\w.~+/=-]{8,}/gi, `$1 ${REDACTED}`],
  [/(\/\/[^/\s:@]+:)[^/\s@]+@/g, `$1${REDACTED}@`],
  [/\bsk-[\w-]{16,}/g, REDACTED],
  [/\b(?:ghp|gho|ghu|ghs|ghr)_\w{20,}|\bgithub_pat_\w{20,}/g, REDACTED],
  [/\bxox[abprs]-[\w-]{10,}/g, REDACTED],
  [/\bAKIA[0-9A-Z]{16}\b/g, REDACTED],
  [/\beyJ[\w-]{8,}\.[\w-]{8,}\.[\w-]{8,}/g, REDACTED],
]

/** `line` with what looks like a secret replaced by `[redacted]`. */
export function redactSecrets(line: string): string {
  let out = line
  for (const [pattern, replacement] of SECRET_PATTERNS) out = out.replace(pattern, replacement)
  return out
}

/** The last stderr lines of one process, bounded in count and length, redacted. */
export class StderrTail {
  readonly #lines: string[] = []
  readonly #max: number

  constructor(maxLines = STDERR_TAIL_LINES) {
    this.#max = maxLines
  }

  push(line: string): void {
    // Control characters (colour codes, carriage returns) would garble a one-line report.
    // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
    const clean = line.replace(/\x1b\[[0-9;]*[A-Za-z]|[\x00-\x1f\x7f]/g, '').trim()
    if (clean === '') return
    const cut =
      clean.length > STDERR_TAIL_LINE_CHARS ? `${clean.slice(0, STDERR_TAIL_LINE_CHARS)}…` : clean
    this.#lines.push(redactSecrets(cut))
    if (this.#lines.length > this.#max) this.#lines.shift()
  }

  get lines(): readonly string[] {
    return this.#lines
  }
}

/** How a process ended, as `ExitStatus` says it: an exit code, or the signal that killed it. */
export interface ExitFacts {
  readonly code: number | null
  readonly signal: string | null
}

/** "exited with code 3", "was killed by SIGSEGV". */
export function describeExit(status: ExitFacts): string {
  if (status.signal !== null) return `was killed by ${status.signal}`
  if (status.code !== null) return `exited with code ${status.code}`
  return 'exited'
}

/**
 * Said after the exit of a server under the Node.js permission model (ADR 108): many servers
 * catch the ERR_ACCESS_DENIED of a refused worker thread or child process (a logger's worker,
 * `git`, a browser) and exit with a code and nothing on stderr, so the one cause no grant fixes
 * is named here.
 */
export const NODE_PERMISSION_EXIT_NOTE =
  'it ran under the Node.js permission model (this host has no usable bubblewrap), which ' +
  'never allows child processes, worker threads, native addons or WASI; a server that needs ' +
  'them runs confined under bubblewrap, or unconfined with `sandbox: none` on its entry'

/** The exit in words, then the last stderr lines quoted on one line, then `note` if given. */
export function exitReport(status: ExitFacts, stderr: readonly string[], note?: string): string {
  const quoted = stderr.slice(-STDERR_QUOTED_LINES)
  const said =
    quoted.length === 0 ? '; it wrote nothing on stderr' : `; stderr: ${quoted.join(' | ')}`
  return `${describeExit(status)}${said}${note === undefined ? '' : `; ${note}`}`
}

/**
 * Why `command` could not be started, from the spawn error's code: not on PATH (naming the PATH
 * searched), no such file, not executable, or a working directory that does not exist.
 */
export function spawnFailure(
  code: string | undefined,
  message: string,
  spawn: { readonly command: string; readonly path: string | undefined; readonly cwd?: string },
): string {
  const { command, path, cwd } = spawn
  const named = command.includes('/') || command.includes('\\')
  if (code === 'ENOENT' && cwd !== undefined && !isDirectory(cwd)) {
    return `the working directory ${cwd} does not exist`
  }
  if (code === 'ENOENT') {
    return named
      ? `${command} does not exist`
      : `command "${command}" is not on PATH (PATH=${path ?? ''}); install it, give its full path, or set PATH in the upstream's env`
  }
  if (code === 'EACCES') return `${command} is not executable (EACCES)`
  return message
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory()
  } catch {
    return false
  }
}
