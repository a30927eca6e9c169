/**
 * Cedar, the policy language of the `cedar` policy (ADR 034): loads the operator's policy files,
 * validates them against the schema Barbican ships (cedar-schema.ts), and answers one request
 * with the decision and the ids of the policies that decided it. The WebAssembly module loads on
 * first use, so a gateway without Cedar policies never pays for it.
 */
import { readFileSync } from 'node:fs'
import type { CedarValueJson, EntityJson } from '@cedar-policy/cedar-wasm/nodejs'
import type { Identity } from '../auth/identity.ts'
import { BarbicanError } from '../common/errors.ts'
import { cedar } from '../common/lazy-deps.ts'
import type { JsonObject } from '../protocol/jsonrpc.ts'
import { CEDAR_SCHEMA } from './cedar-schema.ts'

/** The actions of the schema: what a request does to what it names. */
export type CedarAction = 'list' | 'call' | 'get' | 'read' | 'subscribe' | 'complete'

/** What a request acts on: the virtual server itself, or one of its items. */
export type CedarTarget =
  | { readonly kind: 'server' }
  | {
      readonly kind: 'tool' | 'prompt' | 'resource'
      /** The exposed name (a resource's judged exposed URI). */
      readonly name: string
      readonly upstream?: string | undefined
      readonly annotations?: JsonObject | undefined
      /** Absent: `unpinned`. */
      readonly pinState?: PinState | undefined
      /** The operator labels of the item (contexts.labels), its upstream's included. */
      readonly labels?: readonly string[] | undefined
      /** The operator labels of its upstream alone. */
      readonly upstreamLabels?: readonly string[] | undefined
    }

/** Whether an item is served as approved (ADR 006; docs/policy.md "What a policy sees"). */
export type PinState = 'pinned' | 'changed' | 'unpinned'

export interface CedarQuery {
  readonly identity: Identity
  readonly server: string
  readonly action: CedarAction
  readonly target: CedarTarget
  readonly transport: string
  readonly method: string
  readonly arguments?: JsonObject | undefined
  /** Seconds since the epoch; now when absent. */
  readonly time?: number | undefined
  /** The labels that entered the caller's secure context (context.labels). */
  readonly sessionLabels?: readonly string[] | undefined
}

export interface CedarDecision {
  readonly allowed: boolean
  /** Ids (`file#n`) of the policies that decided: the permits of an allow, the forbids of a deny. */
  readonly reasons: readonly string[]
  /** Policies that failed to evaluate (they count as not applying). */
  readonly errors: readonly string[]
  /** Cedar could not evaluate the request at all: denied, and never cached. */
  readonly failed?: true
}

/** One policy of a file, by its id `file#n` (n counts from 1 in the file). */
export interface CedarPolicyText {
  readonly id: string
  readonly text: string
}

/** The policies of `files`, each under its id; a file that cannot be read or parsed throws. */
export function readPolicyFiles(files: readonly string[]): CedarPolicyText[] {
  const out: CedarPolicyText[] = []
  for (const file of files) {
    let text: string
    try {
      text = readFileSync(file, 'utf8')
    } catch (err) {
      throw invalid(`cannot read Cedar policy file ${file}: ${(err as Error).message}`)
    }
    const parts = cedar().policySetTextToParts(text)
    if (parts.type === 'failure') {
      throw invalid(`${file}: ${parts.errors.map((e) => e.message).join('; ')}`)
    }
    // Cedar returns the policies ordered by its own ids (policy0, policy1, policy10, …): put
    // them back in the order of the file, so `#n` is the n-th policy a reader counts.
    const taken = new Set<number>()
    const at = (policy: string): number => {
      let from = 0
      for (;;) {
        const index = text.indexOf(policy, from)
        if (index < 0 || !taken.has(index)) {
          if (index >= 0) taken.add(index)
          return index
        }
        from = index + 1
      }
    }
    const ordered = parts.policies
      .map((policy) => ({ policy, index: at(policy) }))
      .sort((a, b) => a.index - b.index)
    ordered.forEach(({ policy }, i) => {
      out.push({ id: `${file}#${i + 1}`, text: policy })
    })
  }
  return out
}

/** Every way the policies break the schema, one line each (`file#n: message`); [] when valid. */
export function validatePolicies(policies: readonly CedarPolicyText[]): string[] {
  const answer = cedar().validate({
    schema: CEDAR_SCHEMA,
    policies: { staticPolicies: Object.fromEntries(policies.map((p) => [p.id, p.text])) },
  })
  if (answer.type === 'failure') return answer.errors.map((e) => e.message)
  return answer.validationErrors.map(
    (e) => `${e.policyId}: ${e.error.message}${e.error.help ? ` (${e.error.help})` : ''}`,
  )
}

let nextSetId = 0

/**
 * What a policy's condition reads of the context that changes from one call to the next: such a
 * policy is judged on every call; every other policy's verdict depends only on the principal,
 * action, resource and the rest of the context, and is cached (ADR 045).
 */
const PER_CALL_CONTEXT = new Set(['arguments', 'time'])

/** Most cached decisions per catalog; beyond, the cache starts afresh. */
const DECISIONS_PER_CATALOG = 10_000

/** A scope test Barbican can rule out before asking Cedar: `==` / `in [..]` / `is`. */
interface ScopeFilter {
  readonly principal?: string | undefined
  readonly actions?: ReadonlySet<string> | undefined
  readonly resource?: string | undefined
  readonly resourceType?: string | undefined
}

/** One pre-parsed part of the policy set. */
interface PartialSet {
  readonly id: string
  /** Per policy of the part, what its scope can be ruled out by (per-call part only). */
  readonly scopes: readonly ScopeFilter[]
}

/** Where a cached decision is kept: one map per catalog, dropped with it. */
export type DecisionScope = object

/**
 * An evaluator for one policy set. The set is split in two pre-parsed parts (ADR 045): the
 * policies whose conditions read `context.arguments` or `context.time` are judged on every call
 * (and only when their scope can match the request); the others are judged once per principal,
 * action, resource and context and the decision cached per catalog, so that a change of catalog
 * (a list, a pin decision) starts afresh. The two verdicts combine as Cedar combines policies:
 * a matching `forbid` denies, else a matching `permit` allows, else deny.
 */
export class CedarEngine {
  readonly policies: readonly CedarPolicyText[]
  readonly #steady: PartialSet | undefined
  readonly #perCall: PartialSet | undefined
  readonly #cache = new WeakMap<DecisionScope, Map<string, CedarDecision>>()
  readonly #identityKeys = new WeakMap<Identity, string>()

  /** `split: false` judges the whole set in one part: the reference the tests compare with. */
  constructor(policies: readonly CedarPolicyText[], options: { split?: boolean } = {}) {
    this.policies = policies
    const steady: CedarPolicyText[] = []
    const perCall: { policy: CedarPolicyText; scope: ScopeFilter }[] = []
    let readsLabels = false
    for (const policy of policies) {
      const json = cedar().policyToJson(policy.text)
      if (json.type === 'failure') throw invalid(json.errors.map((e) => e.message).join('; '))
      const body = json.json as unknown as PolicyJsonShape
      const reads = contextReads(body.conditions)
      if (reads.has('*') || reads.has('labels')) readsLabels = true
      if (options.split === false) continue
      if (reads.has('*') || [...PER_CALL_CONTEXT].some((a) => reads.has(a))) {
        perCall.push({ policy, scope: scopeOf(body) })
      } else steady.push(policy)
    }
    this.readsSessionLabels = readsLabels
    this.#steady = preparse(options.split === false ? policies : steady, [])
    this.#perCall = preparse(
      perCall.map((p) => p.policy),
      perCall.map((p) => p.scope),
    )
  }

  /** Whether some policy reads `context.labels` (the caller's secure context). */
  readonly readsSessionLabels: boolean

  /** Whether some policy reads the call's arguments or time (and is judged on every call). */
  get perCall(): boolean {
    return this.#perCall !== undefined
  }

  /**
   * The decision on `query`. With `scope` (the catalog the target was read from), the part of the
   * decision that does not depend on the call is cached in it; without, nothing is cached.
   */
  decide(query: CedarQuery, scope?: DecisionScope): CedarDecision {
    const steady = this.#steadyDecision(query, scope)
    // A forbid of the steady part denies whatever the per-call part says; so does a failure.
    if (steady.failed || (!steady.allowed && steady.reasons.length > 0)) return steady
    const perCall = this.#perCall
    if (perCall === undefined || !perCall.scopes.some((s) => mayApply(s, query))) return steady
    const now = evaluate(perCall.id, query)
    if (now.failed || (!now.allowed && now.reasons.length > 0))
      return withErrors(now, steady.errors)
    if (steady.allowed || now.allowed) {
      return {
        allowed: true,
        reasons: [...steady.reasons, ...now.reasons],
        errors: [...steady.errors, ...now.errors],
      }
    }
    return { allowed: false, reasons: [], errors: [...steady.errors, ...now.errors] }
  }

  #steadyDecision(query: CedarQuery, scope: DecisionScope | undefined): CedarDecision {
    const steady = this.#steady
    if (steady === undefined) return { allowed: false, reasons: [], errors: [] }
    if (scope === undefined) return evaluate(steady.id, query)
    let decisions = this.#cache.get(scope)
    if (decisions === undefined) {
      decisions = new Map()
      this.#cache.set(scope, decisions)
    }
    const key = this.#keyOf(query)
    let decision = decisions.get(key)
    if (decision === undefined) {
      decision = evaluate(steady.id, query)
      if (decision.failed) return decision
      if (decisions.size >= DECISIONS_PER_CATALOG) decisions.clear()
      decisions.set(key, decision)
    }
    return decision
  }

  /** Everything a steady policy can read of a query (the catalog supplies the rest). */
  #keyOf(query: CedarQuery): string {
    let identity = this.#identityKeys.get(query.identity)
    if (identity === undefined) {
      const { subject, tenant, client, scopes, method, claims } = query.identity
      identity = JSON.stringify([subject, tenant, client, scopes, method, claims])
      this.#identityKeys.set(query.identity, identity)
    }
    const t = query.target
    const item = t.kind === 'server' ? '' : `${t.kind}\u0000${t.name}\u0000${t.upstream ?? ''}`
    const labels = query.sessionLabels?.length ? [...query.sessionLabels].sort().join(',') : ''
    return `${identity}\u0000${labels}\u0000${query.server}\u0000${query.transport}\u0000${query.method}\u0000${query.action}\u0000${item}`
  }
}

function withErrors(decision: CedarDecision, errors: readonly string[]): CedarDecision {
  return errors.length === 0 ? decision : { ...decision, errors: [...errors, ...decision.errors] }
}

function preparse(
  policies: readonly CedarPolicyText[],
  scopes: readonly ScopeFilter[],
): PartialSet | undefined {
  if (policies.length === 0) return undefined
  const id = `barbican-${nextSetId++}`
  const parsed = cedar().preparsePolicySet(id, {
    staticPolicies: Object.fromEntries(policies.map((p) => [p.id, p.text])),
  })
  if (parsed.type === 'failure') throw invalid(parsed.errors.map((e) => e.message).join('; '))
  return { id, scopes }
}

/** One `statefulIsAuthorized` call on a pre-parsed set. */
function evaluate(setId: string, query: CedarQuery): CedarDecision {
  const { principal, entities } = principalOf(query.identity)
  const { resource, entities: resourceEntities } = resourceOf(query.server, query.target)
  const args = uid('Arguments', 'call')
  entities.push(...resourceEntities, {
    uid: args,
    attrs: {},
    parents: [],
    tags: argumentTags(query.arguments),
  })
  const answer = cedar().statefulIsAuthorized({
    principal,
    action: { type: 'Barbican::Action', id: query.action },
    resource,
    context: {
      server: query.server,
      transport: query.transport,
      method: query.method,
      time: query.time ?? Math.floor(Date.now() / 1000),
      arguments: { __entity: args },
      labels: [...(query.sessionLabels ?? [])],
    },
    preparsedPolicySetId: setId,
    entities,
  })
  if (answer.type === 'failure') {
    // Fail closed: a request Cedar cannot evaluate is denied.
    return {
      allowed: false,
      reasons: [],
      errors: answer.errors.map((e) => e.message),
      failed: true,
    }
  }
  const { decision, diagnostics } = answer.response
  return {
    allowed: decision === 'allow',
    reasons: diagnostics.reason,
    errors: diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`),
  }
}

/** The parts of Cedar's policy JSON the split reads. */
interface PolicyJsonShape {
  readonly principal: ScopeJson
  readonly action: ScopeJson
  readonly resource: ScopeJson
  readonly conditions: readonly unknown[]
}

interface ScopeJson {
  readonly op: string
  readonly entity?: { readonly type: string; readonly id: string }
  readonly entities?: readonly { readonly type: string; readonly id: string }[]
  readonly entity_type?: string
}

/**
 * The context attributes an expression reads (`context.x`, `context has x`); `*` when it uses the
 * context in a way this walk cannot see through (the whole record), which counts as reading all.
 */
function contextReads(node: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(node)) {
    for (const n of node) contextReads(n, into)
    return into
  }
  if (node === null || typeof node !== 'object') return into
  const record = node as Record<string, unknown>
  if (record.Var === 'context') into.add('*')
  for (const [key, value] of Object.entries(record)) {
    if ((key === '.' || key === 'has') && value !== null && typeof value === 'object') {
      const access = value as { left?: unknown; attr?: unknown }
      if ((access.left as Record<string, unknown> | undefined)?.Var === 'context') {
        into.add(String(access.attr))
        continue
      }
    }
    contextReads(value, into)
  }
  return into
}

const entityKey = (e: { type: string; id: string }) => `${e.type}\u0000${e.id}`

function scopeOf(policy: PolicyJsonShape): ScopeFilter {
  const { principal, action, resource } = policy
  return {
    principal: principal.op === '==' && principal.entity ? entityKey(principal.entity) : undefined,
    actions:
      action.op === '==' && action.entity
        ? new Set([action.entity.id])
        : action.op === 'in' && action.entities
          ? new Set(action.entities.map((e) => e.id))
          : undefined,
    resource: resource.op === '==' && resource.entity ? entityKey(resource.entity) : undefined,
    resourceType: resource.op === 'is' ? resource.entity_type : undefined,
  }
}

/** False only when the policy's scope surely excludes the request; true when it may match. */
function mayApply(scope: ScopeFilter, query: CedarQuery): boolean {
  if (scope.actions && !scope.actions.has(query.action)) return false
  if (scope.principal && scope.principal !== entityKey(uid('User', query.identity.subject)))
    return false
  if (scope.resource || scope.resourceType) {
    const t = query.target
    const type = `Barbican::${t.kind === 'server' ? 'Server' : ITEM_TYPES[t.kind]}`
    if (scope.resourceType && scope.resourceType !== type) return false
    const id = t.kind === 'server' ? query.server : t.name
    if (scope.resource && scope.resource !== `${type}\u0000${id}`) return false
  }
  return true
}

function invalid(message: string): BarbicanError {
  return new BarbicanError('ERR_CONFIG_INVALID', message)
}

const uid = (type: string, id: string) => ({ type: `Barbican::${type}`, id })

function principalOf(identity: Identity): {
  principal: ReturnType<typeof uid>
  entities: EntityJson[]
} {
  const principal = uid('User', identity.subject)
  const parents: ReturnType<typeof uid>[] = []
  const entities: EntityJson[] = []
  const groups = identity.claims?.groups
  for (const group of Array.isArray(groups) ? groups : []) {
    if (typeof group !== 'string') continue
    parents.push(uid('Group', group))
    entities.push({ uid: uid('Group', group), attrs: {}, parents: [] })
  }
  if (identity.tenant !== undefined) {
    parents.push(uid('Tenant', identity.tenant))
    entities.push({ uid: uid('Tenant', identity.tenant), attrs: {}, parents: [] })
  }
  const attrs: Record<string, CedarValueJson> = {
    scopes: [...identity.scopes],
    authMethod: identity.method,
  }
  if (identity.tenant !== undefined) attrs.tenant = identity.tenant
  if (identity.client !== undefined) attrs.client = identity.client
  // Claims are tags: any claim name can be tested (`principal.hasTag("dept")`).
  const tags: Record<string, CedarValueJson> = {}
  for (const [name, value] of Object.entries(identity.claims ?? {})) tags[name] = tagValue(value)
  entities.push({ uid: principal, attrs, parents, tags })
  return { principal, entities }
}

const ITEM_TYPES = { tool: 'Tool', prompt: 'Prompt', resource: 'Resource' } as const

const ANNOTATION_TYPES: Readonly<Record<string, 'string' | 'boolean'>> = {
  title: 'string',
  readOnlyHint: 'boolean',
  destructiveHint: 'boolean',
  idempotentHint: 'boolean',
  openWorldHint: 'boolean',
}

function resourceOf(
  server: string,
  target: CedarTarget,
): { resource: ReturnType<typeof uid>; entities: EntityJson[] } {
  const serverUid = uid('Server', server)
  const entities: EntityJson[] = [{ uid: serverUid, attrs: {}, parents: [] }]
  if (target.kind === 'server') return { resource: serverUid, entities }
  const parents = [serverUid]
  if (target.upstream !== undefined) {
    const upstreamUid = uid('Upstream', target.upstream)
    parents.push(upstreamUid)
    entities.push({
      uid: upstreamUid,
      attrs: { labels: [...(target.upstreamLabels ?? [])] },
      parents: [serverUid],
    })
  }
  const resource = uid(ITEM_TYPES[target.kind], target.name)
  const attrs: Record<string, CedarValueJson> = {
    [target.kind === 'resource' ? 'uri' : 'name']: target.name,
    upstream: target.upstream ?? '',
    pinState: target.pinState ?? 'unpinned',
    labels: [...(target.labels ?? [])],
  }
  if (target.kind === 'tool') {
    // Only well-typed annotations: an upstream's odd value must not break evaluation.
    const annotations: Record<string, CedarValueJson> = {}
    for (const [key, value] of Object.entries(target.annotations ?? {})) {
      if (typeof value === ANNOTATION_TYPES[key]) annotations[key] = value as CedarValueJson
    }
    attrs.annotations = annotations
  }
  entities.push({ uid: resource, attrs, parents })
  return { resource, entities }
}

function argumentTags(args: JsonObject | undefined): Record<string, CedarValueJson> {
  const tags: Record<string, CedarValueJson> = {}
  for (const [name, value] of Object.entries(args ?? {})) tags[name] = tagValue(value)
  return tags
}

/** A tag is a string: strings as they are, every other value as its JSON text. */
function tagValue(value: unknown): string {
  return typeof value === 'string' ? value : (JSON.stringify(value) ?? 'null')
}
