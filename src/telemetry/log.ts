/**
 * The one logger (ADR 029): stderr only, so that stdout stays free for the stdio transport.
 * Machines get one JSON object per line; a person at a terminal gets a readable line (time,
 * level, message, key fields, colour). Levels are set per component: a logger's component is
 * its bound `part` field, so `log.child({ part: 'call' })` obeys `log.levels.call`. Secrets are
 * redacted twice over: values under credential-like keys and configured paths are replaced, and
 * every string is scrubbed of what looks like a credential. Loggers are cheap to derive with
 * bound fields (`child`). Lines reach stderr in batches (line-batch.ts, ADR 123): no system call
 * per call line.
 */
import { isoNow } from './iso-time.ts'
import { stderrLines } from './line-batch.ts'

export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

/** `json`: one JSON object per line. `pretty`: a line for people (a terminal). */
export type LogFormat = 'json' | 'pretty'

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void
  info(message: string, fields?: Record<string, unknown>): void
  warn(message: string, fields?: Record<string, unknown>): void
  error(message: string, fields?: Record<string, unknown>): void
  child(fields: Record<string, unknown>): Logger
  /**
   * Whether a line at `level` would be written, so a caller can skip building one (the call
   * line, at `warn`). Absent: it might be.
   */
  enabled?(level: LogLevel): boolean
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface JsonLoggerOptions {
  /** Least severe level written, for components without their own. Default: info. */
  level?: LogLevel
  /** Levels by component (the bound `part` field): `{ call: 'warn', upstream: 'debug' }`. */
  levels?: Readonly<Record<string, LogLevel>>
  /**
   * Field paths whose values are replaced, on top of the credential-like keys always replaced:
   * dot-separated keys, `*` for any one key (`env.*`, `headers.x-team-token`).
   */
  redact?: readonly string[]
  /** Default: json. */
  format?: LogFormat
  /** Colour in the pretty format. Default: false. */
  color?: boolean
  /**
   * Where each line goes, at once. Default: stderr in batches (line-batch.ts, ADR 123): debug
   * and info lines wait for a batch; a warning or an error writes the batch and itself at once.
   */
  write?: (line: string, level: LogLevel) => void
}

/** What every logger derived from one root shares. */
interface Root {
  readonly level: number
  readonly levels: ReadonlyMap<string, number>
  readonly paths: PathNode | undefined
  readonly format: (level: LogLevel, record: Record<string, unknown>) => string
  readonly write: (line: string, level: LogLevel) => void
}

export function jsonLogger(
  options: JsonLoggerOptions = {},
  bound: Record<string, unknown> = {},
): Logger {
  const root: Root = {
    level: RANK[options.level ?? 'info'],
    levels: new Map(Object.entries(options.levels ?? {}).map(([part, l]) => [part, RANK[l]])),
    paths: pathTree(options.redact ?? []),
    format: options.format === 'pretty' ? prettyLine(options.color === true) : jsonLine,
    write: options.write ?? toStderr,
  }
  return derived(root, bound)
}

/** The default sink: stderr, batched below `warn` (ADR 123). */
function toStderr(line: string, level: LogLevel): void {
  if (level === 'debug' || level === 'info') stderrLines().add(line)
  else stderrLines().now(line)
}

/** The same as `jsonLogger`; the name says it may write for people too. */
export const createLogger = jsonLogger

function derived(root: Root, bound: Record<string, unknown>): Logger {
  return new DerivedLogger(root, [bound], typeof bound.part === 'string' ? bound.part : 'gateway')
}

/**
 * A logger and its bound fields. A child keeps its parents' field objects as they are, in order,
 * rather than a merged copy: a request derives two children (its ids, then `part: 'call'`) and
 * writes one line, so the fields are merged once, into the line itself, as they are cleaned.
 * One object per child, its methods on the prototype (ADR 123: the call line's own cost).
 */
class DerivedLogger implements Logger {
  readonly #root: Root
  readonly #sources: readonly Record<string, unknown>[]
  readonly #part: string
  readonly #threshold: number

  constructor(root: Root, sources: readonly Record<string, unknown>[], part: string) {
    this.#root = root
    this.#sources = sources
    // Lines of no particular component belong to the gateway itself.
    this.#part = part
    this.#threshold = root.levels.get(part) ?? root.level
  }

  debug(message: string, fields?: Record<string, unknown>): void {
    if (RANK.debug >= this.#threshold) this.#emit('debug', message, fields)
  }
  info(message: string, fields?: Record<string, unknown>): void {
    if (RANK.info >= this.#threshold) this.#emit('info', message, fields)
  }
  warn(message: string, fields?: Record<string, unknown>): void {
    if (RANK.warn >= this.#threshold) this.#emit('warn', message, fields)
  }
  error(message: string, fields?: Record<string, unknown>): void {
    if (RANK.error >= this.#threshold) this.#emit('error', message, fields)
  }

  enabled(level: LogLevel): boolean {
    return RANK[level] >= this.#threshold
  }

  child(fields: Record<string, unknown>): Logger {
    const part = typeof fields.part === 'string' ? fields.part : this.#part
    return new DerivedLogger(this.#root, [...this.#sources, fields], part)
  }

  #emit(level: LogLevel, message: string, fields: Record<string, unknown> | undefined): void {
    const root = this.#root
    const paths = root.paths
    // What `clean({ time, level, msg, ...bound, ...fields })` gave, without the merged copy.
    const record: Record<string, unknown> = {}
    // The time and level are ours, and nothing in them looks like a credential (digits and
    // `-:.TZ`; a level's name): only a configured path can replace them.
    record.time = paths === undefined ? isoNow() : own('time', isoNow(), paths)
    record.level = paths === undefined ? level : own('level', level, paths)
    put(record, 'msg', message, paths)
    for (const source of this.#sources) putAll(record, source, paths)
    if (fields !== undefined) putAll(record, fields, paths)
    root.write(root.format(level, record), level)
  }
}

/** `record[key]` as `clean` makes it; a later undefined removes an earlier value, as a spread did. */
function put(
  record: Record<string, unknown>,
  key: string,
  value: unknown,
  paths: PathNode | undefined,
): void {
  if (value === undefined) {
    delete record[key]
    return
  }
  const node = paths === undefined ? undefined : (paths.next.get(key) ?? paths.next.get('*'))
  record[key] = node?.end || isSecretKey(key) ? REDACTED : clean(value, node, 1)
}

/** A value Barbican made that needs no scrubbing, unless a configured path replaces it. */
function own(key: string, value: string, paths: PathNode): string {
  return (paths.next.get(key) ?? paths.next.get('*'))?.end ? REDACTED : value
}

function putAll(
  record: Record<string, unknown>,
  source: Record<string, unknown>,
  paths: PathNode | undefined,
): void {
  for (const key in source) if (Object.hasOwn(source, key)) put(record, key, source[key], paths)
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
  enabled: () => false,
}

/**
 * A switch over loggers: while `on`, their info and warn lines are written at debug (errors
 * stay errors). An upstream failing over and over turns it on for the lines of its own retries
 * (process started and exited, transport errors, the era probe), so the log carries one line
 * per state change of the upstream and the rest only at debug (ADR 120).
 */
export class Hush {
  on = false

  /** `log`, quiet while this switch is on; its children too. */
  wrap(log: Logger): Logger {
    const quiet = (level: 'info' | 'warn') => (message: string, fields?: Record<string, unknown>) =>
      this.on ? log.debug(message, fields) : log[level](message, fields)
    return {
      debug: (message, fields) => log.debug(message, fields),
      info: quiet('info'),
      warn: quiet('warn'),
      error: (message, fields) => log.error(message, fields),
      child: (fields) => this.wrap(log.child(fields)),
    }
  }
}

// --- Redaction --------------------------------------------------------------------------------

/** Keys whose value is a credential wherever they appear (compared in lower case, no `-`/`_`). */
const SECRET_KEYS = new Set([
  'authorization',
  'proxyauthorization',
  'cookie',
  'setcookie',
  'password',
  'passwd',
  'secret',
  'clientsecret',
  'token',
  'accesstoken',
  'refreshtoken',
  'idtoken',
  'apikey',
  'xapikey',
  'privatekey',
])

const REDACTED = '[redacted]'

/** How deep a logged value is copied; deeper parts are cut (fields are small; cycles happen). */
const MAX_FIELD_DEPTH = 8

interface PathNode {
  end: boolean
  readonly next: Map<string, PathNode>
}

function pathTree(paths: readonly string[]): PathNode | undefined {
  if (paths.length === 0) return undefined
  const root: PathNode = { end: false, next: new Map() }
  for (const path of paths) {
    let node = root
    for (const key of path.split('.')) {
      let next = node.next.get(key)
      if (!next) {
        next = { end: false, next: new Map() }
        node.next.set(key, next)
      }
      node = next
    }
    node.end = true
  }
  return root
}

/**
 * A copy of `value` fit for a log line: errors as `loggedError` shows them, credential-like keys
 * and configured paths replaced, strings scrubbed by `redact`, depth bounded.
 */
function clean(value: unknown, paths: PathNode | undefined, depth: number): unknown {
  if (typeof value === 'string') return redact(value)
  if (value === null || typeof value !== 'object') return value
  if (value instanceof Error) return loggedError(value, 0)
  if (depth >= MAX_FIELD_DEPTH) return '[…]'
  if (Array.isArray(value)) return value.map((v) => clean(v, paths?.next.get('*'), depth + 1))
  const json = (value as { toJSON?: () => unknown }).toJSON
  if (typeof json === 'function') return clean(json.call(value), paths, depth + 1)
  const out: Record<string, unknown> = {}
  const record = value as Record<string, unknown>
  for (const key in record) {
    if (!Object.hasOwn(record, key)) continue
    const v = record[key]
    if (v === undefined) continue
    const node = paths === undefined ? undefined : (paths.next.get(key) ?? paths.next.get('*'))
    out[key] = node?.end || isSecretKey(key) ? REDACTED : clean(v, node, depth + 1)
  }
  return out
}

/** Keys seen before and whether they name a credential (lines reuse a small set of keys). */
const secretKeyCache = new Map<string, boolean>()
const MAX_CACHED_KEYS = 4096

function isSecretKey(key: string): boolean {
  let secret = secretKeyCache.get(key)
  if (secret === undefined) {
    secret = SECRET_KEYS.has(key.toLowerCase().replace(/[-_]/g, ''))
    if (secretKeyCache.size < MAX_CACHED_KEYS) secretKeyCache.set(key, secret)
  }
  return secret
}

/** How many causes deep a logged error is followed (chains are short; cycles are possible). */
const MAX_CAUSE_DEPTH = 5

/**
 * An error as a log line shows it: name, code, message and the chain of `cause`s, so the line of
 * a failed call says why it failed whatever layer the failure crossed. Messages are redacted:
 * an error can quote a header or a URL that carries a credential. Stacks are left out.
 */
function loggedError(err: Error, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = { name: err.name, message: redact(err.message) }
  const code = (err as { code?: unknown }).code
  if (code !== undefined) out.code = code
  const cause: unknown = err.cause
  if (cause !== undefined && depth < MAX_CAUSE_DEPTH) {
    out.cause = cause instanceof Error ? loggedError(cause, depth + 1) : redact(String(cause))
  }
  return out
}

/** What a credential looks like in free text, and what it becomes in a log line. */
const SECRETS: readonly [RegExp, string][] = [
  [/\b(Bearer|Basic)\s+[A-Za-z0-9\-._~+/]+=*/gi, '$1 [redacted]'],
  [/\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*/g, '[redacted JWT]'],
  [/\bbk_[A-Za-z0-9_-]+/g, 'bk_[redacted]'],
  [/(\/\/)[^/\s:@]+:[^/\s@]+@/g, '$1[redacted]@'],
  [
    /([?&](?:access_token|token|api_?key|key|secret|client_secret|password|code)=)[^&\s#]+/gi,
    '$1[redacted]',
  ],
]

/** A cheap test that lets most strings skip the patterns above. */
const MAYBE_SECRET = /bearer|basic|eyJ|bk_|@|=/i

/** `text` with anything that looks like a credential replaced. */
export function redact(text: string): string {
  if (!MAYBE_SECRET.test(text)) return text
  let out = text
  for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement)
  return out
}

export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && value in RANK
}

// --- Formats ----------------------------------------------------------------------------------

function jsonLine(_level: LogLevel, record: Record<string, unknown>): string {
  return `${JSON.stringify(record)}\n`
}

const COLOURS: Record<LogLevel, string> = {
  debug: '\x1b[90m',
  info: '\x1b[36m',
  warn: '\x1b[33m',
  error: '\x1b[31m',
}
const DIM = '\x1b[2m'
const RESET = '\x1b[0m'

/**
 * `12:03:04.567 INFO  upstream ready upstream=files protocolVersion=2025-11-25`: local time,
 * level, message, then the fields as key=value (strings with spaces quoted, objects as JSON).
 */
function prettyLine(color: boolean) {
  return (level: LogLevel, record: Record<string, unknown>): string => {
    const { time, level: _level, msg, ...fields } = record
    const stamp = clock(typeof time === 'string' ? new Date(time) : new Date())
    const tag = level.toUpperCase().padEnd(5)
    const pairs = Object.entries(fields)
      .map(([key, value]) => `${key}=${prettyValue(value)}`)
      .join(' ')
    const text = String(msg)
    if (!color) return `${stamp} ${tag} ${text}${pairs ? ` ${pairs}` : ''}\n`
    const body = level === 'error' || level === 'warn' ? `${COLOURS[level]}${text}${RESET}` : text
    return `${DIM}${stamp}${RESET} ${COLOURS[level]}${tag}${RESET} ${body}${pairs ? ` ${DIM}${pairs}${RESET}` : ''}\n`
  }
}

function clock(date: Date): string {
  const two = (n: number) => String(n).padStart(2, '0')
  const ms = String(date.getMilliseconds()).padStart(3, '0')
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${ms}`
}

function prettyValue(value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
  if (value !== null && typeof value === 'object' && 'message' in value && 'name' in value) {
    return JSON.stringify(errorText(value as Record<string, unknown>))
  }
  return typeof value === 'object' && value !== null ? JSON.stringify(value) : String(value)
}

/** A logged error as one phrase: `message (code) ← cause message …`. */
function errorText(error: Record<string, unknown>): string {
  const code = error.code === undefined ? '' : ` (${String(error.code)})`
  const cause = error.cause
  const rest =
    cause === undefined
      ? ''
      : ` ← ${typeof cause === 'object' && cause !== null ? errorText(cause as Record<string, unknown>) : String(cause)}`
  return `${String(error.message)}${code}${rest}`
}

/**
 * The format for stderr: `auto` means readable on a terminal and JSON lines otherwise (a pipe,
 * a file, a supervisor). Colour follows the NO_COLOR and FORCE_COLOR conventions.
 */
export function stderrFormat(
  setting: 'auto' | LogFormat = 'auto',
  isTTY: boolean = process.stderr.isTTY === true,
  env: NodeJS.ProcessEnv = process.env,
): { format: LogFormat; color: boolean } {
  const format = setting === 'auto' ? (isTTY ? 'pretty' : 'json') : setting
  const forced = env.FORCE_COLOR !== undefined && env.FORCE_COLOR !== '0'
  const color = format === 'pretty' && !env.NO_COLOR && (isTTY || forced)
  return { format, color }
}
