/**
 * An upstream's lists (tools, prompts, resources, resource templates): which method and
 * capability each needs, which notification invalidates which, and fetching one complete list
 * across all its pages. The cache itself stays with the Upstream, which owns when it is cleared.
 */
import { xMcpHeaderProblem } from '../bridge/envelope.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import type { Logger } from '../telemetry/log.ts'
import type { UpstreamReply } from './upstream-client.ts'

/** The lists an upstream offers, by their key in the list result. */
export type ListKey = 'tools' | 'prompts' | 'resources' | 'resourceTemplates'

/** Every list key, for when all of an upstream's lists change at once (it went away). */
export const ALL_LIST_KEYS: readonly ListKey[] = [
  'tools',
  'prompts',
  'resources',
  'resourceTemplates',
]

/** The method that lists each key, and the server capability without which it is empty. */
export const LIST_METHODS: Readonly<Record<ListKey, { method: string; capability: string }>> = {
  tools: { method: 'tools/list', capability: 'tools' },
  prompts: { method: 'prompts/list', capability: 'prompts' },
  resources: { method: 'resources/list', capability: 'resources' },
  resourceTemplates: { method: 'resources/templates/list', capability: 'resources' },
}

/** List-changed notification → the cached lists it invalidates. */
export const LIST_CHANGED: Readonly<Record<string, readonly ListKey[]>> = {
  'notifications/tools/list_changed': ['tools'],
  'notifications/prompts/list_changed': ['prompts'],
  'notifications/resources/list_changed': ['resources', 'resourceTemplates'],
}

/**
 * The lists a server may fail alone: one it advertises but answers with an error (server-postgres
 * answers `resources/templates/list` with "Method not found") is held back by itself, with the
 * reason, and never takes the server's tools with it (ADR 099). `tools` is not among them: a
 * server whose tools cannot be listed is left out and retried like one that is down.
 */
export const OPTIONAL_LISTS: ReadonlySet<ListKey> = new Set([
  'prompts',
  'resources',
  'resourceTemplates',
])

/** A list the server answered with an error (or endless cursors): held back alone, with why. */
export interface HeldList {
  /** The list method, e.g. `resources/templates/list`. */
  readonly list: string
  readonly reason: string
}

/** Whether `err` says the server answered a list request badly (not that it was unreachable). */
export function listAnsweredBadly(err: unknown): err is BarbicanError {
  return err instanceof BarbicanError && err.code === 'ERR_UPSTREAM_PROTOCOL'
}

/** Most pages fetched from one upstream list before giving up (a server looping its cursors). */
const MAX_PAGES = 100

/** What fetching a list needs from its upstream. */
export interface ListSource {
  /** The upstream's name, for errors. */
  readonly name: string
  readonly log: Logger
  /** Sends one list request (connecting first if needed). */
  request(method: string, params: JsonObject | undefined): Promise<UpstreamReply>
  /** Whether the upstream speaks 2026-07-28 (its tools' header annotations are then checked). */
  isModern(): boolean
  /** Tool name → input schema, filled as tools are listed, for `Mcp-Param-*` headers. */
  readonly toolSchemas: Map<string, JsonObject>
}

/** The complete list `key` (all pages) from `source`; fails on an error or endless cursors. */
export async function fetchAllPages(source: ListSource, key: ListKey): Promise<JsonObject[]> {
  const { method } = LIST_METHODS[key]
  const items: JsonObject[] = []
  let cursor: string | undefined
  for (let page = 0; page < MAX_PAGES; page++) {
    const reply = await source.request(method, cursor === undefined ? undefined : { cursor })
    if (reply.kind === 'error') {
      throw new BarbicanError(
        'ERR_UPSTREAM_PROTOCOL',
        `Upstream "${source.name}" failed ${method}: ${reply.message} (${reply.code})`,
        { data: { method, code: reply.code } },
      )
    }
    const pageItems = reply.result[key]
    if (Array.isArray(pageItems))
      for (const item of pageItems) if (isPlainObject(item)) items.push(item)
    if (key === 'tools' && source.isModern()) {
      // A 2026 client must leave out tools whose header annotations are invalid.
      for (let i = items.length - 1; i >= 0; i--) {
        const problem = xMcpHeaderProblem(items[i]?.inputSchema)
        if (problem === undefined) continue
        source.log.warn('tool dropped: invalid x-mcp-header', { tool: items[i]?.name, problem })
        items.splice(i, 1)
      }
    }
    if (key === 'tools') {
      for (const tool of items) {
        if (typeof tool.name === 'string' && isPlainObject(tool.inputSchema)) {
          source.toolSchemas.set(tool.name, tool.inputSchema)
        }
      }
    }
    const next = reply.result.nextCursor
    if (typeof next !== 'string' || next === '') return items
    cursor = next
  }
  throw new BarbicanError(
    'ERR_UPSTREAM_PROTOCOL',
    `Upstream "${source.name}" returned more than ${MAX_PAGES} pages for ${method}`,
  )
}
