/**
 * Host and Origin allowlists for every inbound HTTP request and WebSocket upgrade.
 *
 * A local MCP server is reachable from any web page the user opens: a page on `evil.example`
 * can rebind its DNS name to 127.0.0.1 and then talk to us with `Host: evil.example`, or call
 * us cross-origin with its own `Origin`. Checking both headers against allowlists defeats DNS
 * rebinding and cross-site requests (MCP transports spec, "Security Warning"). Browsers do not
 * apply CORS to WebSocket handshakes, so the Origin check matters most there.
 */
import type { IncomingHttpHeaders } from 'node:http'

// The default allowlists (loopback only) are config's: DEFAULT_ALLOWED_HOSTS and
// LOOPBACK_ORIGINS in src/config/defaults.ts.

/** Why a request was refused, for the 403 body and the log. */
export interface GuardRefusal {
  readonly header: 'host' | 'origin'
  readonly reason: string
}

/**
 * Checks `Host` and, when present, `Origin`. Allowlist entries: `*` (anything), a host name
 * (`localhost`, any port), `name:port` (that port only), or `*.example.com` (subdomains).
 * Origin entries are `scheme://host` (any port), `scheme://host:port`, or `*`.
 */
export function checkRequestHeaders(
  headers: IncomingHttpHeaders,
  allowedHosts: readonly string[],
  allowedOrigins: readonly string[],
): GuardRefusal | undefined {
  const host = headers.host
  if (host === undefined || host === '') {
    return { header: 'host', reason: 'The Host header is required' }
  }
  if (!isHostAllowed(host, allowedHosts)) {
    return { header: 'host', reason: `Host "${truncate(host)}" is not in the allowed hosts` }
  }
  const origin = headers.origin
  if (origin !== undefined && !isOriginAllowed(origin, allowedOrigins)) {
    return {
      header: 'origin',
      reason: `Origin "${truncate(origin)}" is not in the allowed origins`,
    }
  }
  return undefined
}

/** True when a `Host` header value (`name[:port]`) matches the allowlist. */
export function isHostAllowed(hostHeader: string, allowed: readonly string[]): boolean {
  const parsed = splitHostPort(hostHeader.trim().toLowerCase())
  if (parsed === undefined) return false
  for (const raw of allowed) {
    const entry = raw.trim().toLowerCase()
    if (entry === '*') return true
    const want = splitHostPort(entry)
    if (want === undefined) continue
    if (want.port !== undefined && want.port !== parsed.port) continue
    if (want.name.startsWith('*.')) {
      if (parsed.name.endsWith(want.name.slice(1))) return true
    } else if (want.name === parsed.name) {
      return true
    }
  }
  return false
}

/** True when an `Origin` header value matches the allowlist; the opaque `null` must be listed. */
export function isOriginAllowed(origin: string, allowed: readonly string[]): boolean {
  const value = origin.trim().toLowerCase()
  if (allowed.includes('*')) return true
  if (value === 'null') return allowed.includes('null')
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return false
  }
  // A serialized origin has no path; anything else is not a browser-sent Origin.
  if (url.pathname !== '/' || url.search !== '' || url.username !== '') return false
  for (const raw of allowed) {
    let want: URL
    try {
      want = new URL(raw.trim().toLowerCase())
    } catch {
      continue
    }
    if (want.protocol !== url.protocol || want.hostname !== url.hostname) continue
    // An entry without an explicit port accepts every port of that host. `URL` drops default
    // ports (`:80`), so look at the entry's text to tell "any port" from "port 80".
    if (!/:\d+\/?$/.test(raw.trim()) || want.port === url.port) return true
  }
  return false
}

/**
 * CORS response headers for an allowed cross-origin caller, so browser-based MCP clients (the
 * MCP Inspector) can read `Mcp-Session-Id` and send the MCP headers.
 */
export function corsHeaders(
  origin: string,
  requestedHeaders: string | undefined,
): Record<string, string> {
  return {
    'access-control-allow-origin': origin,
    vary: 'Origin',
    'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
    // Echo what the preflight asks for: Mcp-Param-* names are open-ended. The Origin has already
    // passed the allowlist, so this grants nothing to an unlisted site.
    'access-control-allow-headers':
      requestedHeaders ??
      'content-type, accept, authorization, mcp-session-id, mcp-protocol-version, last-event-id, mcp-method, mcp-name',
    'access-control-expose-headers': 'mcp-session-id, www-authenticate',
    'access-control-max-age': '600',
  }
}

function splitHostPort(value: string): { name: string; port: string | undefined } | undefined {
  if (value.startsWith('[')) {
    const close = value.indexOf(']')
    if (close < 0) return undefined
    const rest = value.slice(close + 1)
    if (rest !== '' && !/^:\d+$/.test(rest)) return undefined
    return { name: value.slice(0, close + 1), port: rest === '' ? undefined : rest.slice(1) }
  }
  const colon = value.lastIndexOf(':')
  if (colon < 0) return { name: stripDot(value), port: undefined }
  const port = value.slice(colon + 1)
  if (!/^\d+$/.test(port)) return undefined
  return { name: stripDot(value.slice(0, colon)), port }
}

/** `localhost.` names the same host as `localhost`; an attacker cannot produce it from its own name. */
function stripDot(name: string): string {
  return name.endsWith('.') ? name.slice(0, -1) : name
}

function truncate(value: string): string {
  return value.length > 100 ? `${value.slice(0, 100)}…` : value
}
