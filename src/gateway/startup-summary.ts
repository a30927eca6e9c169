/**
 * The one line that says how start-up went, once it settles: how many upstreams are up, how many
 * tools a client will see, where, and which upstream failed (its own lines above say why):
 * `ready: 3/4 upstreams, 40 tools at http://127.0.0.1:7300/mcp (memory: failed — see above)`.
 * Upstream states come from the gateway's status, as /readyz reports them.
 */
import type { Gateway, UpstreamStatus } from './gateway.ts'
import { catalogWithin } from './overview.ts'

/** How long the summary waits for the merged tool list before it leaves the count out. */
export const SUMMARY_LIST_WAIT_MS = 5_000

export interface StartupSummary {
  readonly message: string
  /** Whether an upstream is not up (the line is then a warning). */
  readonly degraded: boolean
  readonly fields: {
    readonly ready: number
    readonly total: number
    readonly tools?: number
    readonly failed: readonly string[]
    readonly url: string
  }
}

/**
 * `server` is the virtual server at `url` whose tools are counted. Its tools are not counted
 * while one of its upstreams is lazy and not started: counting would start it.
 */
export async function startupSummary(
  gateway: Gateway,
  server: string,
  url: string,
  waitMs = SUMMARY_LIST_WAIT_MS,
  /** Entries a missing variable holds back (heldStatus): counted, and named as `held`. */
  held: readonly UpstreamStatus[] = [],
): Promise<StartupSummary> {
  const status = [...gateway.status(), ...held]
  const up = status.filter((u) => u.state === 'ready' || u.state === 'idle')
  const down = status.filter((u) => u.state !== 'ready' && u.state !== 'idle')
  const tools = (await catalogWithin(gateway, server, waitMs))?.catalog.tools.length
  const count =
    tools === undefined ? 'tools listed on first use' : `${tools} tool${tools === 1 ? '' : 's'}`
  const failures = down.map((u) => `${u.name}: ${u.state}`).join(', ')
  const message =
    `ready: ${up.length}/${status.length} upstreams, ${count} at ${url}` +
    (down.length > 0 ? ` (${failures} — see above)` : '')
  return {
    message,
    degraded: down.length > 0,
    fields: {
      ready: up.length,
      total: status.length,
      ...(tools === undefined ? {} : { tools }),
      failed: down.map((u) => u.name),
      url,
    },
  }
}
