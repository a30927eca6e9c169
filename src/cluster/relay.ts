/**
 * Relays one HTTP exchange to the replica that owns its session (docs/decisions/058): the
 * request line, headers and body as the client sent them, and the owner's reply, streams
 * included, back as it comes. Only hop-by-hop headers are dropped.
 */
import { Agent, type IncomingMessage, request, type ServerResponse } from 'node:http'
import { HOP_HEADER } from '../transports/session-directory.ts'

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
    let connected = false
    const connectTimer = setTimeout(
      () => out.destroy(new Error('connect timeout')),
      options.connectTimeoutMs,
    )
    const onConnect = () => {
      connected = true
      clearTimeout(connectTimer)
    }
    out.on('socket', (socket) => {
      if (!socket.connecting) onConnect()
      else socket.once('connect', onConnect)
    })
    out.on('response', (reply) => {
      answered = true
      clearTimeout(connectTimer)
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
      clearTimeout(connectTimer)
      if (answered || res.headersSent) {
        res.destroy()
        resolve('relayed')
      } else resolve(connected ? 'cut' : 'unreachable')
    })
    // The client gave up: so does the hop (the owner sees its request cancelled).
    res.on('close', () => {
      if (!res.writableFinished) out.destroy()
    })
    if (options.body !== undefined) out.end(options.body)
    else req.pipe(out)
  })
}
