/**
 * `barbican check --diff`: what reloading the config file would change on a running gateway,
 * from the running gateway's overview (GET /admin/api/status) and the catalogs `check` builds
 * from the file: upstreams added and removed, per virtual server the tools added, removed and
 * renamed (same upstream tool, new exposed name), and the pins affected.
 */
import type { ExposedTool, Overview } from '../gateway/overview.ts'

export interface NextServer {
  readonly name: string
  readonly path: string
  readonly tools: readonly ExposedTool[]
}

export interface NextGateway {
  readonly upstreams: readonly string[]
  readonly servers: readonly NextServer[]
}

/** The preview as lines for a person; the first says what was compared. */
export function previewReload(running: Overview, next: NextGateway): string[] {
  const lines: string[] = []
  const before = new Set(running.upstreams.map((u) => u.name))
  const after = new Set(next.upstreams)
  const added = next.upstreams.filter((n) => !before.has(n))
  const removed = [...before].filter((n) => !after.has(n))
  if (added.length > 0) lines.push(`upstreams added: ${added.join(', ')}`)
  if (removed.length > 0) lines.push(`upstreams removed: ${removed.join(', ')}`)
  const runningServers = new Map(running.servers.map((s) => [s.name, s]))
  const knownTools = new Set<string>()
  for (const s of running.servers) for (const t of s.tools ?? []) knownTools.add(key(t))
  const firstSight = new Set<string>()
  for (const server of next.servers) {
    const old = runningServers.get(server.name)
    if (!old) {
      lines.push(`server ${server.name}: added (needs a restart)`)
      continue
    }
    if (old.path !== server.path)
      lines.push(`server ${server.name}: path changed (needs a restart)`)
    if (old.tools === undefined) {
      lines.push(`server ${server.name}: the running gateway has not listed its tools yet`)
      continue
    }
    const oldByKey = new Map(old.tools.map((t) => [key(t), t]))
    const newByKey = new Map(server.tools.map((t) => [key(t), t]))
    const toolsAdded = server.tools.filter((t) => !oldByKey.has(key(t))).map((t) => t.name)
    const toolsRemoved = old.tools.filter((t) => !newByKey.has(key(t))).map((t) => t.name)
    const renamed = server.tools
      .filter((t) => oldByKey.has(key(t)) && oldByKey.get(key(t))?.name !== t.name)
      .map((t) => `${oldByKey.get(key(t))?.name} → ${t.name}`)
    if (toolsAdded.length > 0)
      lines.push(`server ${server.name}: tools added: ${toolsAdded.join(', ')}`)
    if (toolsRemoved.length > 0)
      lines.push(`server ${server.name}: tools removed: ${toolsRemoved.join(', ')}`)
    if (renamed.length > 0)
      lines.push(`server ${server.name}: tools renamed: ${renamed.join(', ')}`)
    for (const t of server.tools) if (!knownTools.has(key(t))) firstSight.add(t.name)
  }
  for (const name of runningServers.keys()) {
    if (!next.servers.some((s) => s.name === name))
      lines.push(`server ${name}: removed (needs a restart)`)
  }
  if (firstSight.size > 0) {
    lines.push(
      `pins: ${firstSight.size} tool(s) not served now, reviewed and pinned at first sight (or quarantined by their trust policy): ${[...firstSight].join(', ')}`,
    )
  }
  for (const name of removed) {
    lines.push(`pins: ${name}'s pins stay in the store, unused until it comes back`)
  }
  if (lines.length === 0) lines.push('no upstream, server or tool would change')
  return lines
}

function key(t: ExposedTool): string {
  return `${t.upstream}\u0000${t.original}`
}
