/**
 * Runs one untrusted JavaScript program in a QuickJS-Wasm isolate (code mode, ADR 075). The
 * program gets nothing of the host but the async functions it is given, grouped in namespaces,
 * and a `console` whose lines are collected. Each run has its own QuickJS instance (its own heap)
 * under a memory limit, a stack limit, a deadline enforced both inside the interpreter (the
 * interrupt handler) and around it (while it waits on host calls), and a cap on host calls and on
 * collected output. Values cross the boundary only as JSON text, so no host object ever reaches
 * the isolate.
 */
import { BarbicanError } from '../common/errors.ts'
import { newQuickJS, type QuickJSModule } from '../common/lazy-deps.ts'
import { type ProgramClock, RunClock } from './code-clock.ts'

/** How much one program may use; every field is configurable per virtual server. */
export interface IsolateLimits {
  /** Heap of the program's QuickJS runtime. */
  readonly memoryBytes: number
  /** Stack of the program's QuickJS runtime (deep recursion fails before it). */
  readonly stackBytes: number
  /**
   * Wall-clock time for the whole run, host calls included; the clock stops only while the
   * isolate waits with a call waiting for a human (code-clock.ts).
   */
  readonly timeoutMs: number
  /** Host function calls the program may make. */
  readonly maxCalls: number
  /** Console output and return value kept, in bytes of UTF-8 (more is cut and said so). */
  readonly maxOutputBytes: number
}

/**
 * A host function: receives the program's argument (parsed JSON), returns JSON-able data. It
 * holds `clock` while it waits for a human's answer.
 */
export type HostFunction = (
  args: unknown,
  signal: AbortSignal,
  clock: ProgramClock,
) => Promise<unknown>

/** Namespace → function name → host function: all the program can reach of the host. */
export type HostFunctions = ReadonlyMap<string, ReadonlyMap<string, HostFunction>>

/** What a run produced. `error` is set when the program threw or a limit stopped it. */
export interface IsolateOutcome {
  /** Console lines, in order (`warn`/`error` lines prefixed with their level). */
  readonly logs: readonly string[]
  /** The program's return value as JSON text; undefined when it returned nothing or failed. */
  readonly value: string | undefined
  readonly error: BarbicanError | undefined
  /** Host calls the program made. */
  readonly calls: number
  /** Whether output was cut at `maxOutputBytes`. */
  readonly truncated: boolean
}

/** One unused instance per memory size, made ahead while the previous program runs. */
const spares = new Map<number, Promise<QuickJSModule>>()

/**
 * A QuickJS instance no program has used: the spare made ahead when there is one (instantiating
 * takes tens of milliseconds), and a new spare started for the next run.
 */
function freshInstance(maxBytes: number): Promise<QuickJSModule> {
  const spare = spares.get(maxBytes)
  const next = newQuickJS(maxBytes)
  next.catch(() => spares.delete(maxBytes))
  spares.set(maxBytes, next)
  return spare ?? newQuickJS(maxBytes)
}

/** Makes the spare instance for `maxBytes` ahead of the first run (a worker just started). */
export function prepareInstance(maxBytes: number): void {
  if (spares.has(maxBytes)) return
  const spare = newQuickJS(maxBytes)
  spare.catch(() => spares.delete(maxBytes))
  spares.set(maxBytes, spare)
}

/**
 * The prelude, evaluated before the program: it takes the bridge functions off the global object
 * into a closure, builds the namespaces and `console`, and freezes what it built, so the program
 * can neither reach the raw bridge nor swap a namespace function for another.
 */
function prelude(namespaces: Record<string, readonly string[]>): string {
  return `(() => {
  const call = globalThis.__barbicanCall, log = globalThis.__barbicanLog
  delete globalThis.__barbicanCall
  delete globalThis.__barbicanLog
  const text = (v) => typeof v === 'string' ? v : (() => { try { const j = JSON.stringify(v); return j === undefined ? String(v) : j } catch { return String(v) } })()
  const line = (level) => (...args) => log(level, args.map(text).join(' '))
  const define = (name, value) => Object.defineProperty(globalThis, name, { value: Object.freeze(value), writable: false, configurable: false, enumerable: true })
  define('console', { log: line('log'), info: line('info'), warn: line('warn'), error: line('error'), debug: line('debug') })
  const spaces = ${JSON.stringify(namespaces)}
  for (const space of Object.keys(spaces)) {
    const fns = {}
    for (const fn of spaces[space]) {
      fns[fn] = (args) => call(space, fn, JSON.stringify(args === undefined ? {} : args)).then((json) => json === undefined ? undefined : JSON.parse(json))
    }
    define(space, fns)
  }
})()`
}

/** Wraps the program so top-level `await` and `return` work and its result is one promise. */
function wrapped(code: string): string {
  return `(async () => {\n${code}\n})()`
}

/** A byte budget shared by console lines and the return value. */
class Output {
  readonly logs: string[] = []
  truncated = false
  #left: number
  constructor(max: number) {
    this.#left = max
  }
  /** Keeps `text` whole, cut to the budget, or not at all once the budget is spent. */
  take(text: string): string | undefined {
    if (this.#left <= 0) {
      this.truncated = true
      return undefined
    }
    const bytes = Buffer.byteLength(text)
    if (bytes <= this.#left) {
      this.#left -= bytes
      return text
    }
    const cut = Buffer.from(text).subarray(0, this.#left).toString('utf8')
    this.#left = 0
    this.truncated = true
    return cut
  }
}

/**
 * Runs `code` with `functions` under `limits`. Never throws for what the program does: its
 * failures and every limit come back as `outcome.error` (ERR_CODE_FAILED, ERR_CODE_LIMIT);
 * ERR_CODE_UNAVAILABLE only when QuickJS itself cannot be loaded. `clock` is the run's time
 * limit when its holds come from elsewhere (the worker thread's gateway side).
 */
export async function runIsolated(
  code: string,
  functions: HostFunctions,
  limits: IsolateLimits,
  signal: AbortSignal,
  clock: RunClock = new RunClock(limits.timeoutMs),
): Promise<IsolateOutcome> {
  let module: QuickJSModule
  try {
    // A fresh instance per run: its linear memory is the hard memory bound (setMemoryLimit
    // alone does not count what this build allocates), and nothing survives from run to run.
    module = await freshInstance(limits.memoryBytes)
  } catch (err) {
    throw new BarbicanError('ERR_CODE_UNAVAILABLE', 'The code isolate (QuickJS) cannot load', {
      cause: err,
    })
  }
  const run = new IsolateRun(module, functions, limits, signal, clock)
  try {
    return await run.execute(code)
  } finally {
    run.dispose()
  }
}

type Runtime = ReturnType<QuickJSModule['newRuntime']>
type Context = ReturnType<Runtime['newContext']>
type Handle = ReturnType<Context['newString']>
type Deferred = ReturnType<Context['newPromise']>

/** One program's run in its own QuickJS instance: the host functions, the limits, the wait. */
class IsolateRun {
  readonly #functions: HostFunctions
  readonly #limits: IsolateLimits
  readonly #signal: AbortSignal
  readonly #clock: RunClock
  readonly #output: Output
  /** Aborts host calls in flight when the run ends early (limit, failure, client cancel). */
  readonly #hostCalls = new AbortController()
  readonly #onAbort = () => this.#hostCalls.abort()
  readonly #runtime: Runtime
  readonly #vm: Context
  /** Deferred promises handed to the program and not yet settled: disposed at the end. */
  readonly #pending = new Set<Deferred>()
  #calls = 0
  /** Set once the run is over: late host replies must not touch a disposed runtime. */
  #over = false
  /** The first limit hit, which wins over whatever error the program then reports. */
  #limitHit: BarbicanError | undefined
  /** Wakes the wait for the program's promise: a host reply, an answer, an abort. */
  #wake: (() => void) | undefined

  constructor(
    module: QuickJSModule,
    functions: HostFunctions,
    limits: IsolateLimits,
    signal: AbortSignal,
    clock: RunClock,
  ) {
    this.#functions = functions
    this.#limits = limits
    this.#signal = signal
    this.#clock = clock
    this.#output = new Output(limits.maxOutputBytes)
    clock.begin()
    signal.addEventListener('abort', this.#onAbort, { once: true })
    this.#runtime = module.newRuntime()
    this.#runtime.setMemoryLimit(limits.memoryBytes)
    this.#runtime.setMaxStackSize(limits.stackBytes)
    this.#runtime.setInterruptHandler(() => {
      if (signal.aborted) return true
      if (clock.left() > 0) return false
      this.#pastTimeLimit()
      return true
    })
    this.#vm = this.#runtime.newContext()
    // The last answer from a human: the wait below takes up the time limit again.
    clock.onRelease(() => this.#wake?.())
  }

  async execute(code: string): Promise<IsolateOutcome> {
    const vm = this.#vm
    this.#installHostFunctions()
    const evaluated = vm.evalCode(wrapped(code), 'program.js')
    if (evaluated.error) {
      const failure = describe(vm.dump(evaluated.error))
      evaluated.error.dispose()
      return this.#finish(undefined, this.#failure(failure))
    }
    const promise = evaluated.value
    try {
      this.#runtime.executePendingJobs()
      return await this.#settled(promise)
    } finally {
      promise.dispose()
    }
  }

  dispose(): void {
    this.#over = true
    this.#clock.onRelease(undefined)
    this.#hostCalls.abort()
    this.#signal.removeEventListener('abort', this.#onAbort)
    for (const deferred of this.#pending) deferred.dispose()
    this.#pending.clear()
    try {
      this.#vm.dispose()
      this.#runtime.dispose()
    } catch {
      // The instance is dropped with the run whatever state it was left in.
    }
  }

  /** Runs until the program's promise settles, waking on each host reply, or the deadline. */
  async #settled(promise: Handle): Promise<IsolateOutcome> {
    const vm = this.#vm
    const clock = this.#clock
    for (;;) {
      const state = vm.getPromiseState(promise)
      if (state.type === 'fulfilled') {
        const value = state.value
        const json = vm.dump(value)
        value.dispose()
        if (this.#limitHit) return this.#finish(undefined, this.#limitHit)
        return this.#finish(serialise(json, this.#output), undefined)
      }
      if (state.type === 'rejected') {
        const failure = describe(vm.dump(state.error))
        state.error.dispose()
        return this.#finish(undefined, this.#failure(failure))
      }
      if (this.#limitHit) return this.#finish(undefined, this.#limitHit)
      if (this.#signal.aborted) return this.#finish(undefined, cancelled())
      clock.idle = true
      const left = clock.left()
      if (left <= 0 || this.#pending.size === 0) {
        if (this.#pending.size === 0 && left > 0) {
          // Nothing in flight and not settled: the program awaits something that never comes.
          return this.#finish(
            undefined,
            failed('The program is waiting on a promise that nothing will settle'),
          )
        }
        return this.#finish(undefined, this.#pastTimeLimit())
      }
      await this.#woken(left)
      this.#wake = undefined
      clock.idle = false
    }
  }

  /** Waits for a host reply, a human's answer or an abort, or `left` ms when the clock runs. */
  #woken(left: number): Promise<void> {
    return new Promise<void>((resolve) => {
      // Stopped (a call waits for a human): no deadline until the answer, or an abort.
      const timer = this.#clock.stopped ? undefined : setTimeout(resolve, left)
      const abort = () => resolve()
      this.#signal.addEventListener('abort', abort, { once: true })
      this.#wake = () => {
        clearTimeout(timer)
        this.#signal.removeEventListener('abort', abort)
        resolve()
      }
    })
  }

  /** `console.*` and the namespaces' functions, as the prelude expects them. */
  #installHostFunctions(): void {
    const vm = this.#vm
    const log = vm.newFunction('log', (levelHandle, textHandle) => {
      const level = vm.getString(levelHandle)
      const line = this.#output.take(
        `${level === 'log' || level === 'info' ? '' : `[${level}] `}${vm.getString(textHandle)}\n`,
      )
      // The line break that joins it to the next one counts too.
      if (line !== undefined) {
        this.#output.logs.push(line.endsWith('\n') ? line.slice(0, -1) : line)
      }
    })
    vm.setProp(vm.global, '__barbicanLog', log)
    log.dispose()
    const call = vm.newFunction('call', (spaceHandle, nameHandle, argsHandle) =>
      this.#hostCall(vm.getString(spaceHandle), vm.getString(nameHandle), argsHandle),
    )
    vm.setProp(vm.global, '__barbicanCall', call)
    call.dispose()
    const names: Record<string, readonly string[]> = {}
    for (const [space, fns] of this.#functions) names[space] = [...fns.keys()]
    vm.unwrapResult(vm.evalCode(prelude(names), 'prelude.js')).dispose()
  }

  /** One call from the program: a promise the host function's reply settles. */
  #hostCall(space: string, name: string, argsHandle: Handle): Handle | { error: Handle } {
    const vm = this.#vm
    const limits = this.#limits
    const fn = this.#functions.get(space)?.get(name)
    if (!fn) return { error: vm.newError(`${space}.${name} is not a function of this server`) }
    if (this.#calls >= limits.maxCalls) {
      const err = this.#hit(`The program made more than ${limits.maxCalls} tool calls`, {
        limit: 'maxCalls',
        value: limits.maxCalls,
      })
      return { error: vm.newError(err.message) }
    }
    this.#calls++
    let args: unknown
    try {
      args = JSON.parse(vm.getString(argsHandle))
    } catch {
      return { error: vm.newError('Tool arguments must be JSON') }
    }
    const deferred = vm.newPromise()
    this.#pending.add(deferred)
    fn(args, this.#hostCalls.signal, this.#clock).then(
      (value) => {
        if (this.#over) return
        const json = value === undefined ? undefined : JSON.stringify(value)
        const handle = json === undefined ? vm.undefined : vm.newString(json)
        deferred.resolve(handle)
        if (json !== undefined) handle.dispose()
      },
      (err: unknown) => {
        if (this.#over) return
        const error = vm.newError(err instanceof Error ? err.message : String(err))
        deferred.reject(error)
        error.dispose()
      },
    )
    deferred.settled.then(() => {
      this.#pending.delete(deferred)
      deferred.dispose()
      this.#settle()
    })
    return deferred.handle
  }

  /** A host reply arrived: the program's jobs run, and the wait wakes. */
  #settle(): void {
    if (this.#over) return
    this.#clock.idle = false
    this.#runtime.executePendingJobs()
    this.#clock.idle = true
    this.#wake?.()
  }

  #hit(message: string, data: Record<string, unknown>): BarbicanError {
    this.#limitHit ??= new BarbicanError('ERR_CODE_LIMIT', message, { data })
    return this.#limitHit
  }

  #pastTimeLimit(): BarbicanError {
    const timeoutMs = this.#limits.timeoutMs
    return this.#hit(`The program ran past its time limit of ${timeoutMs} ms`, {
      limit: 'timeoutMs',
      value: timeoutMs,
    })
  }

  /** What the program's own failure becomes: a limit hit or a cancel wins over it. */
  #failure(message: string): BarbicanError {
    return this.#limitHit ?? (this.#signal.aborted ? cancelled() : failed(message))
  }

  #finish(value: string | undefined, error: BarbicanError | undefined): IsolateOutcome {
    const output = this.#output
    return { logs: output.logs, value, error, calls: this.#calls, truncated: output.truncated }
  }
}

function cancelled(): BarbicanError {
  return new BarbicanError('ERR_CANCELLED', 'The run was cancelled')
}

/**
 * A program failure, as the program's own error describes it; QuickJS's own out-of-memory and
 * stack-overflow errors are limits, not the program's.
 */
function failed(message: string): BarbicanError {
  if (/^InternalError: out of memory/.test(message)) {
    return new BarbicanError('ERR_CODE_LIMIT', 'The program ran out of its memory limit', {
      data: { limit: 'memoryBytes' },
    })
  }
  if (
    /^(InternalError|RangeError): (stack overflow|Maximum call stack size exceeded)/.test(message)
  ) {
    return new BarbicanError('ERR_CODE_LIMIT', 'The program overflowed its stack limit', {
      data: { limit: 'stackBytes' },
    })
  }
  return new BarbicanError('ERR_CODE_FAILED', message)
}

/** The text of an error value dumped from the isolate (`{ name, message, stack }` or any). */
function describe(dumped: unknown): string {
  if (dumped !== null && typeof dumped === 'object') {
    const { name, message, stack } = dumped as {
      name?: unknown
      message?: unknown
      stack?: unknown
    }
    if (typeof message === 'string') {
      const head = typeof name === 'string' ? `${name}: ${message}` : message
      return typeof stack === 'string' && stack !== '' ? `${head}\n${stack}` : head
    }
  }
  return typeof dumped === 'string' ? dumped : (JSON.stringify(dumped) ?? String(dumped))
}

/** The return value as JSON text within the output budget; undefined for `undefined`. */
function serialise(value: unknown, output: Output): string | undefined {
  if (value === undefined) return undefined
  const json = JSON.stringify(value)
  return json === undefined ? undefined : output.take(json)
}
