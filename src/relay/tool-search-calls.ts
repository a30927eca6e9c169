/**
 * The session's side of `tools.mode: search` (ADR 070). `call_tool` becomes the direct
 * `tools/call` it names before routing, so it goes through the same route, policies, pins,
 * confirmation, audit and relay as any call. `search_tools` searches the caller's own view of
 * the catalogue: the tools a `tools/list` through the same policy chain would show the caller
 * (quarantined tools are never in the catalogue; `authorize` and `cedar` narrow it).
 */

import type { Catalog } from '../catalog/catalog.ts'
import { toolIndexReady } from '../exposure/tool-search.ts'
import {
  answerSearch,
  askedText,
  directCallParams,
  metaToolOf,
  type SearchArguments,
  searchArguments,
  searchResult,
} from '../exposure/tool-search-mode.ts'
import type { Request, Result } from '../protocol/model.ts'
import type { MetaToolLimits } from '../session/meta-tool-limits.ts'
import type { VirtualServer } from '../virtual-servers/virtual-server.ts'
import { complete } from './local-answers.ts'

/** What a search-mode `tools/call` is: a search, or the direct call `call_tool` stands for. */
export type MetaToolCall =
  | { readonly kind: 'search'; readonly request: Request; readonly args: SearchArguments }
  | { readonly kind: 'call'; readonly request: Request; readonly error?: Error }
  | { readonly kind: 'none' }

/** Every request that is no search-mode meta-tool: one object, not one per call. */
export const NO_META_TOOL: MetaToolCall = Object.freeze({ kind: 'none' })

/**
 * Reads a `tools/call` on `server`: a meta-tool only in search mode. A search's arguments are
 * checked here (ERR_META_TOOL_ARGUMENTS); a `call_tool` that names no callable tool keeps its
 * error for the route, so audit records the refused call.
 */
export function metaToolCall(
  server: VirtualServer,
  request: Request,
  maxResults?: number,
): MetaToolCall {
  if (request.method !== 'tools/call' || server.exposure.mode !== 'search') {
    return NO_META_TOOL
  }
  const meta = metaToolOf(request.params)
  if (meta === 'search') {
    return { kind: 'search', request, args: searchArguments(request.params?.arguments, maxResults) }
  }
  if (meta === 'call') {
    try {
      return { kind: 'call', request: { ...request, params: directCallParams(request.params) } }
    } catch (error) {
      return { kind: 'call', request, error: error as Error }
    }
  }
  return NO_META_TOOL
}

/** The `tools/list` request a search's view is taken with (its envelope kept). */
export function viewRequest(search: Request): Request {
  const meta = search.params?._meta
  return { ...search, method: 'tools/list', params: meta === undefined ? {} : { _meta: meta } }
}

/**
 * Answers `search_tools`: the selected tools and the best tools for the queries among those
 * `view` (the caller's narrowed catalog) holds, from the index of the virtual server's current
 * catalog (tool-search-mode.ts `answerSearch`).
 */
export async function searchTools(
  server: VirtualServer,
  args: SearchArguments,
  view: Catalog,
  limits: MetaToolLimits,
): Promise<Result> {
  const { catalog } = await server.catalog()
  const index = await toolIndexReady(catalog, (tool) =>
    server.serverText(catalog.toolTargets.get(String(tool.name))?.upstream ?? ''),
  )
  const { found, notes } = await answerSearch({ view, index, bounds: limits.search }, args)
  const note = notes.length === 0 ? undefined : `Note: ${notes.join(' ')}`
  return complete(searchResult(askedText(args), found, note))
}
