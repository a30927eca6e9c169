/**
 * What Barbican puts on a request to a 2026-07-28 upstream: the per-request `_meta` envelope
 * (version, client capabilities, client info, log level) and the HTTP routing headers that must
 * mirror the body (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, `Mcp-Param-*`). Legacy
 * clients' session capabilities are mapped to their 2026 form here.
 */
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'
import { methodSpec } from '../protocol/methods.ts'
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
  // The method table (protocol/methods.ts) says which params member `Mcp-Name` mirrors.
  const nameKey = methodSpec(method)?.nameParam
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

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
const HEADER_TYPES = new Set(['string', 'integer', 'boolean'])

/**
 * Why a tool's `x-mcp-header` annotations are invalid (2026-07-28: non-empty RFC 9110 token,
 * unique ignoring case, only on string/integer/boolean properties reached through `properties`
 * alone), or undefined. HTTP clients must leave such tools out of their view.
 */
export function xMcpHeaderProblem(inputSchema: unknown): string | undefined {
  const seen = new Set<string>()
  let viaProperties = 0
  let problem: string | undefined
  const walk = (node: JsonObject) => {
    const properties = node.properties
    if (!isPlainObject(properties)) return
    for (const sub of Object.values(properties)) {
      if (!isPlainObject(sub)) continue
      if ('x-mcp-header' in sub) {
        viaProperties++
        const name = sub['x-mcp-header']
        if (typeof name !== 'string' || !TOKEN.test(name)) problem ??= 'not a header token'
        else if (seen.has(name.toLowerCase())) problem ??= `duplicate header ${name}`
        else seen.add(name.toLowerCase())
        if (typeof sub.type !== 'string' || !HEADER_TYPES.has(sub.type)) {
          problem ??= `x-mcp-header on a ${JSON.stringify(sub.type)} property`
        }
      }
      walk(sub)
    }
  }
  if (isPlainObject(inputSchema)) walk(inputSchema)
  if (problem) return problem
  return countAnnotations(inputSchema) === viaProperties
    ? undefined
    : 'x-mcp-header outside a plain properties chain'
}

function countAnnotations(value: unknown): number {
  if (Array.isArray(value)) return value.reduce((n: number, v) => n + countAnnotations(v), 0)
  if (!isPlainObject(value)) return 0
  let n = 'x-mcp-header' in value ? 1 : 0
  for (const v of Object.values(value)) n += countAnnotations(v)
  return n
}
