/**
 * Runs a code-mode program off the gateway's event loop (ADR 075): in a worker thread
 * (code-worker.ts), its tool calls coming back here as messages to the host functions. Workers
 * are kept for the next run (each run still has its own QuickJS instance); one whose program
 * does not stop by the time limit (plus a grace) is terminated, so the limit holds even if the
 * interpreter's own interrupt never fires; so is one that does not stop within the grace after
 * the run is aborted (its client gone, or its held round expired: ADR 083).
 */
import { Worker } from 'node:worker_threads'
import { BarbicanError } from '../common/errors.ts'
import { type ProgramClock, RunClock } from './code-clock.ts'
import type { HostFunctions, IsolateLimits, IsolateOutcome } from './code-isolate.ts'
import type { FromWorker, ToWorker, WireError } from './code-worker.ts'

/** The worker's script: beside the sources, or `code-worker.js` beside the build's files. */
const SCRIPT = import.meta.url.endsWith('.ts')
  ? new URL('./code-worker.ts', import.meta.url)
  : new URL('./code-worker.js', import.meta.url)

/** Past the time limit or an abort, how long a worker may take to report before it ends. */
const GRACE_MS = 1000
/** Idle workers kept for the next runs (a new worker costs tens of milliseconds). */
const MAX_IDLE = 2

const idle: Worker[] = []

function started(memoryBytes: number): Worker {
  const worker = new Worker(SCRIPT)
  worker.unref()
  worker.postMessage({ type: 'warm', memoryBytes } satisfies ToWorker)
  return worker
}

/**
 * An idle worker, or a new one; when none is left idle a spare is started and warmed for the
 * next run, so a program that arrives while another runs does not wait for a thread to start.
 */
function aWorker(memoryBytes: number): Worker {
  const worker = idle.pop() ?? started(memoryBytes)
  if (idle.length === 0) release(started(memoryBytes))
  return worker
}

/** Back to the idle set for the next run, or ended when enough are idle. */
function release(worker: Worker): void {
  worker.removeAllListeners('message')
  worker.removeAllListeners('error')
  worker.removeAllListeners('exit')
  if (idle.length < MAX_IDLE) {
    // A kept worker that fails or dies while idle is simply forgotten (never an uncaught error).
    worker.on('error', () => {})
    worker.once('exit', () => {
      const at = idle.indexOf(worker)
      if (at >= 0) idle.splice(at, 1)
    })
    idle.push(worker)
  } else void worker.terminate()
}

const fromWire = (e: WireError) => new BarbicanError(e.code, e.message, { data: e.data })

/** Runs one host function the program called, and answers with its value or its error. */
function hostCall(
  message: Extract<FromWorker, { type: 'call' }>,
  functions: HostFunctions,
  signal: AbortSignal,
  clock: ProgramClock,
  answer: (reply: ToWorker) => void,
): void {
  const fn = functions.get(message.space)?.get(message.name)
  if (fn === undefined) {
    answer({ type: 'reply', id: message.id, error: `${message.space}.${message.name}?` })
    return
  }
  fn(message.args, signal, clock).then(
    (value) => answer({ type: 'reply', id: message.id, value }),
    (err: unknown) =>
      answer({
        type: 'reply',
        id: message.id,
        error: err instanceof Error ? err.message : String(err),
      }),
  )
}

/** `runIsolated` (code-isolate.ts) in a worker thread: same contract, same outcome. */
export function runInThread(
  code: string,
  functions: HostFunctions,
  limits: IsolateLimits,
  signal: AbortSignal,
): Promise<IsolateOutcome> {
  const namespaces: Record<string, readonly string[]> = {}
  for (const [space, fns] of functions) namespaces[space] = [...fns.keys()]
  const worker = aWorker(limits.memoryBytes)
  const post = (message: ToWorker) => worker.postMessage(message)
  /** Aborts host calls in flight once the run is over. */
  const hostCalls = new AbortController()
  let calls = 0
  /**
   * The time limit as the gateway side watches it: stopped while a call waits for a human (the
   * worker's own clock then still counts what the program runs, and its interrupt stops it).
   */
  const watched = new RunClock(limits.timeoutMs, { idle: true })
  return new Promise<IsolateOutcome>((resolve, reject) => {
    let over = false
    let watchdog: NodeJS.Timeout | undefined
    let killer: NodeJS.Timeout | undefined
    const end = (keep: boolean) => {
      over = true
      clearTimeout(watchdog)
      clearTimeout(killer)
      signal.removeEventListener('abort', onAbort)
      hostCalls.abort()
      if (keep) release(worker)
      else void worker.terminate()
    }
    const stopped = (error: BarbicanError) => {
      if (over) return
      end(false)
      resolve({ logs: [], value: undefined, error, calls, truncated: false })
    }
    const onAbort = () => {
      post({ type: 'abort' })
      // A worker busy in the program reads the abort only at its interrupt: if that never
      // comes, the thread is ended rather than left running for nobody.
      killer ??= setTimeout(
        () => stopped(new BarbicanError('ERR_CANCELLED', 'The run was cancelled')),
        GRACE_MS,
      )
    }
    signal.addEventListener('abort', onAbort, { once: true })
    const arm = () => {
      clearTimeout(watchdog)
      watchdog = setTimeout(overrun, Math.max(0, watched.left()) + GRACE_MS)
    }
    const overrun = () =>
      stopped(
        new BarbicanError(
          'ERR_CODE_LIMIT',
          `The program ran past its time limit of ${limits.timeoutMs} ms`,
          { data: { limit: 'timeoutMs', value: limits.timeoutMs } },
        ),
      )
    arm()
    /** One call's holds, forwarded to the worker's clock; the watchdog waits while held. */
    const clock: ProgramClock = {
      hold() {
        if (over) return
        watched.hold()
        clearTimeout(watchdog)
        post({ type: 'hold' })
      },
      release() {
        if (over) return
        watched.release()
        if (!watched.stopped) arm()
        post({ type: 'release' })
      },
    }
    worker.on('message', (message: FromWorker) => {
      if (over) return
      if (message.type === 'call') {
        calls++
        hostCall(message, functions, hostCalls.signal, clock, (reply) => {
          if (!over) post(reply)
        })
      } else if (message.type === 'done') {
        end(true)
        const { logs, value, error, truncated } = message
        resolve({
          logs,
          value,
          error: error === undefined ? undefined : fromWire(error),
          calls: message.calls,
          truncated,
        })
      } else {
        end(true)
        reject(fromWire(message.error))
      }
    })
    worker.on('error', (err) => {
      if (over) return
      end(false)
      reject(new BarbicanError('ERR_CODE_UNAVAILABLE', 'The code isolate failed', { cause: err }))
    })
    worker.on('exit', () => {
      if (over) return
      end(false)
      reject(new BarbicanError('ERR_CODE_UNAVAILABLE', 'The code isolate stopped'))
    })
    if (signal.aborted) onAbort()
    post({ type: 'run', code, namespaces, limits })
  })
}
