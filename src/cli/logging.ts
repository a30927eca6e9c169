/**
 * The logger of a long-running command (`serve`, `stdio`) from the `log:` section, and the
 * command's own messages on stderr in the same format, so that a supervisor reading stderr
 * never meets a plain-text line among the JSON ones.
 */

import type { Config } from '../config/config.ts'
import { createLogger, type Logger, type LogLevel, stderrFormat } from '../telemetry/log.ts'
import type { CliIo } from './command.ts'

export function loggerFor(settings: Config['log'], write?: (line: string) => void): Logger {
  const levels: Record<string, LogLevel> = {}
  for (const [part, level] of Object.entries(settings.levels)) if (level) levels[part] = level
  return createLogger({
    level: settings.level,
    levels,
    redact: settings.redact,
    ...stderrFormat(settings.format),
    ...(write ? { write } : {}),
  })
}

/**
 * `io` with its stderr text turned into JSON log lines (`barbican: warning: …` at warn, anything
 * else at error), unless `keepText` (stderr is a terminal, or `io` is a test's). Messages written
 * before the config is read (it names the format) follow the terminal: text on one, JSON
 * otherwise.
 */
export function serviceIo(io: CliIo, keepText: boolean = process.stderr.isTTY === true): CliIo {
  if (keepText) return io
  const log = createLogger({ format: 'json', write: io.stderr })
  return {
    stdout: io.stdout,
    stderr: (text) => {
      for (const line of text.split('\n')) {
        if (line.trim() === '') continue
        const message = line.replace(/^barbican: /, '')
        if (message.startsWith('warning: ')) log.warn(message.slice('warning: '.length))
        else log.error(message)
      }
    },
  }
}
