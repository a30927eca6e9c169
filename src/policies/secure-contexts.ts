/**
 * Secure contexts: which operator labels (`private`, `untrusted`, `egress`, …) have entered one
 * conversation's context. A context is a legacy session, or, for clients without a lasting
 * session (2026-07-28, stateless HTTP), the caller's identity and client together; a label stays
 * for `windowMs` after it last entered (docs/decisions/035-secure-contexts-and-confirmation.md).
 */
import picomatch from 'picomatch'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'

/** Where one label applies: whole upstreams, or tools by their exposed names (globs). */
export interface LabelRule {
  readonly upstreams?: readonly string[] | undefined
  readonly tools?: readonly string[] | undefined
}

export interface ContextsOptions {
  readonly labels: Readonly<Record<string, LabelRule>>
  /** How long a label stays in a context after it last entered. */
  readonly windowMs: number
  /** Most contexts tracked at once; beyond, labelled calls of new contexts are refused. */
  readonly maxContexts: number
}

/**
 * Client requests (besides tool calls and tasks) whose answer is an upstream's content that
 * reaches the model: a resource's contents, a prompt's messages, completion values.
 */
const CONTENT_METHODS: ReadonlySet<string> = new Set([
  'resources/read',
  'prompts/get',
  'completion/complete',
])

/** Context key → label → when it last entered (epoch ms). */
export type HeldLabels = Map<string, Map<string, number>>

/** Tracks the labels of every live context. */
export class SecureContexts {
  readonly #rules: readonly {
    readonly label: string
    readonly upstream: (name: string) => boolean
    readonly tool: (name: string) => boolean
  }[]
  readonly #windowMs: number
  readonly #max: number
  readonly #contexts: HeldLabels

  /**
   * `held`: the labels already entered, when a reload replaces the tracker (its rules may have
   * changed, what entered each context has not): a reload must not let a trifecta through.
   */
  constructor(options: ContextsOptions, held: HeldLabels = new Map()) {
    this.#contexts = held
    this.#rules = Object.entries(options.labels).map(([label, rule]) => ({
      label,
      upstream: (name: string) => rule.upstreams?.includes(name) ?? false,
      tool: rule.tools?.length ? picomatch([...rule.tools]) : () => false,
    }))
    this.#windowMs = options.windowMs
    this.#max = options.maxContexts
  }

  /** The labels of a tool (exposed name) on an upstream. */
  labelsOf(upstream: string, tool: string): ReadonlySet<string> {
    const labels = new Set<string>()
    for (const rule of this.#rules) {
      if (rule.upstream(upstream) || rule.tool(tool)) labels.add(rule.label)
    }
    return labels
  }

  /**
   * The labels a request brings into its context (docs/policy.md, "What each primitive adds";
   * ADR 104): a tool call and a task's result carry the tool's labels; a resource read, a
   * prompt and a completion carry their upstream's, since the operator labels upstreams by the
   * content they serve. Undefined for a method that brings no upstream content in.
   */
  requestLabels(
    method: string,
    upstream: string,
    name: string,
    createdBy?: string,
  ): ReadonlySet<string> | undefined {
    if (method === 'tools/call') return this.labelsOf(upstream, name)
    if (method === 'tasks/result' || method === 'tasks/get') {
      return createdBy === undefined
        ? this.upstreamLabels(upstream)
        : this.labelsOf(upstream, createdBy)
    }
    if (CONTENT_METHODS.has(method)) return this.upstreamLabels(upstream)
    return undefined
  }

  /** The labels of an upstream alone (its items' labels include these). */
  upstreamLabels(upstream: string): ReadonlySet<string> {
    const labels = new Set<string>()
    for (const rule of this.#rules) if (rule.upstream(upstream)) labels.add(rule.label)
    return labels
  }

  /** The labels that entered the context `key` within the window, sorted. */
  held(key: string, now = Date.now()): string[] {
    const context = this.#contexts.get(key)
    if (context === undefined) return []
    const labels: string[] = []
    for (const [label, at] of context) if (now - at < this.#windowMs) labels.push(label)
    return labels.sort()
  }

  /** True when `label` entered the context `key` within the window. */
  holds(key: string, label: string, now = Date.now()): boolean {
    const at = this.#contexts.get(key)?.get(label)
    return at !== undefined && now - at < this.#windowMs
  }

  /**
   * Refuses (ERR_POLICY_DENIED) a labelled call of a new context when no room is left, before
   * it is sent: forgetting a context could let a trifecta through, so it fails closed.
   */
  assertRoom(key: string, now = Date.now()): void {
    if (this.#contexts.has(key) || this.#contexts.size < this.#max) return
    this.#sweep(now)
    if (this.#contexts.size < this.#max) return
    throw new BarbicanError(
      'ERR_POLICY_DENIED',
      `Too many secure contexts are tracked (contexts.maxContexts = ${this.#max}); labelled calls of new contexts are refused until older ones expire`,
    )
  }

  /** Records that `labels` entered the context `key`. */
  enter(key: string, labels: ReadonlySet<string>, now = Date.now()): void {
    if (labels.size === 0) return
    let context = this.#contexts.get(key)
    if (context === undefined) {
      context = new Map()
      this.#contexts.set(key, context)
    }
    for (const label of labels) context.set(label, now)
  }

  #sweep(now: number): void {
    for (const [key, context] of this.#contexts) {
      let live = false
      for (const at of context.values()) if (now - at < this.#windowMs) live = true
      if (!live) this.#contexts.delete(key)
    }
  }
}

/**
 * The context a call belongs to: its legacy session, or its caller's identity and client
 * (2026-07-28 and stateless clients have no session to hold it).
 */
export function contextKey(sessionId: string | undefined, identity: Identity): string {
  if (sessionId !== undefined) return `session:${sessionId}`
  const who =
    identity.tenant === undefined ? identity.subject : `${identity.tenant}/${identity.subject}`
  return `identity:${who}|client:${identity.client ?? ''}`
}
