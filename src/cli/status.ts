/**
 * `barbican status [--config FILE | --url URL] [--json]`: the overview of a running gateway,
 * read from its admin API (`GET /admin/api/status`, docs/admin.md): upstream states, restarts,
 * last errors, protocol revision and transport; virtual servers with their members and counts;
 * sessions; the last reload. The address is `--url`, else the config's `listen`. An admin credential, needed
 * off loopback or with inbound auth, is read from BARBICAN_ADMIN_TOKEN (never from argv).
 */

import { ADMIN_STATUS_PATH } from '../admin/api.ts'
import type { LoadedConfig } from '../config/config.ts'
import type { Overview } from '../gateway/overview.ts'
import type { CliIo, CommandOptions } from './command.ts'

/** How long `status` waits for the gateway's answer. */
export const STATUS_TIMEOUT_MS = 10_000

export async function runStatus(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> | undefined,
): Promise<number> {
  const fetched = await fetchOverview(options, io, loading)
  if (!fetched) return 1
  if (options.json) {
    io.stdout(`${fetched.body}\n`)
    return 0
  }
  io.stdout(formatOverview(fetched.overview, fetched.origin))
  return 0
}

/**
 * The overview of the gateway at `--url` or the config's `listen`; undefined after printing
 * why there is none.
 */
export async function fetchOverview(
  options: CommandOptions,
  io: CliIo,
  loading: Promise<LoadedConfig | undefined> | undefined,
): Promise<{ overview: Overview; body: string; origin: string } | undefined> {
  let base = options.url
  if (base === undefined) {
    const loaded = await loading
    if (!loaded) return undefined
    const { host, port } = loaded.config.listen
    base = `http://${host.includes(':') ? `[${host}]` : host}:${port}`
  }
  let url: URL
  try {
    url = new URL(ADMIN_STATUS_PATH, base)
  } catch {
    io.stderr(`barbican: --url ${base} is not a URL\n`)
    return undefined
  }
  const token = process.env.BARBICAN_ADMIN_TOKEN
  let res: Response
  try {
    res = await fetch(url, {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      signal: AbortSignal.timeout(STATUS_TIMEOUT_MS),
    })
  } catch (err) {
    const why = (err as { cause?: { code?: string } }).cause?.code ?? (err as Error).message
    io.stderr(
      `barbican: no gateway answers at ${url.origin} (${why}); is barbican serve running?\n`,
    )
    return undefined
  }
  const body = await res.text()
  if (!res.ok) {
    let reason = body
    try {
      reason = (JSON.parse(body) as { error?: { message?: string } }).error?.message ?? body
    } catch {
      // Not JSON: shown as it came.
    }
    const hint =
      res.status === 401 || res.status === 403
        ? ' (set BARBICAN_ADMIN_TOKEN to a credential with the scope barbican:admin)'
        : ''
    io.stderr(
      `barbican: ${url.origin} refused the status request: ${res.status} ${reason}${hint}\n`,
    )
    return undefined
  }
  return { overview: JSON.parse(body) as Overview, body, origin: url.origin }
}

/** The overview as lines for a person. */
export function formatOverview(o: Overview, origin: string): string {
  const lines = [`barbican ${o.version} at ${origin}, config: ${o.config}`, 'upstreams:']
  const width = Math.max(4, ...o.upstreams.map((u) => u.name.length))
  if (o.upstreams.length === 0) lines.push('  (none)')
  for (const u of o.upstreams) {
    const era = u.protocolVersion ? `, MCP ${u.protocolVersion}` : ''
    const restarts = `${u.restarts} restart${u.restarts === 1 ? '' : 's'}`
    const error = u.lastError ? `\n    last error: ${oneLine(u.lastError)}` : ''
    const held = (u.heldLists ?? []).map((h) => `\n    held back: ${h.list}: ${oneLine(h.reason)}`)
    lines.push(
      `  ${u.name.padEnd(width)}  ${u.state} (${u.transport}${era}), ${restarts}${error}${held.join('')}`,
    )
  }
  lines.push('virtual servers:')
  for (const s of o.servers) {
    const counts = s.counts
      ? `${s.counts.tools} tools, ${s.counts.prompts} prompts, ${s.counts.resources} resources, ${s.counts.quarantined} quarantined`
      : 'items not listed yet'
    lines.push(`  ${s.name} at ${s.path}: ${s.upstreams.join(', ') || '(no upstream)'}; ${counts}`)
  }
  lines.push(`sessions: ${o.sessions}`)
  const r = o.lastReload
  if (r) {
    const what = r.ok ? 'applied' : `refused: ${oneLine(r.error ?? '')}`
    const restart = r.needsRestart?.length ? `; needs restart: ${r.needsRestart.join(', ')}` : ''
    lines.push(`last reload: ${r.at} (${r.trigger}) ${what}${restart}`)
  }
  return `${lines.join('\n')}\n`
}

/** Errors an upstream wrote may span lines or hide characters: one visible line. */
function oneLine(text: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are the point
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]+/g, ' ').trim()
}
