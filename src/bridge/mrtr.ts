/**
 * Multi-round-trip requests (2026-07-28 `input_required`) across eras, both ways.
 *
 * Modern client → legacy upstream: the call is held (held-call.ts); each batch of upstream
 * requests becomes an `input_required` result whose sealed `requestState` names the held call;
 * the retry answers them and resumes it. Requests for a capability the client did not declare
 * on the request are refused upstream; when nothing is left to ask, the client gets -32021.
 *
 * Modern client → modern upstream: pass-through, except that the upstream's own
 * `requestState` is wrapped in Barbican's sealed state, so every state a client holds is bound
 * to its identity, its request and an expiry, whatever the upstream does.
 *
 * Legacy client → modern upstream (`legacyShim`): each `inputRequests` entry becomes a real
 * request to the client on its session; Barbican retries upstream with the answers.
 */
import { randomUUID } from 'node:crypto'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import {
  MISSING_REQUIRED_CLIENT_CAPABILITY,
  URL_ELICITATION_REQUIRED,
} from '../protocol/error-codes.ts'
import { isPlainObject, type JsonObject, type JsonRpcRequest } from '../protocol/jsonrpc.ts'
import { METHOD_SPECS } from '../protocol/methods.ts'
import type { ErrorReply, Result } from '../protocol/model.ts'
import type { ContinuationStore } from './continuation-store.ts'
import { type ClientRequester, HeldCall } from './held-call.ts'
import type { ProgressRelay } from './progress-relay.ts'
import { type RequestStateSealer, requestDigest, subjectOf } from './request-state.ts'

/** The methods that may answer `input_required` (2026-07-28 MRTR, "Supported Requests"). */
export const MRTR_METHODS: ReadonlySet<string> = new Set(
  METHOD_SPECS.filter((s) => s.mrtr).map((s) => s.method),
)

/** Client capability each embedded request needs. */
const GATE: Readonly<Record<string, string>> = {
  'elicitation/create': 'elicitation',
  'sampling/createMessage': 'sampling',
  'roots/list': 'roots',
}

/** Most rounds the legacy shim runs before giving up (a looping upstream). */
export const MAX_SHIM_ROUNDS = 8

export interface MrtrOptions {
  readonly sealer: RequestStateSealer
  readonly store: ContinuationStore<HeldCall>
  /** How long a held call or a wrapped state stays valid without the client's retry. */
  readonly holdMs: number
  /** Window to gather upstream requests sent together into one round. */
  readonly settleMs: number
}

/** A call from a modern client to one upstream, as the session hands it to the bridge. */
export interface ModernCall {
  readonly identity: Identity
  readonly method: string
  /** Params as the client sent them, with `inputResponses` / `requestState` when retrying. */
  readonly params: JsonObject | undefined
  readonly clientCapabilities: JsonObject
  readonly signal: AbortSignal
  readonly upstream: string
  readonly upstreamEra: 'legacy' | 'modern'
  /**
   * This request's progress registration, when it carried a token. The bridge owns it: a held
   * call keeps it across rounds and releases it when the call ends.
   */
  readonly progress?: ProgressRelay | undefined
  /** Sends upstream. `owner` receives a legacy upstream's requests; `signal` cancels. */
  send(
    params: JsonObject | undefined,
    owner: ClientRequester | undefined,
    signal: AbortSignal,
  ): Promise<Result | ErrorReply>
}

export class MrtrBridge {
  readonly #options: MrtrOptions
  /**
   * This replica's id in a fleet (docs/decisions/081), sealed into the state of every call it
   * holds so that a retry landing on another replica is relayed here. Undefined in one process.
   */
  replica: string | undefined

  constructor(options: MrtrOptions) {
    this.#options = options
  }

  /** Which replica holds the call a retry's `requestState` names (undefined: none, or here). */
  heldBy(requestState: unknown): string | undefined {
    return this.#options.sealer.heldBy(requestState)
  }

  async modernCall(call: ModernCall): Promise<Result | ErrorReply> {
    let held = false
    try {
      return await this.#modernCall(call, () => {
        held = true
      })
    } finally {
      // A call held for later rounds owns its relay; anything else ends with this request.
      if (!held) call.progress?.release()
    }
  }

  async #modernCall(call: ModernCall, holding: () => void): Promise<Result | ErrorReply> {
    const { sealer, store } = this.#options
    const digest = requestDigest(call.method, call.params)
    const responses = call.params?.inputResponses
    const token = call.params?.requestState
    const base = without(call.params, 'inputResponses', 'requestState')
    if (token !== undefined) {
      const state = sealer.open(token, call.identity, digest)
      if (state.r === 1) return await this.#hold(call, base, digest, holding)
      if (state.c !== undefined) {
        const held = await store.take(state.c)
        if (!held && state.o !== undefined && state.o !== this.replica) {
          // Relayed retries never get here (cluster/cluster.ts): the owner was not reachable.
          throw new BarbicanError(
            'ERR_INVALID_PARAMS',
            'The requestState names a call held by another replica, which could not be reached; call again',
          )
        }
        if (!held) {
          throw new BarbicanError(
            'ERR_INVALID_PARAMS',
            'The requestState names a call that is no longer held (already resumed or expired); call again',
          )
        }
        // Progress of the held call now goes to this retry (or nowhere, if it asked for none);
        // the retry's own registration is never used, since the upstream has the first token.
        held.progress?.retarget(call.progress?.target)
        held.answer(responses)
        return await this.#drive(held, call, digest)
      }
      if (state.u !== call.upstream) {
        throw new BarbicanError('ERR_INVALID_PARAMS', 'The requestState belongs to another server')
      }
      const out: JsonObject = { ...base }
      if (responses !== undefined) out.inputResponses = responses
      if (state.s !== undefined) out.requestState = state.s
      return this.#wrap(await call.send(out, undefined, call.signal), call, digest)
    }
    if (call.upstreamEra === 'modern') {
      const out: JsonObject = { ...base }
      if (responses !== undefined) out.inputResponses = responses
      return this.#wrap(await call.send(out, undefined, call.signal), call, digest)
    }
    return await this.#hold(call, base, digest, holding)
  }

  /** Sends a call to a legacy upstream and holds it for the client's rounds. */
  async #hold(
    call: ModernCall,
    base: JsonObject,
    digest: string,
    holding: () => void,
  ): Promise<Result | ErrorReply> {
    const held = new HeldCall(this.#options.settleMs)
    held.progress = call.progress
    holding()
    held.start(call.send(base, held, held.controller.signal))
    return await this.#drive(held, call, digest)
  }

  /**
   * A 2025-11-25 upstream's -32042 (URL elicitation required) as a 2026 round: each URL becomes
   * an embedded URL-mode elicitation (without the 2025 `elicitationId`), and the retry re-issues
   * the call, since the user completed the flow out of band. Undefined when not applicable.
   */
  #urlRound(reply: Result | ErrorReply, call: ModernCall, digest: string): Result | undefined {
    if (reply.kind !== 'error') return undefined
    if (reply.code !== URL_ELICITATION_REQUIRED && reply.meaning !== 'url-elicitation-required') {
      return undefined
    }
    const elicitations = isPlainObject(reply.data) ? reply.data.elicitations : undefined
    const elicitation = call.clientCapabilities.elicitation
    if (
      !Array.isArray(elicitations) ||
      !isPlainObject(elicitation) ||
      !isPlainObject(elicitation.url)
    ) {
      return undefined
    }
    const inputRequests: JsonObject = {}
    elicitations.forEach((e, i) => {
      if (!isPlainObject(e) || typeof e.url !== 'string') return
      inputRequests[`url-${i + 1}`] = {
        method: 'elicitation/create',
        params: {
          mode: 'url',
          url: e.url,
          message: typeof e.message === 'string' ? e.message : '',
        },
      }
    })
    if (Object.keys(inputRequests).length === 0) return undefined
    const requestState = this.#options.sealer.seal({
      sub: subjectOf(call.identity),
      dig: digest,
      exp: Date.now() + this.#options.holdMs,
      r: 1,
    })
    return {
      kind: 'result',
      id: 0,
      resultType: 'input_required',
      result: { inputRequests, requestState },
    }
  }

  /** Runs a held call until it completes or needs the client; then parks it. */
  async #drive(held: HeldCall, call: ModernCall, digest: string): Promise<Result | ErrorReply> {
    const onAbort = () => held.expire()
    call.signal.addEventListener('abort', onAbort, { once: true })
    try {
      for (;;) {
        const event = await held.next(call.signal).catch((error: unknown) => {
          if (!call.signal.aborted) throw error
          throw new BarbicanError('ERR_CANCELLED', 'Request cancelled')
        })
        if (event.kind === 'done') {
          held.progress?.release()
          return this.#urlRound(event.reply, call, digest) ?? event.reply
        }
        const inputRequests: JsonObject = {}
        const missing: JsonObject = {}
        for (const [key, pending] of event.requests) {
          const gate = GATE[pending.request.method]
          if (gate !== undefined && !isPlainObject(call.clientCapabilities[gate])) {
            missing[gate] = {}
            held.refuse(key, `the client did not declare the ${gate} capability`)
          } else {
            inputRequests[key] = {
              method: pending.request.method,
              params: pending.request.params ?? {},
            }
          }
        }
        if (Object.keys(inputRequests).length === 0) {
          held.expire()
          return {
            kind: 'error',
            id: 0,
            code: MISSING_REQUIRED_CLIENT_CAPABILITY,
            message: `The upstream needs client capabilities this request did not declare: ${Object.keys(missing).join(', ')}`,
            data: { requiredCapabilities: missing },
          }
        }
        const id = randomUUID()
        // Parked: no request is waiting for progress until the client's retry.
        held.progress?.retarget(undefined)
        await this.#options.store.put(id, held, this.#options.holdMs)
        const requestState = this.#options.sealer.seal({
          sub: subjectOf(call.identity),
          dig: digest,
          exp: Date.now() + this.#options.holdMs,
          c: id,
          ...(this.replica === undefined ? {} : { o: this.replica }),
        })
        return {
          kind: 'result',
          id: 0,
          resultType: 'input_required',
          result: { inputRequests, requestState },
        }
      }
    } finally {
      call.signal.removeEventListener('abort', onAbort)
    }
  }

  /** Wraps a modern upstream's `requestState` (or its absence) in a sealed Barbican state. */
  #wrap(reply: Result | ErrorReply, call: ModernCall, digest: string): Result | ErrorReply {
    if (reply.kind !== 'result' || reply.resultType !== 'input_required') return reply
    const upstreamState = reply.result.requestState
    const requestState = this.#options.sealer.seal({
      sub: subjectOf(call.identity),
      dig: digest,
      exp: Date.now() + this.#options.holdMs,
      u: call.upstream,
      ...(typeof upstreamState === 'string' ? { s: upstreamState } : {}),
    })
    return { ...reply, result: { ...reply.result, requestState } }
  }

  /**
   * Legacy client, modern upstream: answers each `input_required` round by asking the client
   * with real requests, then retries upstream with the answers and the upstream's state.
   */
  async legacyShim(
    first: Result | ErrorReply,
    params: JsonObject | undefined,
    retry: (params: JsonObject) => Promise<Result | ErrorReply>,
    client: ClientRequester,
    relatedRequestId: JsonRpcRequest['id'],
  ): Promise<Result | ErrorReply> {
    let reply = first
    for (let round = 0; round < MAX_SHIM_ROUNDS; round++) {
      if (reply.kind !== 'result' || reply.resultType !== 'input_required') return reply
      const requests = isPlainObject(reply.result.inputRequests) ? reply.result.inputRequests : {}
      const answers: JsonObject = {}
      const asked = await Promise.all(
        Object.entries(requests).map(async ([key, embedded]) => {
          if (!isPlainObject(embedded) || typeof embedded.method !== 'string') return undefined
          let params = isPlainObject(embedded.params) ? embedded.params : undefined
          // 2025-11-25 URL-mode elicitation requires an id the 2026 form no longer has.
          if (params?.mode === 'url' && params.elicitationId === undefined) {
            params = { ...params, elicitationId: randomUUID() }
          }
          const request: JsonRpcRequest = {
            jsonrpc: '2.0',
            id: 0,
            method: embedded.method,
            ...(params ? { params } : {}),
          }
          const answer = await client.requestClient(request, relatedRequestId)
          if (answer.kind === 'error') return `${embedded.method}: ${answer.message}`
          answers[key] = answer.result
          return undefined
        }),
      )
      const failure = asked.find((a) => a !== undefined)
      if (failure !== undefined) {
        return {
          kind: 'error',
          id: 0,
          code: -32603,
          message: `The upstream needed input the client could not give (${failure})`,
        }
      }
      const next: JsonObject = {
        ...without(params, 'inputResponses', 'requestState'),
        inputResponses: answers,
      }
      if (typeof reply.result.requestState === 'string')
        next.requestState = reply.result.requestState
      reply = await retry(next)
    }
    return {
      kind: 'error',
      id: 0,
      code: -32603,
      message: `The upstream still needed input after ${MAX_SHIM_ROUNDS} rounds`,
    }
  }
}

function without(params: JsonObject | undefined, ...keys: string[]): JsonObject {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(params ?? {})) if (!keys.includes(key)) out[key] = value
  return out
}
