/**
 * How a code-mode program's tool call gets the input it needs from a 2026-07-28 client (ADR 083).
 * Such a client cannot be asked mid-request: a confirmation (or any `input_required` round of the
 * call) is an answer the client retries with. So `run_code` itself is a held call
 * (bridge/held-call.ts): the program's questions become the `run_code` call's own
 * `input_required` round, the program stays paused in its worker meanwhile, and the client's
 * retry brings the answers, with which the program's call is retried, as a client would retry it,
 * through the whole chain again (the confirm policy spends its question once).
 */
import type { ClientRequester } from '../bridge/held-call.ts'
import type { MrtrBridge } from '../bridge/mrtr.ts'
import { BarbicanError } from '../common/errors.ts'
import type { ProgramClock } from '../exposure/code-clock.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'

export interface ProgramInput {
  /**
   * Answers `first` (an `input_required` reply to the call sent with `params`) by asking the
   * client, then retries with the answers until the call completes or fails. `clock` is held
   * while the client is being asked; `signal` ends the wait (the run is over).
   */
  relay(
    first: Result,
    params: JsonObject,
    retry: (params: JsonObject) => Promise<Result | ErrorReply>,
    clock: ProgramClock,
    signal: AbortSignal,
  ): Promise<Result | ErrorReply>
}

/**
 * The rounds of a held `run_code` call: each question is put to `held` (it becomes part of the
 * `run_code` call's next `input_required` round), and the bridge's shim retries the program's call
 * with the answers (and its sealed `requestState`), for a bounded number of rounds.
 */
export function heldProgramInput(bridge: MrtrBridge, held: ClientRequester): ProgramInput {
  return {
    relay: (first, params, retry, clock, signal) => {
      const asking: ClientRequester = {
        async requestClient(request) {
          clock.hold()
          try {
            return await untilAborted(held.requestClient(request, undefined), signal)
          } finally {
            clock.release()
          }
        },
      }
      // A held call does not relate its questions to a request: the round carries them.
      return bridge.legacyShim(first, params, retry, asking, 0)
    },
  }
}

/** `promise`, or a rejection once `signal` aborts (a question the run no longer waits for). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () =>
      reject(new BarbicanError('ERR_CANCELLED', 'The program ended before the answer came'))
    if (signal.aborted) return onAbort()
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(error)
      },
    )
  })
}
