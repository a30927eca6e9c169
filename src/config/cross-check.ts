/**
 * Checks that span several keys: references from virtual servers to upstreams, names against
 * namespacing separators, rename collisions, URL schemes against transports. They run on the raw
 * input, defensively, alongside the schema, so a single run reports structural and referential
 * problems together.
 */
import type { ConfigIssue } from './config-error.ts'
import { DEFAULT_SEPARATOR, SEPARATOR_PATTERN } from './defaults.ts'

type Obj = Record<string, unknown>

function isObj(value: unknown): value is Obj {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/**
 * Returns the cross-key issues of a native config. Issues marked here replace the schema's own
 * issue at the same path (see `supersedes`), since they say more precisely what is wrong.
 */
export function crossCheck(input: unknown): { issues: ConfigIssue[]; supersedes: Set<string> } {
  const result = crossCheckServers(input)
  if (isObj(input) && isObj(input.tenants)) {
    for (const [tenant, entry] of Object.entries(input.tenants)) {
      const at = ['tenants', tenant]
      if (tenant === 'default') {
        result.issues.push({
          path: at,
          message:
            'is reserved: the top-level upstreams and servers are the default tenant; choose another name',
        })
      }
      if (!isObj(entry)) continue
      // A tenant's upstreams and servers obey the same rules as the top-level ones.
      const own = crossCheckServers({ upstreams: entry.upstreams, servers: entry.servers })
      for (const issue of own.issues) result.issues.push({ ...issue, path: [...at, ...issue.path] })
      for (const path of own.supersedes) {
        result.supersedes.add(JSON.stringify([...at, ...(JSON.parse(path) as unknown[])]))
      }
    }
  }
  return result
}

function crossCheckServers(input: unknown): { issues: ConfigIssue[]; supersedes: Set<string> } {
  const issues: ConfigIssue[] = []
  const supersedes = new Set<string>()
  if (!isObj(input)) return { issues, supersedes }
  const upstreams = isObj(input.upstreams) ? input.upstreams : undefined
  const names = upstreams ? Object.keys(upstreams) : []

  if (input.upstreams === undefined) {
    issues.push({
      path: ['upstreams'],
      message: 'is required: name at least one upstream MCP server',
    })
    supersedes.add(JSON.stringify(['upstreams']))
  } else if (upstreams && names.length === 0) {
    issues.push({ path: ['upstreams'], message: 'at least one upstream is required' })
  }
  for (const [name, entry] of Object.entries(upstreams ?? {})) {
    if (!isObj(entry)) continue
    if ('command' in entry && 'url' in entry) {
      issues.push({
        path: ['upstreams', name],
        message:
          'has both "command" (a local server) and "url" (a remote server); keep exactly one',
      })
      supersedes.add(JSON.stringify(['upstreams', name]))
    }
    checkScheme(name, entry, issues)
  }

  const servers = isObj(input.servers) ? input.servers : undefined
  if (servers === undefined) {
    for (const name of names)
      checkSeparator(['upstreams', name], name, DEFAULT_SEPARATOR, 'default', issues)
    return { issues, supersedes }
  }
  if (Object.keys(servers).length === 0) {
    issues.push({
      path: ['servers'],
      message: 'defines no virtual server; remove the key to serve all upstreams at /mcp',
    })
  }
  for (const [serverName, server] of Object.entries(servers)) {
    if (!isObj(server)) continue
    const namespacing = isObj(server.namespacing) ? server.namespacing : {}
    const separator =
      typeof namespacing.separator === 'string' ? namespacing.separator : DEFAULT_SEPARATOR
    checkSeparator(['servers', serverName], serverName, separator, serverName, issues)
    const members = Array.isArray(server.upstreams) ? server.upstreams : names
    const seen = new Set<string>()
    members.forEach((member, index) => {
      if (typeof member !== 'string') return
      const path = Array.isArray(server.upstreams)
        ? ['servers', serverName, 'upstreams', index]
        : ['upstreams', member]
      if (seen.has(member)) {
        issues.push({ path, message: `lists upstream "${member}" twice` })
        return
      }
      seen.add(member)
      if (upstreams && !(member in upstreams)) {
        issues.push({
          path,
          message: `server "${serverName}" names upstream "${member}", which is not defined (defined upstreams: ${names.join(', ') || 'none'})`,
        })
        return
      }
      checkSeparator(['upstreams', member], member, separator, serverName, issues)
    })
    for (const kind of ['tools', 'prompts'] as const) {
      const filter = isObj(server[kind]) ? server[kind] : {}
      if (isObj(filter.rename))
        checkRenames(['servers', serverName, kind, 'rename'], filter.rename, issues)
    }
  }
  return { issues, supersedes }
}

function checkScheme(name: string, entry: Obj, issues: ConfigIssue[]) {
  if (typeof entry.url !== 'string' || typeof entry.transport !== 'string') return
  const ws = /^wss?:/i.test(entry.url)
  const http = /^https?:/i.test(entry.url)
  if (entry.transport === 'websocket' && http) {
    issues.push({
      path: ['upstreams', name, 'transport'],
      message: 'is "websocket" but the url is http(s)://; use a ws:// or wss:// url',
    })
  } else if ((entry.transport === 'streamable-http' || entry.transport === 'sse') && ws) {
    issues.push({
      path: ['upstreams', name, 'transport'],
      message: `is "${entry.transport}" but the url is ws(s)://; use an http(s):// url or transport "websocket"`,
    })
  }
}

function checkSeparator(
  path: (string | number)[],
  name: string,
  separator: string,
  server: string,
  issues: ConfigIssue[],
) {
  if (!SEPARATOR_PATTERN.test(separator) || !name.includes(separator)) return
  const message = `name "${name}" contains the namespacing separator "${separator}" of server "${server}", which would make prefixed names ambiguous; rename it or set another separator`
  if (issues.some((issue) => issue.message === message)) return
  issues.push({ path, message })
}

function checkRenames(path: string[], rename: Obj, issues: ConfigIssue[]) {
  const targets = new Map<unknown, string>()
  for (const [from, to] of Object.entries(rename)) {
    const earlier = targets.get(to)
    if (earlier !== undefined) {
      issues.push({
        path: [...path, from],
        message: `renames to ${JSON.stringify(to)}, as "${earlier}" already does; exposed names must be unique`,
      })
    } else {
      targets.set(to, from)
    }
  }
}
