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
    }

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
}

export interface CedarDecision {
  readonly allowed: boolean
  /** Ids (`file#n`) of the policies that decided: the permits of an allow, the forbids of a deny. */
  readonly reasons: readonly string[]
  /** Policies that failed to evaluate (they count as not applying). */
  readonly errors: readonly string[]
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

/** An evaluator for one policy set, parsed once into the module's cache. */
export class CedarEngine {
  readonly #setId = `barbican-${nextSetId++}`
  readonly policies: readonly CedarPolicyText[]

  constructor(policies: readonly CedarPolicyText[]) {
    this.policies = policies
    const parsed = cedar().preparsePolicySet(this.#setId, {
      staticPolicies: Object.fromEntries(policies.map((p) => [p.id, p.text])),
    })
    if (parsed.type === 'failure') {
      throw invalid(parsed.errors.map((e) => e.message).join('; '))
    }
  }

  decide(query: CedarQuery): CedarDecision {
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
      },
      preparsedPolicySetId: this.#setId,
      entities,
    })
    if (answer.type === 'failure') {
      // Fail closed: a request Cedar cannot evaluate is denied.
      return { allowed: false, reasons: [], errors: answer.errors.map((e) => e.message) }
    }
    const { decision, diagnostics } = answer.response
    return {
      allowed: decision === 'allow',
      reasons: diagnostics.reason,
      errors: diagnostics.errors.map((e) => `${e.policyId}: ${e.error.message}`),
    }
  }
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
    entities.push({ uid: upstreamUid, attrs: {}, parents: [serverUid] })
  }
  const resource = uid(ITEM_TYPES[target.kind], target.name)
  const attrs: Record<string, CedarValueJson> = {
    [target.kind === 'resource' ? 'uri' : 'name']: target.name,
    upstream: target.upstream ?? '',
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
