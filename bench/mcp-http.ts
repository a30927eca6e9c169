/**
 * The few MCP-over-HTTP steps the benchmark needs, written against raw JSON-RPC so the load
 * generator measures the server, not a client SDK: open a legacy session, send `tools/call`, and
 * read a reply whether it comes as JSON or as one SSE event.
 */
import type { Dispatcher } from 'undici'

/** One endpoint under test. */
export interface Target {
  readonly url: string
  /** Whether the endpoint needs an `initialize` (and then the `Mcp-Session-Id` header). */
  readonly stateful: boolean
  /** Sent on every request (e.g. `authorization` for a gateway with inbound auth). */
  readonly headers?: Readonly<Record<string, string>>
  /** Speak 2026-07-28: every call stateless, with its routing headers and `_meta` (no session). */
  readonly stateless2026?: boolean
}

/** The stateless revision (its calls carry their version and capabilities in `_meta`). */
export const STATELESS_VERSION = '2026-07-28'

/** The revision the load generator speaks (the newest legacy one; every peer supports it). */
export const PROTOCOL_VERSION = '2025-11-25'

/** A legacy session: its id (absent when the server does not issue one). */
export interface HttpSession {
  readonly id: string | undefined
}

const BASE_HEADERS = {
  'content-type': 'application/json',
  accept: 'application/json, text/event-stream',
}

function headersFor(target: Target, session: HttpSession | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    ...BASE_HEADERS,
    ...target.headers,
    'mcp-protocol-version': PROTOCOL_VERSION,
  }
  if (session?.id !== undefined) headers['mcp-session-id'] = session.id
  return headers
}

/** POSTs one JSON-RPC message and returns the reply message (undefined for a 202). */
export async function post(
  dispatcher: Dispatcher,
  target: Target,
  body: string,
  headers: Record<string, string>,
): Promise<{ message: unknown; sessionId: string | undefined }> {
  const url = new URL(target.url)
  const res = await dispatcher.request({
    origin: url.origin,
    path: url.pathname,
    method: 'POST',
    headers,
    body,
  })
  const text = await res.body.text()
  const sid = res.headers['mcp-session-id']
  const sessionId = typeof sid === 'string' ? sid : undefined
  if (res.statusCode === 202) return { message: undefined, sessionId }
  if (res.statusCode !== 200) throw new Error(`HTTP ${res.statusCode}: ${text.slice(0, 200)}`)
  const type = String(res.headers['content-type'] ?? '')
  return {
    message: type.startsWith('text/event-stream') ? lastSseData(text) : JSON.parse(text),
    sessionId,
  }
}

/** The JSON of the last `data:` event in an SSE body (a reply stream ends with the reply). */
function lastSseData(text: string): unknown {
  let last: string | undefined
  for (const event of text.split(/\r?\n\r?\n/)) {
    const data = event
      .split(/\r?\n/)
      .filter((line) => line.startsWith('data:'))
      .map((line) => line.slice(5).trimStart())
    if (data.length > 0) last = data.join('\n')
  }
  if (last === undefined) throw new Error('SSE reply without data')
  return JSON.parse(last)
}

/** Runs `initialize` and `notifications/initialized`; returns the session to use afterwards. */
export async function initializeSession(
  dispatcher: Dispatcher,
  target: Target,
): Promise<HttpSession> {
  const init = JSON.stringify({
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: {
      protocolVersion: PROTOCOL_VERSION,
      capabilities: {},
      clientInfo: { name: 'barbican-bench', version: '1.0.0' },
    },
  })
  const headers: Record<string, string> = { ...BASE_HEADERS, ...target.headers }
  const { message, sessionId } = await post(dispatcher, target, init, headers)
  const result = (message as { result?: { protocolVersion?: unknown } } | undefined)?.result
  if (typeof result?.protocolVersion !== 'string') {
    throw new Error(`initialize failed: ${JSON.stringify(message).slice(0, 200)}`)
  }
  const session: HttpSession = { id: sessionId }
  await post(
    dispatcher,
    target,
    JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }),
    headersFor(target, session),
  )
  return session
}

/**
 * The one POST of a 2026-07-28 `tools/call echo { text }`: its body (version and capabilities in
 * `_meta`) and headers (the routing headers the gateway requires, and the target's own, such as
 * its auth). Also what bench/wrk.ts sends, so both load generators send the same request.
 */
export function statelessToolCall(
  target: Target,
  id: number,
  text: string,
): { body: string; headers: Record<string, string> } {
  return {
    body: `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":${JSON.stringify(text)}},"_meta":{"io.modelcontextprotocol/protocolVersion":"${STATELESS_VERSION}","io.modelcontextprotocol/clientCapabilities":{}}}}`,
    headers: {
      ...BASE_HEADERS,
      ...target.headers,
      'mcp-protocol-version': STATELESS_VERSION,
      'mcp-method': 'tools/call',
      'mcp-name': 'echo',
    },
  }
}

/** Sends `tools/call echo { text }` with request id `id`. */
export async function toolCall(
  dispatcher: Dispatcher,
  target: Target,
  session: HttpSession | undefined,
  id: number,
  text: string,
): Promise<unknown> {
  if (target.stateless2026) {
    const { body, headers } = statelessToolCall(target, id, text)
    return (await post(dispatcher, target, body, headers)).message
  }
  const body = `{"jsonrpc":"2.0","id":${id},"method":"tools/call","params":{"name":"echo","arguments":{"text":${JSON.stringify(text)}}}}`
  return (await post(dispatcher, target, body, headersFor(target, session))).message
}

/** Throws unless `reply` is the echo tool's answer to request `id` for `text`. */
export function checkEcho(reply: unknown, id: number, text: string): void {
  const r = reply as
    | { id?: unknown; result?: { content?: { type?: unknown; text?: unknown }[] }; error?: unknown }
    | undefined
  const content = r?.result?.content?.[0]
  if (r?.id !== id || content?.type !== 'text' || content.text !== `echo: ${text}`) {
    throw new Error(`unexpected reply: ${JSON.stringify(reply).slice(0, 200)}`)
  }
}

/** Ends a session with DELETE (so peers that hold a child per session release it). */
export async function closeSession(
  dispatcher: Dispatcher,
  target: Target,
  session: HttpSession | undefined,
): Promise<void> {
  if (session?.id === undefined) return
  const url = new URL(target.url)
  const res = await dispatcher.request({
    origin: url.origin,
    path: url.pathname,
    method: 'DELETE',
    headers: headersFor(target, session),
  })
  await res.body.dump()
}

/**
 * Sends `n` stateless `tools/call echo` requests to `target` from `concurrency` workers, each
 * waiting for its reply before the next, and checks every reply.
 */
export async function echoCalls(
  dispatcher: Dispatcher,
  target: Target,
  n: number,
  concurrency: number,
): Promise<void> {
  let id = 0
  await Promise.all(
    Array.from({ length: concurrency }, async (_, w) => {
      for (let i = 0; i < n / concurrency; i++) {
        const text = `w${w}-${i}`
        const me = ++id
        checkEcho(await toolCall(dispatcher, target, undefined, me, text), me, text)
      }
    }),
  )
}
