/**
 * The `confirm` policy: a human confirms chosen tool calls before they reach the upstream, and
 * secure contexts stop the "lethal trifecta" (private data and untrusted content in one context,
 * then a call that can send data out). The question goes to the calling client: a legacy client
 * gets `elicitation/create` on its session; a 2026-07-28 client gets an `input_required` result
 * with a sealed `requestState` and answers on its retry. Accept sends the call on; decline,
 * cancel, no answer or a client that cannot be asked refuse it (never silent approval). Every
 * answer goes on `Call.decisions`, so the audit record carries it. See docs/policy.md and
 * docs/decisions/035-secure-contexts-and-confirmation.md.
 */
import { createHash, randomUUID } from 'node:crypto'
import picomatch from 'picomatch'
import {
  RequestStateSealer,
  requestDigest,
  stateKeyFromEnv,
  subjectOf,
} from '../bridge/request-state.ts'
import { toolDefinition } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { Request, Result } from '../protocol/model.ts'
import { type AnswerLedger, MemoryAnswerLedger } from './answer-ledger.ts'
import type { Call, ConfirmationAnswer, Next, Policy, Reply, UpstreamAsk } from './policy.ts'
import { type ContextsOptions, contextKey, SecureContexts } from './secure-contexts.ts'

/** Which calls need a human's confirmation (`confirm:` in the config). */
export interface ConfirmRule {
  /** Virtual servers (globs) the rule covers; absent: all. */
  readonly servers?: readonly string[] | undefined
  /** Tools by exposed name (globs). */
  readonly tools?: readonly string[] | undefined
  /** Also every tool whose annotations say `destructiveHint: true`. */
  readonly destructive?: boolean | undefined
}

export interface ConfirmOptions {
  readonly rule?: ConfirmRule | undefined
  /** Secure contexts (`contexts:`); absent: no labels are tracked. */
  readonly contexts?: (ContextsOptions & { readonly onTrifecta: 'deny' | 'confirm' }) | undefined
  /** The tracker of `contexts`, when another policy (cedar) reads it too; built when absent. */
  readonly tracker?: SecureContexts | undefined
  /** How long a 2026-07-28 client has to answer (the sealed state's lifetime). */
  readonly answerMs: number
  /** Seals the `requestState` of a question; by default keyed from BARBICAN_STATE_KEY. */
  readonly sealer?: RequestStateSealer | undefined
  /** Where answered questions are kept: this process by default, Redis in a fleet. */
  readonly ledger?: AnswerLedger | undefined
}

/** The key of Barbican's question among a round's `inputRequests`. */
export const CONFIRM_INPUT = 'barbican-confirm'

/** The labels whose meeting in one context makes an `egress` call dangerous. */
const TRIFECTA = ['private', 'untrusted'] as const

/** Requests that carry the client's own values to the upstream: an `egress` one can leak. */
const SENDS_ARGUMENTS: ReadonlySet<string> = new Set([
  'tools/call',
  'resources/read',
  'prompts/get',
  'completion/complete',
])

/** Requests a 2026-07-28 client can be asked about (`input_required`); the others are refused. */
const ASKABLE: ReadonlySet<string> = new Set(['tools/call', 'resources/read', 'prompts/get'])

export function confirmPolicy(options: ConfirmOptions): Policy {
  const rule = options.rule
  const servers = rule?.servers?.length ? picomatch([...rule.servers]) : () => true
  const tools = rule?.tools?.length ? picomatch([...rule.tools]) : () => false
  const contexts = options.contexts
    ? (options.tracker ?? new SecureContexts(options.contexts))
    : undefined
  const sealer = options.sealer ?? new RequestStateSealer(confirmStateKey())
  /** Questions already answered: a sealed question is answered once, fleet-wide in a fleet. */
  const ledger = options.ledger ?? new MemoryAnswerLedger()

  const needsRule = async (call: Call, name: string): Promise<boolean> => {
    if (rule === undefined || !servers(call.server)) return false
    if (tools(name)) return true
    if (!rule.destructive) return false
    const { route } = call
    const annotations =
      route.kind === 'unicast' ? toolDefinition(route.catalog, name)?.annotations : undefined
    return isPlainObject(annotations) && annotations.destructiveHint === true
  }

  return {
    name: 'confirm',
    async handle(call: Call, next: Next): Promise<Reply> {
      const { request, route } = call
      if (route.kind !== 'unicast') return await next(call)
      const { method } = request
      const name = itemName(request)
      const labels = contexts?.requestLabels(method, route.upstream, name, route.createdBy)
      if (method !== 'tools/call' && (labels === undefined || labels.size === 0)) {
        return await next(call)
      }
      const what = method === 'tools/call' ? `"${name}"` : `${method} of "${name}"`
      const key = contextKey(call.peer?.sessionId, call.identity)
      let why: string | undefined
      if (
        contexts &&
        labels?.has('egress') &&
        SENDS_ARGUMENTS.has(method) &&
        TRIFECTA.every((l) => contexts.holds(key, l))
      ) {
        if (options.contexts?.onTrifecta !== 'confirm' || !ASKABLE.has(method)) {
          call.decisions?.push({ policy: 'confirm', effect: 'deny', rule: 'contexts.trifecta' })
          throw new BarbicanError(
            'ERR_POLICY_DENIED',
            `${what} can send data out, and this context already holds private data and untrusted content: refused (contexts.onTrifecta = ${options.contexts?.onTrifecta ?? 'deny'}${ASKABLE.has(method) ? '' : `; ${method} cannot be confirmed`})`,
            { data: { reason: 'trifecta' } },
          )
        }
        why =
          'This conversation already holds private data and untrusted content, and this request can send data out.'
      } else if (method === 'tools/call' && (await needsRule(call, name))) {
        why = 'The operator asks for confirmation of this tool.'
      }
      if (labels !== undefined && labels.size > 0) contexts?.assertRoom(key)
      // A later round of a call confirmed before goes on without asking again.
      let forwarded = continuing(call)
      let confirmed = forwarded !== call
      if (why !== undefined && !confirmed) {
        const asked = await ask(call, what, route.upstream, why)
        if (asked.kind === 'question') return asked.reply
        forwarded = asked.call
        confirmed = true
      }
      const reply = await next(forwarded)
      if (labels !== undefined && labels.size > 0) contexts?.enter(key, labels)
      return confirmed ? rewrap(reply, call) : reply
    },
    // An upstream's sampling or elicitation request reaches the client (and its model) while
    // the call is still running: its upstream's labels enter before the client sees it, so a
    // call the model makes meanwhile is judged with them (ADR 104).
    upstreamAsked({ upstream, sessionId, identity }: UpstreamAsk): void {
      if (contexts === undefined) return
      contexts.enter(contextKey(sessionId, identity), contexts.upstreamLabels(upstream))
    },
  }

  /**
   * Asks the human. Resolves with the call to send on (accepted), or with the `input_required`
   * question for a 2026-07-28 client; throws ERR_POLICY_DENIED for every other outcome.
   */
  async function ask(
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
      const opened = openState(params.requestState, call, digest)
      if (opened?.asked === true) {
        await spend(opened.nonce, opened.exp)
        const answer = answerOf(params.inputResponses)
        if (answer !== 'accept') throw refusal(call, answer, declined(what, answer))
        call.decisions?.push({ policy: 'confirm', effect: 'allow', answer })
        return { kind: 'accepted', call: withParams(call, strip(params)) }
      }
      const requestState = sealer.seal({
        sub: subjectOf(call.identity),
        dig: digest,
        exp: Date.now() + options.answerMs,
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
  function continuing(call: Call): Call {
    const params = call.request.params
    if (call.peer?.era !== 'modern' || params?.requestState === undefined) return call
    const opened = openState(params.requestState, call, requestDigest(call.request.method, params))
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
      payload = sealer.open(token, call.identity, digest)
    } catch {
      return undefined
    }
    if (payload.c?.startsWith('ask:')) return { asked: true, nonce: payload.c, exp: payload.exp }
    if (payload.c === 'ok') return { asked: false, inner: payload.s }
    return undefined
  }

  /** Marks a question answered; a second answer to it is refused (no replay of an accept). */
  async function spend(nonce: string, exp: number): Promise<void> {
    if (!(await ledger.claim(nonce, exp))) {
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
  function rewrap(reply: Reply, call: Call): Reply {
    if (reply.kind !== 'result' || reply.resultType !== 'input_required') return reply
    const inner = reply.result.requestState
    const requestState = sealer.seal({
      sub: subjectOf(call.identity),
      dig: requestDigest(call.request.method, call.request.params),
      exp: Date.now() + options.answerMs,
      c: 'ok',
      ...(typeof inner === 'string' ? { s: inner } : {}),
    })
    return { ...reply, result: { ...reply.result, requestState } }
  }
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

/**
 * The name a request is about, for labels and messages: a tool or prompt name, a resource
 * URI, a completion's reference, a task id.
 */
function itemName(request: Request): string {
  const params = request.params
  const ref = params?.ref
  if (isPlainObject(ref)) return String(ref.name ?? ref.uri)
  return String(params?.name ?? params?.uri ?? params?.taskId)
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
