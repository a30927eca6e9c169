/**
 * Log lines written in batches (ADR 123): a line is appended to a pending string, and the string
 * is written in one call once it holds `maxBytes`, or `maxDelayMs` after its first line, whichever
 * comes first — the way sonic-boom batches for pino. On Linux `process.stderr` writes
 * synchronously to files, pipes and terminals, so a line written at once is one `write(2)` on the
 * main thread; a call line per request made that one system call per call. Batched, fifty call
 * lines share one.
 *
 * What a crash can lose is bounded by one batch: the pending lines are written on `exit`, before
 * an uncaught error is reported (`uncaughtExceptionMonitor`, which also sees unhandled
 * rejections), and on SIGTERM and SIGINT; only a SIGKILL, a native crash or an out-of-memory
 * abort loses them, at most `maxBytes` or the last `maxDelayMs` of lines (docs/observability.md).
 */

export interface LineBatchOptions {
  /** Where a batch goes (one call per batch). */
  readonly write: (text: string) => void
  /** A batch is written once it holds this many characters. Default: 16 KiB. */
  readonly maxBytes?: number
  /** ... or this long after its first line. Default: 100 ms. */
  readonly maxDelayMs?: number
}

/** About fifty call lines: one system call where there were fifty, and a small loss bound. */
export const DEFAULT_BATCH_BYTES = 16 * 1024
/** Lines reach a terminal or a collector within a tenth of a second. */
export const DEFAULT_BATCH_DELAY_MS = 100

export class LineBatch {
  readonly #write: (text: string) => void
  readonly #maxBytes: number
  readonly #maxDelayMs: number
  #pending = ''
  #timer: ReturnType<typeof setTimeout> | undefined

  constructor(options: LineBatchOptions) {
    this.#write = options.write
    this.#maxBytes = options.maxBytes ?? DEFAULT_BATCH_BYTES
    this.#maxDelayMs = options.maxDelayMs ?? DEFAULT_BATCH_DELAY_MS
  }

  /** Characters waiting to be written. */
  get pending(): number {
    return this.#pending.length
  }

  /** Adds a line (with its newline) to the batch. */
  add(line: string): void {
    this.#pending += line
    if (this.#pending.length >= this.#maxBytes) this.flush()
    else if (this.#timer === undefined) {
      this.#timer = setTimeout(this.#onTimer, this.#maxDelayMs)
      // A pending batch never keeps the process alive: exit writes it.
      this.#timer.unref()
    }
  }

  /**
   * Writes `line` now, after whatever is pending, in the same call: warnings and errors are not
   * held back, and never overtake the lines logged before them.
   */
  now(line: string): void {
    const text = this.#pending + line
    this.#clear()
    this.#write(text)
  }

  /** Writes the pending lines, if any. */
  flush(): void {
    if (this.#pending === '') return
    const text = this.#pending
    this.#clear()
    this.#write(text)
  }

  readonly #onTimer = (): void => {
    this.#timer = undefined
    this.flush()
  }

  #clear(): void {
    this.#pending = ''
    if (this.#timer !== undefined) {
      clearTimeout(this.#timer)
      this.#timer = undefined
    }
  }
}

let stderrBatch: LineBatch | undefined

/**
 * The process's one batch onto stderr, created at first use with its flushes on exit, on an
 * uncaught error and on SIGTERM/SIGINT. Every logger writing to stderr shares it, so their lines
 * stay in order.
 */
export function stderrLines(): LineBatch {
  if (stderrBatch !== undefined) return stderrBatch
  const delay = flushDelayOf(process.env.BARBICAN_LOG_FLUSH_MS)
  const batch = new LineBatch({
    write: (text) => process.stderr.write(text),
    maxDelayMs: delay,
    // 0: every line written at once, as before batching.
    ...(delay === 0 ? { maxBytes: 0 } : {}),
  })
  stderrBatch = batch
  const flush = () => batch.flush()
  process.on('exit', flush)
  // Before Node prints the error and exits: the lines leading up to it come first.
  process.on('uncaughtExceptionMonitor', flush)
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    const onSignal = () => {
      flush()
      // Alone, this listener must not change what the signal does: the process ends as it
      // would have without it (as signal-exit does). Beside `serve`'s own handler, it only flushes.
      if (process.listenerCount(signal) === 1) {
        process.off(signal, onSignal)
        process.kill(process.pid, signal)
      }
    }
    process.on(signal, onSignal)
  }
  return batch
}

/**
 * `BARBICAN_LOG_FLUSH_MS`: the time threshold, in milliseconds (0: no batching; at most an hour).
 * Anything else leaves the default: a log setting never stops a gateway from starting.
 */
export function flushDelayOf(value: string | undefined): number {
  if (value === undefined || !/^\d{1,7}$/.test(value.trim())) return DEFAULT_BATCH_DELAY_MS
  return Math.min(Number(value.trim()), 3_600_000)
}

/**
 * Writes whatever stderr lines are pending (before writing to stderr directly, so that the two
 * keep their order). Does nothing when no logger has used stderr yet.
 */
export function flushStderrLines(): void {
  stderrBatch?.flush()
}
