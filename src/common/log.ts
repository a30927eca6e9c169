/**
 * Structured logging: one JSON object per line on stderr, so that stdout stays free for the
 * stdio transport. Loggers are cheap to derive with bound fields (`child`).
 */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error'

export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void
  info(message: string, fields?: Record<string, unknown>): void
  warn(message: string, fields?: Record<string, unknown>): void
  error(message: string, fields?: Record<string, unknown>): void
  child(fields: Record<string, unknown>): Logger
}

const RANK: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 }

export interface JsonLoggerOptions {
  level?: LogLevel
  write?: (line: string) => void
}

export function jsonLogger(
  options: JsonLoggerOptions = {},
  bound: Record<string, unknown> = {},
): Logger {
  const threshold = RANK[options.level ?? 'info']
  const write = options.write ?? ((line: string) => process.stderr.write(line))
  const emit = (level: LogLevel, message: string, fields?: Record<string, unknown>) => {
    if (RANK[level] < threshold) return
    const record = { time: new Date().toISOString(), level, msg: message, ...bound, ...fields }
    write(`${JSON.stringify(record, errorReplacer)}\n`)
  }
  return {
    debug: (m, f) => emit('debug', m, f),
    info: (m, f) => emit('info', m, f),
    warn: (m, f) => emit('warn', m, f),
    error: (m, f) => emit('error', m, f),
    child: (fields) => jsonLogger(options, { ...bound, ...fields }),
  }
}

/** A logger that drops everything (tests, benchmarks). */
export const silentLogger: Logger = {
  debug() {},
  info() {},
  warn() {},
  error() {},
  child: () => silentLogger,
}

function errorReplacer(_key: string, value: unknown): unknown {
  return value instanceof Error ? loggedError(value, 0) : value
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

/** `text` with anything that looks like a credential replaced. */
export function redact(text: string): string {
  let out = text
  for (const [pattern, replacement] of SECRETS) out = out.replace(pattern, replacement)
  return out
}

export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && value in RANK
}
