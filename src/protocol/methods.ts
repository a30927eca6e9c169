/**
 * Which methods and notifications exist in which revision, who sends them, and the capability
 * that gates each. The table mirrors the ClientRequest/ServerRequest/…Notification unions of each
 * revision's official schema (checked mechanically by methods.test.ts).
 */
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
}

const ALL = REVISIONS
const LEGACY: readonly Revision[] = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25']
const FROM_2025_06: readonly Revision[] = ['2025-06-18', '2025-11-25']
const ONLY_2025_11: readonly Revision[] = ['2025-11-25']
const MODERN: readonly Revision[] = ['2026-07-28']

const server = (...path: string[]): CapabilityGate => ({ side: 'server', path })
const client = (...path: string[]): CapabilityGate => ({ side: 'client', path })

const SPECS: readonly MethodSpec[] = [
  { method: 'initialize', kind: 'request', direction: 'toServer', revisions: LEGACY },
  {
    method: 'notifications/initialized',
    kind: 'notification',
    direction: 'toServer',
    revisions: LEGACY,
  },
  { method: 'ping', kind: 'request', direction: 'both', revisions: LEGACY },
  { method: 'notifications/cancelled', kind: 'notification', direction: 'both', revisions: ALL },
  { method: 'notifications/progress', kind: 'notification', direction: 'both', revisions: ALL },
  {
    method: 'completion/complete',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: { ...server('completions'), since: '2025-03-26' },
  },
  {
    method: 'logging/setLevel',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('logging'),
  },
  {
    method: 'notifications/message',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('logging'),
  },
  {
    method: 'resources/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('resources'),
    cacheable: true,
  },
  {
    method: 'resources/templates/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('resources'),
    cacheable: true,
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
  },
  {
    method: 'resources/subscribe',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('resources', 'subscribe'),
  },
  {
    method: 'resources/unsubscribe',
    kind: 'request',
    direction: 'toServer',
    revisions: LEGACY,
    gate: server('resources', 'subscribe'),
  },
  {
    method: 'notifications/resources/updated',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('resources', 'subscribe'),
  },
  {
    method: 'notifications/resources/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('resources', 'listChanged'),
  },
  {
    method: 'prompts/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('prompts'),
    cacheable: true,
  },
  {
    method: 'prompts/get',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('prompts'),
    mrtr: true,
    nameParam: 'name',
  },
  {
    method: 'notifications/prompts/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('prompts', 'listChanged'),
  },
  {
    method: 'tools/list',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('tools'),
    cacheable: true,
  },
  {
    method: 'tools/call',
    kind: 'request',
    direction: 'toServer',
    revisions: ALL,
    gate: server('tools'),
    mrtr: true,
    nameParam: 'name',
  },
  {
    method: 'notifications/tools/list_changed',
    kind: 'notification',
    direction: 'toClient',
    revisions: ALL,
    gate: server('tools', 'listChanged'),
  },
  {
    method: 'sampling/createMessage',
    kind: 'request',
    direction: 'toClient',
    revisions: LEGACY,
    gate: client('sampling'),
  },
  {
    method: 'roots/list',
    kind: 'request',
    direction: 'toClient',
    revisions: LEGACY,
    gate: client('roots'),
  },
  {
    method: 'notifications/roots/list_changed',
    kind: 'notification',
    direction: 'toServer',
    revisions: LEGACY,
    gate: client('roots', 'listChanged'),
  },
  {
    method: 'elicitation/create',
    kind: 'request',
    direction: 'toClient',
    revisions: FROM_2025_06,
    gate: client('elicitation'),
  },
  {
    method: 'notifications/elicitation/complete',
    kind: 'notification',
    direction: 'toClient',
    revisions: ONLY_2025_11,
    gate: client('elicitation', 'url'),
  },
  {
    method: 'tasks/get',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
  },
  {
    method: 'tasks/result',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
  },
  {
    method: 'tasks/list',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks', 'list'),
  },
  {
    method: 'tasks/cancel',
    kind: 'request',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks', 'cancel'),
  },
  {
    method: 'notifications/tasks/status',
    kind: 'notification',
    direction: 'both',
    revisions: ONLY_2025_11,
    gate: server('tasks'),
  },
  {
    method: 'server/discover',
    kind: 'request',
    direction: 'toServer',
    revisions: MODERN,
    cacheable: true,
  },
  { method: 'subscriptions/listen', kind: 'request', direction: 'toServer', revisions: MODERN },
  {
    method: 'notifications/subscriptions/acknowledged',
    kind: 'notification',
    direction: 'toClient',
    revisions: MODERN,
  },
]

const BY_METHOD = new Map(SPECS.map((s) => [s.method, s]))

/** Every method Barbican knows, in any revision. */
export const METHOD_SPECS: readonly MethodSpec[] = SPECS

export function methodSpec(method: string): MethodSpec | undefined {
  return BY_METHOD.get(method)
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
