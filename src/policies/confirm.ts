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
import picomatch from 'picomatch'
import { RequestStateSealer } from '../bridge/request-state.ts'
import { toolDefinition } from '../catalog/catalog.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject } from '../protocol/jsonrpc.ts'
import type { Request } from '../protocol/model.ts'
import { type AnswerLedger, MemoryAnswerLedger } from './answer-ledger.ts'
import { ask, type ConfirmSeal, confirmStateKey, continuing, rewrap } from './confirm-question.ts'
import type { Call, Next, Policy, Reply, UpstreamAsk } from './policy.ts'
import { type ContextsOptions, contextKey, SecureContexts } from './secure-contexts.ts'

export { CONFIRM_INPUT, confirmStateKey } from './confirm-question.ts'

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
  const seal: ConfirmSeal = {
    sealer: options.sealer ?? new RequestStateSealer(confirmStateKey()),
    ledger: options.ledger ?? new MemoryAnswerLedger(),
    answerMs: options.answerMs,
  }

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
      let forwarded = continuing(seal, call)
      let confirmed = forwarded !== call
      if (why !== undefined && !confirmed) {
        const asked = await ask(seal, call, what, route.upstream, why)
        if (asked.kind === 'question') return asked.reply
        forwarded = asked.call
        confirmed = true
      }
      const reply = await next(forwarded)
      if (labels !== undefined && labels.size > 0) contexts?.enter(key, labels)
      return confirmed ? rewrap(seal, reply, call) : reply
    },
    // An upstream's sampling or elicitation request reaches the client (and its model) while
    // the call is still running: its upstream's labels enter before the client sees it, so a
    // call the model makes meanwhile is judged with them (ADR 104).
    upstreamAsked({ upstream, sessionId, identity }: UpstreamAsk): void {
      if (contexts === undefined) return
      contexts.enter(contextKey(sessionId, identity), contexts.upstreamLabels(upstream))
    },
  }
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
