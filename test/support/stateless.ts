/**
 * A 2026-07-28 client over HTTP, as the end-to-end tests speak it: one stateless request per
 * POST, answered as JSON or as an SSE stream whose last JSON-RPC response is the answer.
 */
type Json = Record<string, unknown>

/** The response a POST answered with (the result or error frame), and the raw body. */
export async function finalReply(res: Response): Promise<{ text: string; final?: Json }> {
  const text = await res.text()
  const frames = res.headers.get('content-type')?.includes('text/event-stream')
    ? text
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => JSON.parse(l.slice(5)) as Json)
    : [JSON.parse(text) as Json]
  const final = frames.find((f) => 'result' in f || 'error' in f)
  return final === undefined ? { text } : { text, final }
}

export interface StatelessToolCall {
  readonly name: string
  readonly arguments?: Json
  readonly id?: number
  /** More params members beside name and arguments (e.g. inputResponses, requestState). */
  readonly params?: Json
  /** More `_meta` members beside the protocol version and the client capabilities. */
  readonly meta?: Json
  readonly capabilities?: Json
  /** More HTTP headers (e.g. authorization, traceparent). */
  readonly headers?: Record<string, string>
}

/** POSTs one stateless `tools/call` with its routing headers. */
export async function postStatelessToolCall(
  url: string,
  call: StatelessToolCall,
): Promise<{ status: number; headers: Headers; text: string; final?: Json }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': call.name,
      ...call.headers,
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: call.id ?? 1,
      method: 'tools/call',
      params: {
        name: call.name,
        arguments: call.arguments ?? {},
        ...call.params,
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientCapabilities': call.capabilities ?? {},
          ...call.meta,
        },
      },
    }),
  })
  return { status: res.status, headers: res.headers, ...(await finalReply(res)) }
}
