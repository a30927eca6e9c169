/**
 * Progress of a call that may outlive the request that started it. A legacy upstream call held
 * for a 2026-07-28 client keeps the progress token it was sent with, but each round is a new
 * client request (with its own token, or none), so progress must reach whichever request is
 * waiting on the call now. The relay is what the progress router delivers to; the bridge points
 * it at the current request, at nothing while the call is parked, and releases it when the call
 * ends.
 */
import type { JsonRpcId } from '../protocol/jsonrpc.ts'

/** The client request progress goes to, with the token that client chose. */
export interface ProgressTarget {
  readonly sink: { progress(params: Record<string, unknown>, relatedRequestId: JsonRpcId): void }
  readonly token: string | number
  readonly requestId: JsonRpcId
}

export class ProgressRelay {
  #target: ProgressTarget | undefined
  #release: (() => unknown) | undefined

  /** `release` unregisters the relay from the progress router. */
  constructor(target: ProgressTarget, release: () => unknown) {
    this.#target = target
    this.#release = release
  }

  /** The request progress goes to now (undefined: nobody is waiting). */
  get target(): ProgressTarget | undefined {
    return this.#target
  }

  /** ProgressSink: delivers to the current target with that client's own token. */
  progress(params: Record<string, unknown>): void {
    const target = this.#target
    if (target) target.sink.progress({ ...params, progressToken: target.token }, target.requestId)
  }

  retarget(target: ProgressTarget | undefined): void {
    this.#target = target
  }

  /** Idempotent. */
  release(): void {
    this.#target = undefined
    this.#release?.()
    this.#release = undefined
  }
}
