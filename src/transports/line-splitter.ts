/**
 * Splits a byte stream into newline-terminated lines without ever buffering more than a fixed
 * number of bytes: an over-long line is reported once and skipped up to its newline, so a
 * misbehaving child cannot make Barbican hold an unbounded line in memory. Whoever is told of
 * the overflow may inspect the line's bytes as they pass (to find which request it answered).
 */

/** Sees the bytes of one over-long line as they pass (those held so far first), then its end. */
export interface OverflowSink {
  push(part: Buffer): void
  end(): void
}

/** Splits bytes into lines of at most `maxBytes` (the newline and a trailing CR excluded). */
export class LineSplitter {
  readonly #maxBytes: number
  readonly #onLine: (line: Buffer) => void
  readonly #onOverflow: () => OverflowSink | undefined
  readonly #parts: Buffer[] = []
  #size = 0
  /** True while skipping the rest of a line that already broke the limit. */
  #discarding = false
  /** Who sees the over-long line being skipped, if anyone. */
  #sink: OverflowSink | undefined

  /** `onOverflow` is called once per over-long line, when it breaks the limit. */
  constructor(
    maxBytes: number,
    onLine: (line: Buffer) => void,
    onOverflow: () => OverflowSink | undefined,
  ) {
    this.#maxBytes = maxBytes
    this.#onLine = onLine
    this.#onOverflow = onOverflow
  }

  /** Feeds one chunk; complete lines are delivered synchronously, in order. */
  push(chunk: Buffer): void {
    let start = 0
    while (start < chunk.length) {
      const newline = chunk.indexOf(0x0a, start)
      if (newline === -1) {
        this.#append(chunk.subarray(start))
        return
      }
      this.#append(chunk.subarray(start, newline))
      this.#emit()
      start = newline + 1
    }
  }

  /** Delivers a final line that had no newline (a peer that exits mid-line). */
  end(): void {
    if (this.#discarding) this.#sink?.end()
    else if (this.#size > 0) this.#emit()
    this.#reset()
  }

  #append(part: Buffer): void {
    if (part.length === 0) return
    if (this.#discarding) {
      this.#sink?.push(part)
      return
    }
    // One byte of slack for a CR that the emit step strips.
    if (this.#size + part.length > this.#maxBytes + 1) {
      const sink = this.#onOverflow()
      for (const held of this.#parts) sink?.push(held)
      sink?.push(part)
      this.#reset()
      this.#discarding = true
      this.#sink = sink
      return
    }
    this.#parts.push(part)
    this.#size += part.length
  }

  #emit(): void {
    if (this.#discarding) {
      this.#sink?.end()
      this.#reset()
      return
    }
    const parts = this.#parts
    let line = parts.length === 1 ? parts[0]! : Buffer.concat(parts, this.#size)
    this.#reset()
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1)
    if (line.length > this.#maxBytes) {
      const sink = this.#onOverflow()
      sink?.push(line)
      sink?.end()
      return
    }
    this.#onLine(line)
  }

  #reset(): void {
    // Emptied, not replaced: its backing store serves the next line (a line per message).
    this.#parts.length = 0
    this.#size = 0
    this.#discarding = false
    this.#sink = undefined
  }
}
