/**
 * The results Barbican composes itself instead of forwarding: the handshake answers
 * (`initialize`, `server/discover`) built from every upstream's capabilities, a page of a
 * merged list, the tasks one client created across upstreams, and a log level passed on to the
 * legacy upstreams. Kept apart from the session, which decides when to give them and holds the
 * per-client state they read.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { decodeCursor, encodeCursor } from '../catalog/cursor.ts'
import { BarbicanError } from '../common/errors.ts'
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { hasCapability, methodSpec } from '../protocol/methods.ts'
import type { Result } from '../protocol/model.ts'
import { MODERN_REVISIONS, type Revision } from '../protocol/revisions.ts'
import type { SessionTask } from '../virtual-servers/route.ts'
import type { Degraded, VirtualServer } from '../virtual-servers/virtual-server.ts'

/** Result `_meta` key listing which upstream contributes what (capability attribution). */
export const UPSTREAMS_META = 'dev.barbican/upstreams'

/**
 * Result `_meta` key of a merged list that leaves upstreams out: each one missing, and why
 * (not ready within the listing deadline, or its lists failed). Absent when nothing is missing.
 */
export const DEGRADED_META = 'dev.barbican/degraded'

/** A complete result (the session puts the request's id on it). */
export function complete(result: JsonObject): Result {
  return { kind: 'result', id: 0, resultType: 'complete', result }
}

/**
 * Connects every upstream so capabilities are known, waiting at most the handshake wait: an
 * upstream that is slow or never answers is left out of the answer (its lists follow later, with
 * list_changed), never holds it up. Failures degrade, never block.
 */
export async function connectAll(server: VirtualServer): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const waited = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, server.timing.handshakeWaitMs)
  })
  try {
    await Promise.race([Promise.allSettled(server.upstreams.map((u) => u.connect())), waited])
  } finally {
    clearTimeout(timer)
  }
}

/** The `initialize` result for a legacy client that negotiated `revision`. */
export function initializeResult(
  server: VirtualServer,
  revision: Revision,
  serverInfo: JsonObject,
): Result {
  const instructions = server.instructions()
  return complete({
    protocolVersion: revision,
    capabilities: server.capabilities(),
    serverInfo,
    ...(instructions ? { instructions } : {}),
    _meta: { [UPSTREAMS_META]: server.attribution() },
  })
}

/** The 2026-07-28 `server/discover` result for request `id`. */
export function discoverResult(server: VirtualServer, id: Result['id'], serverInfo: JsonObject) {
  const instructions = server.instructions()
  return {
    kind: 'result',
    id,
    resultType: 'complete',
    result: {
      supportedVersions: [...MODERN_REVISIONS],
      capabilities: server.capabilities(),
      ...(instructions ? { instructions } : {}),
    },
    serverInfo,
  } satisfies Result
}

/**
 * One page of the merged list `method` asks for, from `cursor`, at most `pageSize` items; when
 * the catalog left upstreams out, every page says which and why (`_meta` DEGRADED_META). Its
 * cursors are valid only for the same `view` (catalog/cursor.ts).
 */
export function listPage(
  catalog: Catalog,
  method: string,
  cursor: unknown,
  pageSize: number,
  degraded: readonly Degraded[] = [],
  view = '',
): Result {
  // The method table says which list a merged-list method returns (protocol/methods.ts).
  const key = methodSpec(method)?.list
  if (key === undefined) throw new BarbicanError('ERR_INTERNAL', `${method} is not a merged list`)
  const items = catalog[key]
  const start = decodeCursor(cursor, method, view)
  const end = start + pageSize
  const page: JsonObject = { [key]: items.slice(start, end) }
  if (end < items.length) page.nextCursor = encodeCursor(method, end, view)
  if (degraded.length > 0) {
    page._meta = {
      [DEGRADED_META]: degraded.map((d) => ({ upstream: d.upstream, error: d.error })),
    }
  }
  return complete(page)
}

/**
 * `tasks/list` for one client: only the tasks it created (`tasks`: task id → task), from
 * every upstream that holds some.
 */
export async function ownTasks(
  server: VirtualServer,
  tasks: ReadonlyMap<string, SessionTask>,
  signal: AbortSignal,
): Promise<Result> {
  const listedTasks: unknown[] = []
  for (const name of new Set([...tasks.values()].map((t) => t.upstream))) {
    const reply = await server.upstream(name)!.request('tasks/list', undefined, { signal })
    const listed = reply.kind === 'result' ? reply.result.tasks : undefined
    if (!Array.isArray(listed)) continue
    for (const t of listed) {
      if (isPlainObject(t) && tasks.get(t.taskId as string)?.upstream === name) listedTasks.push(t)
    }
  }
  return complete({ tasks: listedTasks })
}

/**
 * Passes a client's `logging/setLevel` on to the connected legacy upstreams that log; 2026
 * upstreams take the level on each request (`_meta` logLevel) instead.
 */
export async function setUpstreamLogLevel(
  server: VirtualServer,
  level: string,
  signal: AbortSignal,
): Promise<void> {
  await Promise.allSettled(
    server
      .connectedUpstreams()
      .filter((u) => u.era !== 'modern' && hasCapability(u.info?.capabilities, ['logging']))
      .map((u) => u.request('logging/setLevel', { level }, { signal })),
  )
}
