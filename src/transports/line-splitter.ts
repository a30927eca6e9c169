/**
 * Splits a byte stream into newline-terminated lines without ever buffering more than a fixed
 * number of bytes: an over-long line is reported once and skipped up to its newline, so a
 * misbehaving child cannot make Barbican hold an unbounded line in memory.
 */

/** Splits bytes into lines of at most `maxBytes` (the newline and a trailing CR excluded). */
export class LineSplitter {
  readonly #maxBytes: number
  readonly #onLine: (line: Buffer) => void
  readonly #onOverflow: () => void
  #parts: Buffer[] = []
  #size = 0
  /** True while skipping the rest of a line that already broke the limit. */
  #discarding = false

  constructor(maxBytes: number, onLine: (line: Buffer) => void, onOverflow: () => void) {
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
    if (this.#size > 0 && !this.#discarding) this.#emit()
    this.#reset()
  }

  #append(part: Buffer): void {
    if (this.#discarding || part.length === 0) return
    // One byte of slack for a CR that the emit step strips.
    if (this.#size + part.length > this.#maxBytes + 1) {
      this.#reset()
      this.#discarding = true
      this.#onOverflow()
      return
    }
    this.#parts.push(part)
    this.#size += part.length
  }

  #emit(): void {
    if (this.#discarding) {
      this.#discarding = false
      return
    }
    const parts = this.#parts
    let line = parts.length === 1 ? parts[0]! : Buffer.concat(parts, this.#size)
    this.#reset()
    if (line.length > 0 && line[line.length - 1] === 0x0d) line = line.subarray(0, -1)
    if (line.length > this.#maxBytes) {
      this.#onOverflow()
      return
    }
    this.#onLine(line)
  }

  #reset(): void {
    this.#parts = []
    this.#size = 0
    this.#discarding = false
  }
}
