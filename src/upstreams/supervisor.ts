/**
 * Keeps one stdio upstream alive: restarts it when it exits unexpectedly, spacing restarts with
 * capped exponential backoff and jitter so a crash loop never storms the machine, and forgetting
 * past failures once a run has been stable for a while.
 *
 * Every run is a fresh `StdioOutboundTransport`. The upstream client layer learns about each one
 * through `onTransport` (called before the process starts, so handlers miss nothing) or awaits
 * `current()`; when a process dies, that transport's `onclose` fires, which is where the client
 * fails its in-flight requests.
 */
import { EventEmitter } from 'node:events'
import { BarbicanError } from '../errors.ts'
import type { Logger } from '../log.ts'
import {
  type ExitStatus,
  type StdioOutboundOptions,
  StdioOutboundTransport,
} from '../transports/stdio-outbound.ts'

export type SupervisorState = 'starting' | 'running' | 'backoff' | 'stopped'

/** Restart pacing. Delay before restart n (from 0) is `min(maxMs, baseMs·factorⁿ)`, jittered. */
export interface BackoffOptions {
  /** First delay (default 250 ms). */
  readonly baseMs?: number | undefined
  /** Growth per consecutive failure (default 2). */
  readonly factor?: number | undefined
  /** Longest delay (default 30 s). */
  readonly maxMs?: number | undefined
  /** Fraction of each delay removed at random, spreading restarts of many upstreams (0.2). */
  readonly jitter?: number | undefined
  /** A run at least this long resets the failure count (default 10 s). */
  readonly stableAfterMs?: number | undefined
}

export interface SupervisorOptions {
  readonly name: string
  readonly log: Logger
  /** How to spawn the upstream; each run gets a new transport built from it. */
  readonly process: StdioOutboundOptions
  readonly backoff?: BackoffOptions | undefined
  /** Source of randomness for jitter (tests make it deterministic). */
  readonly random?: (() => number) | undefined
}

export interface StartedEvent {
  readonly run: number
  readonly pid: number | undefined
  readonly serverPid: number | undefined
}
export interface ExitedEvent extends ExitStatus {
  readonly run: number
  /** How long the run lasted, from spawn to exit. */
  readonly ranMs: number
  /** True when `stop()` caused the exit. */
  readonly expected: boolean
  /** Why the process could not be started, when it never ran. */
  readonly error?: Error | undefined
}
export interface RestartingEvent {
  readonly delayMs: number
  /** Consecutive failures so far, 1 for the first restart after a stable run. */
  readonly attempt: number
}

/** The events a supervisor emits, for `on(...)`. */
export interface SupervisorEvents {
  state: [SupervisorState]
  started: [StartedEvent]
  exited: [ExitedEvent]
  restarting: [RestartingEvent]
}

interface Waiter {
  readonly resolve: (transport: StdioOutboundTransport) => void
  readonly reject: (error: Error) => void
  readonly timer: NodeJS.Timeout | undefined
}

/** Computes the restart delay after `failures` consecutive failures (1 = first). */
export function backoffDelay(failures: number, options: BackoffOptions = {}, random = 0): number {
  const base = options.baseMs ?? 250
  const nominal = Math.min(
    options.maxMs ?? 30_000,
    base * (options.factor ?? 2) ** Math.max(0, failures - 1),
  )
  return Math.round(nominal * (1 - (options.jitter ?? 0.2) * random))
}

/** Supervises one stdio upstream process; see the module comment. */
export class StdioSupervisor extends EventEmitter<SupervisorEvents> {
  readonly name: string
  readonly #options: SupervisorOptions
  readonly #log: Logger
  #state: SupervisorState = 'stopped'
  #started = false
  #stopping = false
  #transport: StdioOutboundTransport | undefined
  #runs = 0
  #failures = 0
  #timer: NodeJS.Timeout | undefined
  #listeners = new Set<(transport: StdioOutboundTransport) => void>()
  #waiters = new Set<Waiter>()

  constructor(options: SupervisorOptions) {
    super()
    this.name = options.name
    this.#options = options
    this.#log = options.log.child({ upstream: options.name })
  }

  /** For readiness probes: 'running' means a process is up and its pipes are open. */
  get state(): SupervisorState {
    return this.#state
  }
  /** The running transport, if any (use `current()` to wait for one). */
  get transport(): StdioOutboundTransport | undefined {
    const transport = this.#transport
    return this.#state === 'running' && transport?.isOpen ? transport : undefined
  }
  /** How many times the process has been started, restarts included. */
  get runs(): number {
    return this.#runs
  }

  /** Starts the first run; later runs follow exits by themselves until `stop()`. */
  start(): void {
    if (this.#started) return
    this.#started = true
    void this.#run()
  }

  /**
   * Registers a callback for every new transport, called before its process starts so that it
   * can set `onmessage`/`onclose`/`onerror` in time. Returns a function that unregisters it.
   */
  onTransport(callback: (transport: StdioOutboundTransport) => void): () => void {
    this.#listeners.add(callback)
    return () => this.#listeners.delete(callback)
  }

  /**
   * The running transport, waiting through start-up and backoff for at most `timeoutMs`.
   * Rejects with ERR_UPSTREAM_UNAVAILABLE on timeout and ERR_SHUTTING_DOWN once stopped.
   */
  current(timeoutMs = 30_000): Promise<StdioOutboundTransport> {
    const running = this.transport
    if (running) return Promise.resolve(running)
    if (this.#stopping || !this.#started) {
      return Promise.reject(
        new BarbicanError('ERR_SHUTTING_DOWN', `Upstream "${this.name}" is not supervised`),
      )
    }
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.#waiters.delete(waiter)
          reject(
            new BarbicanError(
              'ERR_UPSTREAM_UNAVAILABLE',
              `Upstream "${this.name}" did not start within ${timeoutMs} ms`,
            ),
          )
        }, timeoutMs),
      }
      this.#waiters.add(waiter)
    })
  }

  /** Stops supervising and shuts the process down (stdin close, SIGTERM, SIGKILL). */
  async stop(): Promise<void> {
    this.#stopping = true
    clearTimeout(this.#timer)
    this.#timer = undefined
    const error = new BarbicanError('ERR_SHUTTING_DOWN', `Upstream "${this.name}" is stopping`)
    for (const waiter of this.#waiters) {
      clearTimeout(waiter.timer)
      waiter.reject(error)
    }
    this.#waiters.clear()
    const transport = this.#transport
    if (transport) await transport.close()
    this.#setState('stopped')
  }

  async #run(): Promise<void> {
    if (this.#stopping) return
    const run = ++this.#runs
    this.#setState('starting')
    const transport = new StdioOutboundTransport(this.#options.process)
    this.#transport = transport
    for (const listener of this.#listeners) {
      try {
        listener(transport)
      } catch (err) {
        this.#log.error('transport listener failed', { error: err })
      }
    }
    const startedAt = Date.now()
    try {
      await transport.start()
    } catch (err) {
      this.#log.warn('upstream failed to start', { run, error: err })
      this.#afterExit(transport, run, startedAt, err as Error)
      return
    }
    if (this.#stopping) return
    this.#setState('running')
    this.emit('started', { run, pid: transport.pid, serverPid: transport.serverPid })
    for (const waiter of this.#waiters) {
      clearTimeout(waiter.timer)
      waiter.resolve(transport)
    }
    this.#waiters.clear()
    void transport.exited.then(() => this.#afterExit(transport, run, startedAt))
  }

  #afterExit(transport: StdioOutboundTransport, run: number, startedAt: number, error?: Error) {
    if (this.#transport === transport) this.#transport = undefined
    const ranMs = Date.now() - startedAt
    const status = transport.exitStatus ?? { code: null, signal: null }
    this.emit('exited', {
      run,
      code: status.code,
      signal: status.signal,
      ranMs,
      expected: this.#stopping,
      ...(error === undefined ? {} : { error }),
    })
    if (this.#stopping) return
    const backoff = this.#options.backoff
    // A run that lasted is not part of a crash loop: start counting again.
    if (error === undefined && ranMs >= (backoff?.stableAfterMs ?? 10_000)) this.#failures = 0
    this.#failures++
    const delayMs = backoffDelay(this.#failures, backoff, (this.#options.random ?? Math.random)())
    this.#setState('backoff')
    this.#log.warn('upstream restarting', { delayMs, attempt: this.#failures, ...status })
    this.emit('restarting', { delayMs, attempt: this.#failures })
    this.#timer = setTimeout(() => {
      this.#timer = undefined
      void this.#run()
    }, delayMs)
  }

  #setState(state: SupervisorState): void {
    if (this.#state === state) return
    this.#state = state
    this.emit('state', state)
  }
}
