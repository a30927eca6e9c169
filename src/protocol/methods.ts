/**
 * Which methods and notifications exist in which revision, who sends them, and the capability
 * that gates each. The table mirrors the ClientRequest/ServerRequest/…Notification unions of each
 * revision's official schema (checked mechanically by methods.test.ts).
 */
import type { JsonObject } from './jsonrpc.ts'
import { REVISIONS, type Revision } from './revisions.ts'

export type Direction = 'toServer' | 'toClient' | 'both'
export type MethodKind = 'request' | 'notification'

/** Where a capability lives: on the server's side (advertised) or the client's (declared). */
export interface CapabilityGate {
  readonly side: 'server' | 'client'
  /** Path in the capabilities object, e.g. ['resources', 'subscribe']. */
  readonly path: readonly string[]
  /**
   * First revision that defines the capability; before it the method is ungated (2024-11-05
   * has `completion/complete` but no `completions` capability).
   */
  readonly since?: Revision
}

export interface MethodSpec {
  readonly method: string
  readonly kind: MethodKind
  readonly direction: Direction
  /** Revisions where the method is a standalone JSON-RPC message. */
  readonly revisions: readonly Revision[]
  readonly gate?: CapabilityGate
  /** 2026-07-28: may answer with an `input_required` result (multi round-trip). */
  readonly mrtr?: boolean
  /** 2026-07-28: complete results carry `ttlMs` and `cacheScope`. */
  readonly cacheable?: boolean
  /** The params member naming the target, mirrored in the 2026 `Mcp-Name` header. */
  readonly nameParam?: 'name' | 'uri'
  /**
   * The params members the method defines in any revision, besides `_meta` (which every method
   * has). Only these are forwarded upstream: a smuggled `"Name"` or `"name "` beside `name` never
   * reaches an upstream that might read keys loosely.
   */
  readonly params: readonly string[]
  /** A request Barbican answers with a merged list: the key of the list in its result. */
  readonly list?: ListKey
  /** A request that goes to the one upstream owning what it names (virtual-servers/route.ts). */
  readonly target?: Target
}

/** The key of each merged list in its result (`tools/list` → `tools`). */
export type ListKey = 'tools' | 'prompts' | 'resources' | 'resourceTemplates'

/**
 * What a request addresses in one upstream, and the params member that names it: a tool, prompt
 * or resource of the catalog, a task the session created, or a completion reference (`ref`,
 * naming a prompt or a resource).
 */
export type Target =
  | { readonly kind: 'tool' | 'prompt'; readonly param: 'name' }
  | { readonly kind: 'resource'; readonly param: 'uri' }
  | { readonly kind: 'task'; readonly param: 'taskId' }
  | { readonly kind: 'reference'; readonly param: 'ref' }

const ALL = REVISIONS
const LEGACY: readonly Revision[] = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']
const FROM_2025_06: readonly Revision[] = ['2025-06-18', '2025-11-25']
const ONLY_2025_11: readonly Revision[] = ['2025-11-25']
const MODERN: readonly Revision[] = ['2026-07-28']

const server = (...path: string[]): CapabilityGate => ({ side: 'server', path })
const client = (...path: string[]): CapabilityGate => ({ side: 'client', path })

const SPECS = [
  {
    method: 'initialize',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    params: ['protocolVersion', 'capabilities', 'clientInfo'],
  },
  {
    method: 'notifications/initialized',
    kind: 'notification',
    direction: 'toServer',
    revisions: LEGACY,
    params: [],
  },
  { method: 'ping', kind: 'request', direction: 'both', revisions: LEGACY, params: [] },
  {
    method: 'notifications/cancelled',
    kind: 'notification',
    direction: 'both',
    revisions: ALL,
    params: ['requestId', 'reason'],
  },
  {
    method: 'notifications/progress',
    kind: 'notification',
    direction: 'both',
    revisions: ALL,
    params: ['progressToken', 'progress', 'total', 'message'],
  },
  {
    method: 'completion/complete',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: { ...server('completions'), since: '2025-03-26' },
    params: ['ref', 'argument', 'context'],
    target: { kind: 'reference', param: 'ref' },
  },
  {
    method: 'logging/setLevel',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('logging'),
    params: ['level'],
  },
  {
    method: 'notifications/message',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('logging'),
    params: ['level', 'logger', 'data'],
  },
  {
    method: 'resources/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('resources'),
    cacheable: true,
    params: ['cursor'],
    list: 'resources',
  },
  {
    method: 'resources/templates/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('resources'),
    cacheable: true,
    params: ['cursor'],
    list: 'resourceTemplates',
  },
  {
    method: 'resources/read',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('resources'),
    cacheable: true,
    mrtr: true,
    nameParam: 'uri',
    params: ['uri', 'inputResponses', 'requestState'],
    target: { kind: 'resource', param: 'uri' },
  },
  {
    method: 'resources/subscribe',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('resources', 'subscribe'),
    params: ['uri'],
    target: { kind: 'resource', param: 'uri' },
  },
  {
    method: 'resources/unsubscribe',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('resources', 'subscribe'),
    params: ['uri'],
    target: { kind: 'resource', param: 'uri' },
  },
  {
    method: 'notifications/resources/updated',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('resources', 'subscribe'),
    params: ['uri'],
  },
  {
    method: 'notifications/resources/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('resources', 'listChanged'),
    params: [],
  },
  {
    method: 'prompts/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('prompts'),
    cacheable: true,
    params: ['cursor'],
    list: 'prompts',
  },
  {
    method: 'prompts/get',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('prompts'),
    mrtr: true,
    nameParam: 'name',
    params: ['name', 'arguments', 'inputResponses', 'requestState'],
    target: { kind: 'prompt', param: 'name' },
  },
  {
    method: 'notifications/prompts/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('prompts', 'listChanged'),
    params: [],
  },
  {
    method: 'tools/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('tools'),
    cacheable: true,
    params: ['cursor'],
    list: 'tools',
  },
  {
    method: 'tools/call',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('tools'),
    mrtr: true,
    nameParam: 'name',
    params: ['name', 'arguments', 'task', 'inputResponses', 'requestState'],
    target: { kind: 'tool', param: 'name' },
  },
  {
    method: 'notifications/tools/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('tools', 'listChanged'),
    params: [],
  },
  {
    method: 'sampling/createMessage',
    kind: 'request',
    direction: 'toClient',
    revisions: LEGACY,
    gate: client('sampling'),
    params: [
      'messages',
      'modelPreferences',
      'systemPrompt',
      'includeContext',
      'temperature',
      'maxTokens',
      'stopSequences',
      'metadata',
      'tools',
      'toolChoice',
      'task',
    ],
  },
  {
    method: 'roots/list',
    kind: 'request',
    direction: 'toClient',
    revisions: LEGACY,
    gate: client('roots'),
    params: [],
  },
  {
    method: 'notifications/roots/list_changed',
    kind: 'notification',
    direction: 'toServer',
    revisions: LEGACY,
    gate: client('roots', 'listChanged'),
    params: [],
  },
  {
    method: 'elicitation/create',
    kind: 'request',
    direction: 'toClient',
    revisions: FROM_2025_06,
    gate: client('elicitation'),
    params: ['mode', 'message', 'requestedSchema', 'url', 'elicitationId', 'task'],
  },
  {
    method: 'notifications/elicitation/complete',
    kind: 'notification',
    direction: 'toClient',
    revisions: ONLY_2025_11,
    gate: client('elicitation', 'url'),
    params: ['elicitationId'],
  },
  {
    method: 'tasks/get',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
    params: ['taskId'],
    target: { kind: 'task', param: 'taskId' },
  },
  {
    method: 'tasks/result',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
    params: ['taskId'],
    target: { kind: 'task', param: 'taskId' },
  },
  {
    method: 'tasks/list',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks', 'list'),
    params: ['cursor'],
  },
  {
    method: 'tasks/cancel',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks', 'cancel'),
    params: ['taskId'],
    target: { kind: 'task', param: 'taskId' },
  },
  {
    method: 'notifications/tasks/status',
    kind: 'notification',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
    params: [
      'taskId',
      'status',
      'statusMessage',
      'createdAt',
      'lastUpdatedAt',
      'ttl',
      'pollInterval',
    ],
  },
  {
    method: 'server/discover',
    kind: 'request',
    direction: 'toServer',
    revisions: MODERN,
    cacheable: true,
    params: [],
  },
  {
    method: 'subscriptions/listen',
    kind: 'request',
    direction: 'toServer',
    revisions: MODERN,
    params: ['notifications'],
  },
  {
    method: 'notifications/subscriptions/acknowledged',
    kind: 'notification',
    direction: 'toClient',
    revisions: MODERN,
    params: ['notifications'],
  },
] as const satisfies readonly MethodSpec[]

type Spec = (typeof SPECS)[number]

/** Every method of every revision: one row of the table above. */
export type Method = Spec['method']
/** A request a client sends (to a server, or either way). */
export type ClientRequestMethod = Extract<
  Spec,
  { kind: 'request'; direction: 'toServer' | 'both' }
>['method']
/** A request answered with a merged list of every upstream's items. */
export type ListMethod = Extract<Spec, { list: ListKey }>['method']
/** A request relayed to the one upstream owning what it names. */
export type UnicastMethod = Extract<Spec, { target: Target }>['method']
/** A client request Barbican answers itself: neither a merged list nor relayed. */
export type LocalMethod = Exclude<ClientRequestMethod, ListMethod | UnicastMethod>

const BY_METHOD: ReadonlyMap<string, MethodSpec> = new Map(SPECS.map((s) => [s.method, s]))

/** Every method Barbican knows, in any revision. */
export const METHOD_SPECS: readonly MethodSpec[] = SPECS

export function methodSpec(method: string): MethodSpec | undefined {
  return BY_METHOD.get(method)
}

/** True when `method` is a row of the table (in some revision). */
export function isMethod(method: string): method is Method {
  return BY_METHOD.has(method)
}

/**
 * The params `method` defines, copied without anything else but `_meta`; undefined params stay
 * undefined. What a client adds beyond the schema is dropped here rather than forwarded.
 */
export function definedParams(
  method: Method,
  params: JsonObject | undefined,
): JsonObject | undefined {
  if (params === undefined) return undefined
  const spec = BY_METHOD.get(method)!
  const out: JsonObject = {}
  if (Object.hasOwn(params, '_meta')) out._meta = params._meta
  for (const key of spec.params) if (Object.hasOwn(params, key)) out[key] = params[key]
  return out
}

/** True when `method` is a standalone message of `revision`. */
export function existsIn(method: string, revision: Revision): boolean {
  return BY_METHOD.get(method)?.revisions.includes(revision) ?? false
}

/** The capability gating `method` in `revision`, or undefined when nothing gates it there. */
export function gateIn(method: string, revision: Revision): CapabilityGate | undefined {
  const gate = BY_METHOD.get(method)?.gate
  if (gate?.since !== undefined && revision < gate.since) return undefined
  return gate
}

/**
 * 2026-07-28 embeds these server→client requests in `input_required` results instead of sending
 * them as JSON-RPC requests.
 */
export const EMBEDDED_INPUT_METHODS: readonly string[] = [
  'elicitation/create',
  'sampling/createMessage',
  'roots/list',
]

/** Reads a capability gate from a capabilities object; `{}` and `true` both mean present. */
export function hasCapability(capabilities: unknown, path: readonly string[]): boolean {
  let node: unknown = capabilities
  for (const key of path) {
    if (typeof node !== 'object' || node === null) return false
    node = (node as Record<string, unknown>)[key]
    if (node === undefined || node === null || node === false) return false
  }
  return true
}
