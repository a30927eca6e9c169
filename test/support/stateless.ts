/**
 * A 2026-07-28 client over HTTP, as the end-to-end tests speak it: one stateless request per
 * POST, answered as JSON or as an SSE stream whose last JSON-RPC response is the answer; and the
 * same requests over one WebSocket.
 */
import { once } from 'node:events'
import WebSocket from 'ws'

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
  signal?: AbortSignal,
): Promise<{ status: number; headers: Headers; text: string; final?: Json }> {
  const res = await fetch(url, {
    ...(signal === undefined ? {} : { signal }),
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'tools/call',
      'mcp-name': call.name,
      ...call.headers,
    },
    body: JSON.stringify(statelessToolCall(call)),
  })
  return { status: res.status, headers: res.headers, ...(await finalReply(res)) }
}

/** The JSON-RPC request of one stateless `tools/call`, with its `_meta` envelope. */
export function statelessToolCall(call: StatelessToolCall): Json {
  return {
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
  }
}

/**
 * A 2026-07-28 client on one WebSocket (`/ws`, subprotocol `mcp`): each request a text frame,
 * each answer its response, with the notifications that came before it.
 */
export class StatelessSocket {
  readonly ws: WebSocket
  readonly #waiting = new Map<unknown, (frame: Json) => void>()
  readonly #notes = new Map<unknown, Json[]>()
  #nextId = 1

  private constructor(ws: WebSocket) {
    this.ws = ws
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as Json
      if ('id' in frame && ('result' in frame || 'error' in frame)) {
        this.#waiting.get(frame.id)?.(frame)
        this.#waiting.delete(frame.id)
      } else {
        const token = ((frame.params as Json | undefined)?.progressToken ?? null) as unknown
        this.#notes.set(token, [...(this.#notes.get(token) ?? []), frame])
      }
    })
  }

  /** Opens a connection to `url` (`http://…`; the path is `/ws` and `path`). */
  static async open(url: string, path = '/ws', headers: Record<string, string> = {}) {
    const ws = new WebSocket(`${url.replace(/^http/, 'ws')}${path}`, 'mcp', { headers })
    await once(ws, 'open')
    return new StatelessSocket(ws)
  }

  /** Sends one `tools/call` and resolves with its response. */
  call(call: StatelessToolCall): Promise<Json> {
    const id = call.id ?? this.#nextId++
    const answer = new Promise<Json>((resolve) => this.#waiting.set(id, resolve))
    this.ws.send(JSON.stringify(statelessToolCall({ ...call, id })))
    return answer
  }

  /** The notifications received for `progressToken` (null: those without one). */
  notes(progressToken: unknown): Json[] {
    return this.#notes.get(progressToken) ?? []
  }

  get open(): boolean {
    return this.ws.readyState === WebSocket.OPEN
  }

  close(): void {
    this.ws.close()
  }
}
