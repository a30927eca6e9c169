/**
 * Inbound `Mcp-Param-*` validation (2026-07-28 streamable HTTP, SEP-2243): for a `tools/call`
 * whose tool declares `x-mcp-header` on an argument, the client must mirror that argument in
 * the named header, and a body-parsing intermediary must check that header and body agree.
 * A mismatch, a missing header, or a malformed encoded value is a -32020 HeaderMismatch.
 */
import { isPlainObject, type JsonObject } from '../protocol/jsonrpc.ts'

type Headers = Readonly<Record<string, string | string[] | undefined>>

/** Decodes a `=?base64?…?=` header value; undefined when malformed. */
export function decodeHeaderValue(value: string): string | undefined {
  const sentinel = /^=\?base64\?(.*)\?=$/.exec(value)
  // Only the complete sentinel form is encoded; anything else is the literal value.
  if (!sentinel) return value
  const body = sentinel[1] ?? ''
  if (body.length % 4 !== 0 || !/^[A-Za-z0-9+/]*={0,2}$/.test(body)) return undefined
  try {
    return new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(body, 'base64'))
  } catch {
    return undefined
  }
}

/** Why the `Mcp-Param-*` headers disagree with the arguments; undefined when they agree. */
export function paramHeaderMismatch(
  headers: Headers,
  inputSchema: unknown,
  args: unknown,
): string | undefined {
  if (!isPlainObject(inputSchema)) return undefined
  const problems: string[] = []
  const walk = (node: JsonObject, value: unknown) => {
    const properties = node.properties
    if (!isPlainObject(properties)) return
    const object = isPlainObject(value) ? value : {}
    for (const [key, sub] of Object.entries(properties)) {
      if (!isPlainObject(sub)) continue
      const header = sub['x-mcp-header']
      if (typeof header === 'string') {
        const problem = compare(headers, header, object[key])
        if (problem) problems.push(problem)
      }
      walk(sub, object[key])
    }
  }
  walk(inputSchema, args)
  return problems[0]
}

function compare(headers: Headers, name: string, value: unknown): string | undefined {
  const raw = headers[`mcp-param-${name.toLowerCase()}`]
  const label = `Mcp-Param-${name}`
  if (Array.isArray(raw)) return `The ${label} header is repeated`
  if (value === undefined || value === null) {
    return raw === undefined ? undefined : `The ${label} header names an argument the body omits`
  }
  if (raw === undefined) return `The ${label} header is required for this tool`
  const decoded = decodeHeaderValue(raw)
  if (decoded === undefined) return `Malformed ${label} header`
  const agrees =
    typeof value === 'number'
      ? decoded.trim() !== '' && Number(decoded) === value
      : typeof value === 'boolean'
        ? decoded === String(value)
        : decoded === value
  return agrees
    ? undefined
    : `Header mismatch: ${label} header value '${decoded}' does not match body value '${String(value)}'`
}
