/**
 * The question the `confirm` policy asks a human, and the sealed `requestState` that carries it
 * across a 2026-07-28 client's rounds: asked once, answered at most once (the ledger), and a
 * confirmed call's later rounds wrapped so that they go on without asking again. The policy
 * itself (which calls need a confirmation) is in confirm.ts.
 */
import { createHash, randomUUID } from 'node:crypto'
import {
  type RequestStateSealer,
  requestDigest,
  stateKeyFromEnv,
  subjectOf,
} from '../bridge/request-state.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { Result } from '../protocol/model.ts'
import type { AnswerLedger } from './answer-ledger.ts'
import type { Call, ConfirmationAnswer, Reply } from './policy.ts'

/** The key of Barbican's question among a round's `inputRequests`. */
export const CONFIRM_INPUT = 'barbican-confirm'

/** What seals and remembers a policy's questions: made once, when the policy is built. */
export interface ConfirmSeal {
  readonly sealer: RequestStateSealer
  /** Questions already answered: a sealed question is answered once, fleet-wide in a fleet. */
  readonly ledger: AnswerLedger
  /** How long a 2026-07-28 client has to answer (the sealed state's lifetime). */
  readonly answerMs: number
}

/**
 * Asks the human. Resolves with the call to send on (accepted), or with the `input_required`
 * question for a 2026-07-28 client; throws ERR_POLICY_DENIED for every other outcome.
 */
export async function ask(
  seal: ConfirmSeal,
  call: Call,
  what: string,
  upstream: string,
  why: string,
): Promise<{ kind: 'question'; reply: Result } | { kind: 'accepted'; call: Call }> {
  const peer = call.peer
  const params = call.request.params ?? {}
  const question = {
    mode: 'form',
    message: `${why}\nAllow ${call.request.method === 'tools/call' ? 'the call of ' : ''}${what} on server "${upstream}" (virtual server "${call.server}") with these arguments?\n${JSON.stringify(shownArguments(call.request.method, params), null, 2)}`,
    requestedSchema: { type: 'object', properties: {} },
  }
  const canElicit = isPlainObject(peer?.capabilities.elicitation)
  if (peer === undefined || peer.era === 'none' || !canElicit) {
    throw refusal(
      call,
      'unavailable',
      `${what} needs a human's confirmation, and this client cannot ask for it (it did not declare the elicitation capability${peer?.era === 'none' ? ' or has no session to ask on' : ''}); refused`,
    )
  }
  if (peer.era === 'modern') {
    const digest = requestDigest(call.request.method, params)
    const opened = openState(seal, params.requestState, call, digest)
    if (opened?.asked === true) {
      await spend(seal, opened.nonce, opened.exp)
      const answer = answerOf(params.inputResponses)
      if (answer !== 'accept') throw refusal(call, answer, declined(what, answer))
      call.decisions?.push({ policy: 'confirm', effect: 'allow', answer })
      return { kind: 'accepted', call: withParams(call, strip(params)) }
    }
    const requestState = seal.sealer.seal({
      sub: subjectOf(call.identity),
      dig: digest,
      exp: Date.now() + seal.answerMs,
      c: `ask:${randomUUID()}`,
    })
    return {
      kind: 'question',
      reply: {
        kind: 'result',
        id: 0,
        resultType: 'input_required',
        result: {
          inputRequests: { [CONFIRM_INPUT]: { method: 'elicitation/create', params: question } },
          requestState,
        },
      },
    }
  }
  const reply = await peer.ask('elicitation/create', question, call.signal)
  if (reply.kind === 'error') {
    throw refusal(call, 'failed', `${what} was not confirmed: ${reply.message}; refused`)
  }
  const answer = answerOf(reply.result)
  if (answer !== 'accept') throw refusal(call, answer, declined(what, answer))
  call.decisions?.push({ policy: 'confirm', effect: 'allow', answer })
  return { kind: 'accepted', call }
}

/**
 * A later round of a call already confirmed: its state is ours (`ok:`), so the call goes on
 * with the upstream's state inside, without asking again.
 */
export function continuing(seal: ConfirmSeal, call: Call): Call {
  const params = call.request.params
  if (call.peer?.era !== 'modern' || params?.requestState === undefined) return call
  const opened = openState(
    seal,
    params.requestState,
    call,
    requestDigest(call.request.method, params),
  )
  if (opened?.asked !== false) return call
  const out = strip(params)
  if (params.inputResponses !== undefined) out.inputResponses = params.inputResponses
  if (opened.inner !== undefined) out.requestState = opened.inner
  return withParams(call, out)
}

/**
 * Our state, opened: a question (`asked`, to be answered at most once: `spend`) or a confirmed call's
 * continuation. Undefined when it is not ours, not this caller's or this request's, or
 * expired: the call is then judged afresh (and asked again), never passed on that account.
 */
function openState(
  seal: ConfirmSeal,
  token: unknown,
  call: Call,
  digest: string,
):
  | { asked: true; nonce: string; exp: number }
  | { asked: false; inner: string | undefined }
  | undefined {
  if (token === undefined) return undefined
  let payload: ReturnType<RequestStateSealer['open']>
  try {
    payload = seal.sealer.open(token, call.identity, digest)
  } catch {
    return undefined
  }
  if (payload.c?.startsWith('ask:')) return { asked: true, nonce: payload.c, exp: payload.exp }
  if (payload.c === 'ok') return { asked: false, inner: payload.s }
  return undefined
}

/** Marks a question answered; a second answer to it is refused (no replay of an accept). */
async function spend(seal: ConfirmSeal, nonce: string, exp: number): Promise<void> {
  if (!(await seal.ledger.claim(nonce, exp))) {
    throw new BarbicanError(
      'ERR_INVALID_PARAMS',
      'This confirmation was already answered; call again to be asked again',
    )
  }
}

/**
 * A confirmed call's `input_required` round (the upstream asks something): its state is
 * wrapped in ours, so the retry is known to be confirmed already.
 */
export function rewrap(seal: ConfirmSeal, reply: Reply, call: Call): Reply {
  if (reply.kind !== 'result' || reply.resultType !== 'input_required') return reply
  const inner = reply.result.requestState
  const requestState = seal.sealer.seal({
    sub: subjectOf(call.identity),
    dig: requestDigest(call.request.method, call.request.params),
    exp: Date.now() + seal.answerMs,
    c: 'ok',
    ...(typeof inner === 'string' ? { s: inner } : {}),
  })
  return { ...reply, result: { ...reply.result, requestState } }
}

/** The confirmation's answer: `accept`, `decline` or `cancel` (anything else counts as cancel). */
function answerOf(value: unknown): ConfirmationAnswer {
  const response = isPlainObject(value) && CONFIRM_INPUT in value ? value[CONFIRM_INPUT] : value
  const action = isPlainObject(response) ? response.action : undefined
  return action === 'accept' || action === 'decline' ? action : 'cancel'
}

function declined(what: string, answer: ConfirmationAnswer): string {
  return answer === 'decline'
    ? `The user declined the call of ${what}; it was not sent`
    : `The user cancelled the confirmation of ${what}; it was not sent`
}

/** What the question shows of a request: a tool's arguments, else its own params. */
function shownArguments(method: string, params: JsonObject): unknown {
  if (method === 'tools/call') return params.arguments ?? {}
  const { _meta, ...own } = strip(params)
  return own
}

/** An ERR_POLICY_DENIED for an unconfirmed call, with the answer on the call for the audit. */
function refusal(call: Call, answer: ConfirmationAnswer, message: string): BarbicanError {
  call.decisions?.push({ policy: 'confirm', effect: 'deny', answer })
  return new BarbicanError('ERR_POLICY_DENIED', message, { data: { confirmation: answer } })
}

function strip(params: JsonObject): JsonObject {
  const out: JsonObject = {}
  for (const [k, v] of Object.entries(params)) {
    if (k !== 'inputResponses' && k !== 'requestState') out[k] = v
  }
  return out
}

function withParams(call: Call, params: JsonObject): Call {
  return { ...call, request: { ...call.request, params } }
}

/**
 * The confirm policy's own state key, derived from BARBICAN_STATE_KEY (so replicas agree) but
 * distinct from the bridge's: a bridge state never opens as a confirmation.
 */
export function confirmStateKey(env: NodeJS.ProcessEnv = process.env): Buffer {
  return createHash('sha256')
    .update('barbican confirm state\n')
    .update(stateKeyFromEnv(env))
    .digest()
}
