/**
 * The overview of a running gateway, as `GET /admin/api/status` answers it and `barbican status`
 * prints it: each upstream's state, restarts, last error, protocol revision and transport; each virtual
 * server with its members and item counts; sessions; the last reload.
 */

import type { Catalog } from '../catalog/catalog.ts'
import { VERSION } from '../common/version.ts'
import type { Config } from '../config/config.ts'
import type { HeldList } from '../upstreams/upstream.ts'
import type { Gateway } from './gateway.ts'

/** How long the overview waits for a virtual server's catalog before it leaves counts out. */
export const OVERVIEW_LIST_WAIT_MS = 2_000

export interface UpstreamOverview {
  readonly name: string
  readonly state: string
  /** `stdio`, `streamable-http`, `sse`, `websocket` or `auto`; `—` for a held entry. */
  readonly transport: string
  /** `legacy` or `modern` once probed. */
  readonly era?: string | undefined
  /**
   * The MCP revision spoken with it (`2025-11-25`, `2026-07-28`…) once connected: what a user
   * recognises, where `era` is Barbican's own word for the same fact.
   */
  readonly protocolVersion?: string | undefined
  readonly restarts: number
  readonly lastError?: string | undefined
  /** Optional lists it answered with an error, held back alone (ADR 099); absent: none. */
  readonly heldLists?: readonly HeldList[] | undefined
}

export interface ServerOverview {
  readonly name: string
  readonly path: string
  readonly upstreams: readonly string[]
  /** Absent while a member is lazy and idle (counting would start it) or listing is slow. */
  readonly counts?: {
    readonly tools: number
    readonly prompts: number
    readonly resources: number
    readonly quarantined: number
  }
  /** Exposed tool names and where they come from (for `barbican check --diff`), with counts. */
  readonly tools?: readonly ExposedTool[]
}

export interface ExposedTool {
  readonly name: string
  readonly upstream: string
  /** The upstream's own name for it. */
  readonly original: string
}

export interface LastReload {
  readonly at: string
  readonly trigger: string
  readonly ok: boolean
  readonly error?: string | undefined
  readonly needsRestart?: readonly string[] | undefined
}

export interface Overview {
  readonly version: string
  readonly config: string
  readonly upstreams: readonly UpstreamOverview[]
  readonly servers: readonly ServerOverview[]
  readonly sessions: number
  readonly lastReload?: LastReload | undefined
}

export async function overview(
  gateway: Gateway,
  config: Config,
  about: { readonly config: string; readonly lastReload: LastReload | undefined },
  waitMs = OVERVIEW_LIST_WAIT_MS,
): Promise<Overview> {
  const transports = new Map(config.upstreams.map((u) => [u.name, u.transport]))
  const upstreams: UpstreamOverview[] = [...gateway.upstreams.values()].map(
    (u): UpstreamOverview => ({
      name: u.name,
      state: u.state,
      transport: transports.get(u.name) ?? 'unknown',
      ...(u.era ? { era: u.era } : {}),
      ...(u.info ? { protocolVersion: u.info.protocolVersion } : {}),
      restarts: gateway.restartsOf(u.name),
      ...(u.lastError ? { lastError: u.lastError } : {}),
      ...(u.heldLists.length > 0 ? { heldLists: u.heldLists } : {}),
    }),
  )
  // Entries a missing variable holds back (ADR 121): listed, never started, the reason shown.
  for (const h of config.held ?? []) {
    upstreams.push({
      name: h.name,
      state: 'held',
      transport: '—',
      restarts: 0,
      lastError: h.reason,
    })
  }
  const paths = new Map(config.servers.map((s) => [s.name, s.path]))
  const servers = await Promise.all(
    [...gateway.servers.values()].map(async (server): Promise<ServerOverview> => {
      const listed = await listedOf(gateway, server.name, waitMs)
      return {
        name: server.name,
        path: paths.get(server.name) ?? '',
        upstreams: server.upstreams.map((u) => u.name),
        ...(listed ?? {}),
      }
    }),
  )
  return {
    version: VERSION,
    config: about.config,
    upstreams,
    servers,
    sessions: gateway.sessions.size,
    ...(about.lastReload ? { lastReload: about.lastReload } : {}),
  }
}

async function listedOf(gateway: Gateway, name: string, waitMs: number) {
  const view = await catalogWithin(gateway, name, waitMs)
  if (!view) return undefined
  const { catalog } = view
  return {
    counts: {
      tools: catalog.tools.length,
      prompts: catalog.prompts.length,
      resources: catalog.resources.length,
      quarantined: view.quarantined.size,
    },
    tools: exposedTools(catalog),
  }
}

/**
 * A virtual server's merged catalog if it comes within `waitMs`; undefined when it does not,
 * when listing fails, or when a member is idle (a lazy upstream is not started just to count).
 */
export async function catalogWithin(gateway: Gateway, name: string, waitMs: number) {
  const server = gateway.servers.get(name)
  if (!server || server.upstreams.some((u) => u.state === 'idle')) return undefined
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), waitMs)
  })
  try {
    return await Promise.race([server.catalog(), late])
  } catch {
    return undefined
  } finally {
    clearTimeout(timer)
  }
}

/** The catalog's tools as exposed names with their origin, in catalog order. */
export function exposedTools(catalog: Catalog): ExposedTool[] {
  const tools: ExposedTool[] = []
  for (const tool of catalog.tools) {
    const name = String(tool.name)
    const target = catalog.toolTargets.get(name)
    if (target) tools.push({ name, upstream: target.upstream, original: target.original })
  }
  return tools
}
