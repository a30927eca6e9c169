/**
 * The time limit of one code-mode program (ADR 075), with the one pause ADR 083 allows: while a
 * call of the program waits for a human's answer (a confirmation relayed to a 2026-07-28 client
 * as an `input_required` round) and the isolate has nothing to run, the clock stops. A human
 * takes minutes; the limit is about what the program itself does. Everything else counts:
 * the program's own code, always, even while a call waits for a human (so an endless loop
 * started then is still stopped), and the tool calls it waits on. How long the human may take
 * is bounded elsewhere, by the held round's own deadline (`limits.heldCallTimeoutMs`).
 */

/** What a host call uses to say it waits for a human. */
export interface ProgramClock {
  /** A call starts waiting for the human. */
  hold(): void
  /** That call has its answer (or will have none). */
  release(): void
}

export class RunClock implements ProgramClock {
  readonly #limitMs: number
  #start = Date.now()
  /** Time the clock stood still, before the current stop. */
  #stoppedFor = 0
  #stoppedAt: number | undefined
  #waitsForHuman = 0
  /** True while the isolate waits on host calls (nothing of the program runs). */
  #idle = false
  #onRelease: (() => void) | undefined

  /** `idle`: the owner never runs the program itself (it only watches), so it is always idle. */
  constructor(limitMs: number, options: { idle?: boolean } = {}) {
    this.#limitMs = limitMs
    this.#idle = options.idle ?? false
  }

  /** Starts the limit now (the program is about to run; loading the isolate did not count). */
  begin(): void {
    this.#start = Date.now()
  }

  hold(): void {
    this.#waitsForHuman++
    this.#update()
  }

  release(): void {
    if (this.#waitsForHuman === 0) return
    this.#waitsForHuman--
    this.#update()
    if (this.#waitsForHuman === 0) this.#onRelease?.()
  }

  /** Runs `fn` when the last waiting call has its answer (the clock may run again). */
  onRelease(fn: (() => void) | undefined): void {
    this.#onRelease = fn
  }

  /** The isolate waits on host calls (true) or runs the program (false). */
  set idle(idle: boolean) {
    this.#idle = idle
    this.#update()
  }

  /** Whether the clock stands still now. */
  get stopped(): boolean {
    return this.#stoppedAt !== undefined
  }

  /** Milliseconds of the limit left; zero or less once it is spent. */
  left(): number {
    const now = this.#stoppedAt ?? Date.now()
    return this.#limitMs - (now - this.#start - this.#stoppedFor)
  }

  #update(): void {
    const stop = this.#idle && this.#waitsForHuman > 0
    if (stop && this.#stoppedAt === undefined) this.#stoppedAt = Date.now()
    else if (!stop && this.#stoppedAt !== undefined) {
      this.#stoppedFor += Date.now() - this.#stoppedAt
      this.#stoppedAt = undefined
    }
  }
}
