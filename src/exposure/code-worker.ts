/**
 * The worker thread a code-mode program runs in (code-thread.ts, ADR 075). QuickJS runs
 * synchronously between host calls: on the gateway's own thread an endless loop would hold every
 * other client until the time limit. Here it holds only this thread. Each run still gets its own
 * QuickJS instance (code-isolate.ts); tool calls go to the gateway as messages and their results
 * come back as messages, as JSON-able data only.
 */
import { parentPort } from 'node:worker_threads'
import type { BarbicanError } from '../common/errors.ts'
import { RunClock } from './code-clock.ts'
import {
  type HostFunction,
  type IsolateLimits,
  prepareInstance,
  runIsolated,
} from './code-isolate.ts'

/**
 * What the gateway sends: a program to run, a tool call's answer, a cancellation, or that a call
 * waits for a human's answer (`hold`) and has it (`release`), which stops the program's clock.
 */
export type ToWorker =
  | {
      readonly type: 'run'
      readonly code: string
      readonly namespaces: Record<string, readonly string[]>
      readonly limits: IsolateLimits
    }
  | {
      readonly type: 'reply'
      readonly id: number
      readonly value?: unknown
      readonly error?: string
    }
  | { readonly type: 'abort' }
  | { readonly type: 'hold' }
  | { readonly type: 'release' }
  /** Load QuickJS now, for a run to come with this memory limit. */
  | { readonly type: 'warm'; readonly memoryBytes: number }

/** An error as it crosses the thread boundary. */
export interface WireError {
  readonly code: BarbicanError['code']
  readonly message: string
  readonly data?: unknown
}

/** What the worker sends: a tool call to make, or the run's end. */
export type FromWorker =
  | {
      readonly type: 'call'
      readonly id: number
      readonly space: string
      readonly name: string
      readonly args: unknown
    }
  | {
      readonly type: 'done'
      readonly logs: readonly string[]
      readonly value: string | undefined
      readonly error: WireError | undefined
      readonly calls: number
      readonly truncated: boolean
    }
  | { readonly type: 'unavailable'; readonly error: WireError }

const port = parentPort
if (port === null) throw new Error('code-worker.ts runs only as a worker thread')

let nextId = 0
/** Tool calls awaiting the gateway's answer. */
const waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>()
let abort = new AbortController()
/** The running program's time limit. */
let clock: RunClock | undefined

const send = (message: FromWorker) => port.postMessage(message)
const wire = (e: BarbicanError): WireError => ({ code: e.code, message: e.message, data: e.data })

port.on('message', (message: ToWorker) => {
  if (message.type === 'reply') {
    const w = waiting.get(message.id)
    waiting.delete(message.id)
    if (message.error !== undefined) w?.reject(new Error(message.error))
    else w?.resolve(message.value)
  } else if (message.type === 'abort') {
    abort.abort()
  } else if (message.type === 'hold') {
    clock?.hold()
  } else if (message.type === 'release') {
    clock?.release()
  } else if (message.type === 'warm') {
    prepareInstance(message.memoryBytes)
  } else {
    void run(message)
  }
})

async function run({ code, namespaces, limits }: Extract<ToWorker, { type: 'run' }>) {
  abort = new AbortController()
  clock = new RunClock(limits.timeoutMs)
  waiting.clear()
  const functions = new Map<string, Map<string, HostFunction>>()
  for (const [space, names] of Object.entries(namespaces)) {
    const fns = new Map<string, HostFunction>()
    for (const name of names) {
      fns.set(
        name,
        (args) =>
          new Promise((resolve, reject) => {
            const id = nextId++
            waiting.set(id, { resolve, reject })
            send({ type: 'call', id, space, name, args })
          }),
      )
    }
    functions.set(space, fns)
  }
  try {
    const outcome = await runIsolated(code, functions, limits, abort.signal, clock)
    send({
      type: 'done',
      logs: outcome.logs,
      value: outcome.value,
      error: outcome.error === undefined ? undefined : wire(outcome.error),
      calls: outcome.calls,
      truncated: outcome.truncated,
    })
  } catch (err) {
    send({ type: 'unavailable', error: wire(err as BarbicanError) })
  }
}
