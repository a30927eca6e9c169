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
  if (value instanceof Error) {
    return { name: value.name, message: value.message, code: (value as { code?: unknown }).code }
  }
  return value
}

export function isLogLevel(value: unknown): value is LogLevel {
  return typeof value === 'string' && value in RANK
}
