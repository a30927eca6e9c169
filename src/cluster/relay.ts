/**
 * Relays one HTTP exchange to the replica that owns its session (docs/decisions/058): the
 * request line, headers and body as the client sent them, and the owner's reply, streams
 * included, back as it comes. Only hop-by-hop headers are dropped. A WebSocket client's retry
 * of a held call is posted to its holder as one request, and the holder's answer read back
 * message by message (docs/decisions/088).
 */
import {
  Agent,
  type ClientRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  request,
  type ServerResponse,
} from 'node:http'
import { HOP_HEADER } from '../transports/session-directory.ts'
import { SseDecoder } from '../transports/sse-decoder.ts'

/** Headers that describe one connection, not the message (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'trailer',
])

/**
 * How the relay ended. `unreachable`: no connection to the owner was made, so nothing reached
 * it. `cut`: the connection failed after the request may have reached the owner, before any
 * reply. In both cases the client is not answered yet.
 */
export type RelayOutcome = 'relayed' | 'unreachable' | 'cut'

export interface RelayOptions {
  /** Sent as the hop header: the relaying replica's id. */
  readonly from: string
  /** A connection to the owner not made by then counts as the owner being gone. */
  readonly connectTimeoutMs: number
  readonly agent: Agent
  /**
   * The request body when the receiving replica has read it already (a held call's retry is
   * recognised by its body); otherwise the body is piped from `req` as it arrives.
   */
  readonly body?: string | undefined
}

/** A keep-alive pool for the connections between replicas. */
export function peerAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 256 })
}

function copyHeaders(headers: IncomingMessage['headers']): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue
    out[name] = value
  }
  return out
}

/**
 * Gives `out` `timeoutMs` to connect, and destroys it ('connect timeout') if it does not. Whether
 * it connected tells a failure apart: before, the peer never saw the request (`unreachable`);
 * after, it may have (`cut`), and the request must not be sent again blindly.
 */
function watchConnect(
  out: ClientRequest,
  timeoutMs: number,
): { connected(): boolean; reached(): void; stopWatching(): void } {
  let connected = false
  const timer = setTimeout(() => out.destroy(new Error('connect timeout')), timeoutMs)
  const reached = () => {
    connected = true
    clearTimeout(timer)
  }
  out.on('socket', (socket) => {
    if (!socket.connecting) reached()
    else socket.once('connect', reached)
  })
  return { connected: () => connected, reached, stopWatching: () => clearTimeout(timer) }
}

/**
 * Sends `req` to `ownerUrl` (the owner's advertised base URL) and pipes the reply to `res`.
 * Settles `unreachable` when the owner refused or did not accept the connection in time (the
 * client is then still unanswered); a failure after the owner began to reply ends `res`.
 */
export function relayTo(
  ownerUrl: string,
  req: IncomingMessage,
  res: ServerResponse,
  options: RelayOptions,
): Promise<RelayOutcome> {
  return new Promise((resolve) => {
    const headers = copyHeaders(req.headers)
    headers[HOP_HEADER] = options.from
    if (options.body !== undefined)
      headers['content-length'] = String(Buffer.byteLength(options.body))
    const out = request(new URL(req.url ?? '/', ownerUrl), {
      method: req.method ?? 'GET',
      headers,
      agent: options.agent,
    })
    let answered = false
    const connection = watchConnect(out, options.connectTimeoutMs)
    out.on('response', (reply) => {
      answered = true
      connection.stopWatching()
      res.writeHead(reply.statusCode ?? 502, copyHeaders(reply.headers))
      // An event stream's first bytes may be a long time coming: send the head now.
      res.flushHeaders()
      reply.pipe(res)
      reply.on('error', () => res.destroy())
      reply.on('end', () => resolve('relayed'))
      reply.on('close', () => {
        if (!reply.complete) res.destroy()
        resolve('relayed')
      })
    })
    out.on('error', () => {
      connection.stopWatching()
      if (answered || res.headersSent) {
        res.destroy()
        resolve('relayed')
      } else resolve(connection.connected() ? 'cut' : 'unreachable')
    })
    // The client gave up: so does the hop (the owner sees its request cancelled).
    res.on('close', () => {
      if (!res.writableFinished) out.destroy()
    })
    if (options.body !== undefined) out.end(options.body)
    else req.pipe(out)
  })
}

/**
 * Headers of a WebSocket upgrade that describe the handshake, not the client: everything else
 * (its credential, Host and Origin among them) goes with a retry posted for it.
 */
function isHandshakeHeader(name: string): boolean {
  return (
    HOP_BY_HOP.has(name) ||
    name.startsWith('sec-websocket-') ||
    name.startsWith('mcp-') ||
    name === 'content-length' ||
    name === 'content-type' ||
    name === 'accept' ||
    name === 'last-event-id' ||
    name === HOP_HEADER
  )
}

export interface PostOptions {
  /** Sent as the hop header: the relaying replica's id. */
  readonly from: string
  readonly connectTimeoutMs: number
  readonly agent: Agent
  /** Aborting it ends the request (the holder sees its client go, as over HTTP). */
  readonly signal: AbortSignal
  /** Longest answer read: a JSON body, or one event of a stream. */
  readonly maxBytes: number
  /** Each JSON value of the answer, in order: the body, or each event's data. */
  readonly onMessage: (message: unknown) => void
}

/**
 * POSTs `body` (one JSON-RPC request) to `path` at the replica `url` with the client's headers
 * from its WebSocket upgrade plus `routing`, and hands the answer to `onMessage`. `relayed`:
 * the answer was read to its end (whatever its status); `unreachable`: no connection was made;
 * `cut`: the exchange failed after the request may have reached the replica.
 */
export function postTo(
  url: string,
  path: string,
  client: IncomingHttpHeaders,
  routing: Readonly<Record<string, string>>,
  body: string,
  options: PostOptions,
): Promise<RelayOutcome> {
  return new Promise((resolve) => {
    const headers: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(client)) {
      if (value !== undefined && !isHandshakeHeader(name)) headers[name] = value
    }
    Object.assign(headers, routing, {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'content-length': String(Buffer.byteLength(body)),
      [HOP_HEADER]: options.from,
    })
    const out = request(new URL(path, url), {
      method: 'POST',
      headers,
      agent: options.agent,
      signal: options.signal,
    })
    const connection = watchConnect(out, options.connectTimeoutMs)
    let settled = false
    const settle = (outcome: RelayOutcome) => {
      if (settled) return
      settled = true
      connection.stopWatching()
      resolve(outcome)
    }
    out.on('response', (reply) => {
      connection.reached()
      const deliver = (text: string) => {
        if (text.trim() === '') return
        try {
          options.onMessage(JSON.parse(text))
        } catch {
          // Not JSON: no message; the caller answers for the missing response.
        }
      }
      const fail = () => {
        reply.destroy()
        settle('cut')
      }
      if (/^text\/event-stream/i.test(reply.headers['content-type'] ?? '')) {
        const decoder = new SseDecoder({
          maxEventBytes: options.maxBytes,
          onEvent: (event) => deliver(event.data),
        })
        reply.on('data', (chunk: Buffer) => {
          try {
            decoder.feed(chunk)
          } catch {
            fail()
          }
        })
        reply.on('end', () => {
          try {
            decoder.end()
            settle('relayed')
          } catch {
            fail()
          }
        })
      } else {
        const chunks: Buffer[] = []
        let bytes = 0
        reply.on('data', (chunk: Buffer) => {
          bytes += chunk.length
          if (bytes > options.maxBytes) fail()
          else chunks.push(chunk)
        })
        reply.on('end', () => {
          deliver(Buffer.concat(chunks).toString('utf8'))
          settle('relayed')
        })
      }
      reply.on('error', () => settle('cut'))
      reply.on('close', () => {
        if (!reply.complete) settle('cut')
      })
    })
    out.on('error', () => settle(connection.connected() ? 'cut' : 'unreachable'))
    out.end(body)
  })
}
