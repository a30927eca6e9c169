/**
 * A legacy upstream call held open for a 2026-07-28 client. The legacy upstream asks for input
 * with real requests (elicitation, sampling, roots/list) while the call runs; a 2026 client can
 * only receive them embedded in an `input_required` result and answers by calling again. The
 * held call collects the upstream's requests, hands them out as one round, parks the upstream
 * requests unanswered until the client's retry brings the answers, then waits for the next
 * round or the final result. If the client never comes back, `expire` answers what is pending
 * (elicitation: cancel; others: an error) and cancels the upstream call.
 */
import {
  isPlainObject,
  type JsonObject,
  type JsonRpcId,
  type JsonRpcRequest,
} from '../protocol/jsonrpc.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import type { Continuation } from './continuation-store.ts'
import type { ProgressRelay } from './progress-relay.ts'

/** Something that can put an upstream's request to a client and return the client's answer. */
export interface ClientRequester {
  requestClient(
    request: JsonRpcRequest,
    relatedRequestId: JsonRpcId | undefined,
    signal?: AbortSignal,
    /** The upstream asking, for policies that watch what reaches the client. */
    upstream?: string,
  ): Promise<Result | ErrorReply>
  /** True while the requester waits for someone else (a held call between rounds). */
  readonly parked?: boolean
}

/** One upstream request waiting for the client's answer. */
export interface PendingInput {
  readonly request: JsonRpcRequest
  readonly resolve: (reply: Result | ErrorReply) => void
}

export type HeldEvent =
  | { readonly kind: 'done'; readonly reply: Result | ErrorReply }
  | { readonly kind: 'input'; readonly requests: ReadonlyMap<string, PendingInput> }

const SHORT: Readonly<Record<string, string>> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
}

export class HeldCall implements ClientRequester, Continuation {
  /** Aborting it cancels the upstream call. */
  readonly controller = new AbortController()
  /** Where the call's progress goes, across rounds (released when the call ends). */
  progress: ProgressRelay | undefined
  readonly #pending = new Map<string, PendingInput>()
  readonly #settleMs: number
  #outcome: { reply: Result | ErrorReply } | { error: unknown } | undefined
  #wake: (() => void) | undefined
  #nextKey = 1
  #driving = false

  /** Between rounds: questions handed out, nobody driving it until the client's retry. */
  get parked(): boolean {
    return !this.#driving && this.#pending.size > 0
  }

  /** `settleMs`: how long to wait after a first upstream request for siblings sent with it. */
  constructor(settleMs: number) {
    this.#settleMs = settleMs
  }

  /** Attaches the upstream call's eventual reply. */
  start(reply: Promise<Result | ErrorReply>): void {
    reply.then(
      (r) => this.#finish({ reply: r }),
      (error: unknown) => this.#finish({ error }),
    )
  }

  #finish(outcome: { reply: Result | ErrorReply } | { error: unknown }): void {
    this.#outcome = outcome
    this.#wake?.()
  }

  /** ClientRequester: the upstream asked for input; park it until the client answers. */
  requestClient(request: JsonRpcRequest): Promise<Result | ErrorReply> {
    return new Promise((resolve) => {
      const key = `${SHORT[request.method] ?? 'input'}-${this.#nextKey++}`
      this.#pending.set(key, { request, resolve })
      this.#wake?.()
    })
  }

  /** Waits for the call to finish or to need input; pending input is returned every time. */
  async next(signal: AbortSignal): Promise<HeldEvent> {
    this.#driving = true
    try {
      return await this.#next(signal)
    } finally {
      this.#driving = false
    }
  }

  async #next(signal: AbortSignal): Promise<HeldEvent> {
    for (;;) {
      const outcome = this.#outcome
      if (outcome) {
        if ('error' in outcome) throw outcome.error
        return { kind: 'done', reply: outcome.reply }
      }
      if (this.#pending.size > 0) {
        // Requests a server sends together (Promise.all) arrive a moment apart; one round.
        await new Promise((resolve) => setTimeout(resolve, this.#settleMs))
        const late = this.#outcome
        if (late && 'reply' in late) return { kind: 'done', reply: late.reply }
        return { kind: 'input', requests: new Map(this.#pending) }
      }
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(signal.reason ?? new Error('aborted'))
        if (signal.aborted) return onAbort()
        signal.addEventListener('abort', onAbort, { once: true })
        this.#wake = () => {
          signal.removeEventListener('abort', onAbort)
          this.#wake = undefined
          resolve()
        }
      })
    }
  }

  /** Answers pending requests from a retry's `inputResponses`; invalid answers stay pending. */
  answer(responses: unknown): void {
    if (!isPlainObject(responses)) return
    for (const [key, pending] of this.#pending) {
      const answer = responses[key]
      if (!validAnswer(pending.request.method, answer)) continue
      this.#pending.delete(key)
      pending.resolve({
        kind: 'result',
        id: pending.request.id,
        resultType: 'complete',
        result: answer,
      })
    }
  }

  /** Answers one pending request on the client's behalf with a refusal. */
  refuse(key: string, reason: string): void {
    const pending = this.#pending.get(key)
    if (!pending) return
    this.#pending.delete(key)
    pending.resolve(refusal(pending.request, reason))
  }

  /** Nobody will answer: refuse everything pending and cancel the upstream call. */
  expire(): void {
    for (const key of [...this.#pending.keys()])
      this.refuse(key, 'the client did not answer in time')
    this.controller.abort(new Error('The held call expired'))
    this.progress?.release()
  }
}

/** Elicitation is declined with `cancel` (a valid ElicitResult); anything else gets an error. */
function refusal(request: JsonRpcRequest, reason: string): Result | ErrorReply {
  if (request.method === 'elicitation/create') {
    return { kind: 'result', id: request.id, resultType: 'complete', result: { action: 'cancel' } }
  }
  return { kind: 'error', id: request.id, code: -32603, message: `Barbican: ${reason}` }
}

function validAnswer(method: string, answer: unknown): answer is JsonObject {
  if (!isPlainObject(answer)) return false
  switch (method) {
    case 'elicitation/create':
      return answer.action === 'accept' || answer.action === 'decline' || answer.action === 'cancel'
    case 'sampling/createMessage':
      return isPlainObject(answer.content) || Array.isArray(answer.content)
    case 'roots/list':
      return Array.isArray(answer.roots)
    default:
      return true
  }
}
