/**
 * What Barbican puts on a request to a 2026-07-28 upstream: the per-request `_meta` envelope
 * (version, client capabilities, client info, log level) and the HTTP routing headers that must
 * mirror the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`). Legacy
 * clients' session capabilities are mapped to their 2026 form here.
 */
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { META } from '../protocol/model.ts'

/** The modern revision Barbican speaks to upstreams. */
export const MODERN_UPSTREAM_REVISION = '2026-07-28'

/** The per-request facts a modern upstream needs; legacy sessions supply them from initialize. */
export interface UpstreamEnvelope {
  readonly clientCapabilities: JsonObject
  readonly clientInfo: JsonObject
  readonly logLevel?: string | undefined
}

/**
 * A legacy client's capabilities in 2026 form: `roots.listChanged` is gone, a bare
 * `elicitation: {}` means form mode, and the 2025-11-25 `tasks` capability has no core
 * equivalent (the tasks extension is not bridged), so it is left out.
 */
export function modernCapabilities(legacy: JsonObject): JsonObject {
  const out: JsonObject = {}
  for (const [key, value] of Object.entries(legacy)) {
    if (key === 'tasks') continue
    if (key === 'roots') out.roots = {}
    else if (key === 'elicitation') {
      const e = isPlainObject(value) ? value : {}
      out.elicitation = e.form === undefined && e.url === undefined ? { ...e, form: {} } : e
    } else out[key] = value
  }
  return out
}

/** `params` with the envelope written into `_meta` (other `_meta` members are kept). */
export function withEnvelope(
  params: JsonObject | undefined,
  envelope: UpstreamEnvelope,
): JsonObject {
  const meta: JsonObject = isPlainObject(params?._meta) ? { ...params._meta } : {}
  meta[META.protocolVersion] = MODERN_UPSTREAM_REVISION
  meta[META.clientCapabilities] = envelope.clientCapabilities
  meta[META.clientInfo] = envelope.clientInfo
  if (envelope.logLevel !== undefined) meta[META.logLevel] = envelope.logLevel
  return { ...params, _meta: meta }
}

const NAME_PARAM: Readonly<Record<string, string>> = {
  'tools/call': 'name',
  'prompts/get': 'name',
  'resources/read': 'uri',
}

/**
 * A header value as 2026-07-28 sends it: as is when header-safe, else `=?base64?…?=` of its
 * UTF-8 (non-ASCII, control characters, outer whitespace, or anything that looks encoded).
 */
export function encodeHeaderValue(value: string): string {
  const unsafe = /[^\x20-\x7e]|^\s|\s$|^=\?base64\?/.test(value)
  return unsafe ? `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=` : value
}

/**
 * The routing headers of one request on the 2026 HTTP hop. `inputSchema` is the upstream
 * tool's schema, whose `x-mcp-header` annotations name the `Mcp-Param-*` headers.
 */
export function modernHeaders(
  method: string,
  params: JsonObject | undefined,
  inputSchema?: JsonObject,
): Record<string, string> {
  const headers: Record<string, string> = {
    'mcp-protocol-version': MODERN_UPSTREAM_REVISION,
    'mcp-method': method,
  }
  const nameKey = NAME_PARAM[method]
  const name = nameKey === undefined ? undefined : params?.[nameKey]
  if (typeof name === 'string') headers['mcp-name'] = encodeHeaderValue(name)
  if (method === 'tools/call' && inputSchema) {
    Object.assign(headers, paramHeaders(inputSchema, params?.arguments))
  }
  return headers
}

/** `Mcp-Param-*` headers for arguments whose schema property carries `x-mcp-header`. */
export function paramHeaders(schema: JsonObject, args: unknown): Record<string, string> {
  const out: Record<string, string> = {}
  const walk = (node: JsonObject, value: unknown) => {
    const properties = node.properties
    if (!isPlainObject(properties) || !isPlainObject(value)) return
    for (const [key, sub] of Object.entries(properties)) {
      if (!isPlainObject(sub)) continue
      const v = value[key]
      const header = sub['x-mcp-header']
      if (typeof header === 'string' && v !== undefined && v !== null) {
        if (typeof v === 'string') out[`mcp-param-${header.toLowerCase()}`] = encodeHeaderValue(v)
        else if (typeof v === 'boolean' || Number.isSafeInteger(v)) {
          out[`mcp-param-${header.toLowerCase()}`] = String(v)
        }
      }
      walk(sub, v)
    }
  }
  walk(schema, args)
  return out
}
