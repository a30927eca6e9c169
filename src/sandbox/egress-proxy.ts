/**
 * The egress proxy of one confined upstream (docs/sandbox.md, ADR 040): an HTTP proxy that
 * Barbican runs on the host, listening on a unix socket that is bound into the sandbox (the
 * sandbox has a network namespace of its own, with no route out). It speaks `CONNECT host:port`
 * (tunnels, for HTTPS and anything else) and plain HTTP forwarding (`GET http://host/path`).
 *
 * Each attempt is checked by the upstream's EgressPolicy: the name and port asked for, then every
 * address DNS returns for it, at connect time; the connection goes to the address that was
 * checked, never to a second lookup. Every attempt, allowed or refused, is logged with the
 * upstream's name; refusals are also reported to `onRefused` (audit record and metric).
 */
import { lookup as dnsLookup } from 'node:dns/promises'
import { chmodSync } from 'node:fs'
import {
  createServer,
  request as httpRequest,
  type IncomingHttpHeaders,
  type IncomingMessage,
  type Server,
  type ServerResponse,
} from 'node:http'
import { connect, isIP, type Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { DEFAULT_EGRESS_MAX_CONNECTIONS } from '../config/egress-allow.ts'
import { unbracket } from '../net/address-policy.ts'
import type { Logger } from '../telemetry/log.ts'
import { EgressPolicy } from './egress-policy.ts'

/** One egress attempt, as logged and, when refused, reported. */
export interface EgressAttempt {
  readonly upstream: string
  /** `CONNECT`, or the forwarded request's method. */
  readonly method: string
  readonly host: string
  readonly port: number
  /** The address connected to (allowed) or refused, once DNS answered. */
  readonly address?: string | undefined
  readonly reason?: string | undefined
}

/** Resolves a name to its addresses (tests swap in a fixed answer). */
export type Resolver = (host: string) => Promise<readonly string[]>

export interface EgressProxyOptions {
  readonly upstream: string
  readonly allow: readonly string[]
  readonly log: Logger
  /** Told of every refused attempt (after it is logged). */
  readonly onRefused?: ((attempt: EgressAttempt) => void) | undefined
  /** Most connections from the sandbox at once; more are dropped (default 32). */
  readonly maxConnections?: number | undefined
  /** How long connecting to a destination may take (default 10 s). */
  readonly connectTimeoutMs?: number | undefined
  readonly resolve?: Resolver | undefined
}

export interface EgressProxy {
  readonly socketPath: string
  close(): Promise<void>
}

const systemResolver: Resolver = async (host) =>
  (await dnsLookup(host, { all: true, verbatim: true })).map((a) => a.address)

/** Headers that describe one hop, never forwarded (RFC 9110 §7.6.1), and the proxy's own. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authorization',
  'proxy-authenticate',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
])

class Refusal extends Error {}

/** What each proxied connection is judged and dialled with, made once per proxy. */
interface Gate {
  readonly policy: EgressPolicy
  readonly resolve: Resolver
  readonly options: EgressProxyOptions
  readonly connectTimeoutMs: number
}

/** Starts the proxy on `socketPath` (which must not exist); resolves once it listens. */
export async function startEgressProxy(
  socketPath: string,
  options: EgressProxyOptions,
): Promise<EgressProxy> {
  const gate: Gate = {
    policy: new EgressPolicy(options.allow),
    resolve: options.resolve ?? systemResolver,
    options,
    connectTimeoutMs: options.connectTimeoutMs ?? 10_000,
  }
  const sockets = new Set<Duplex>()
  const server: Server = createServer((req, res) => void forward(gate, req, res))
  server.on('connect', (req, client, head) => void tunnel(gate, req, client, head))
  server.on('connection', (socket) => {
    sockets.add(socket)
    socket.once('close', () => sockets.delete(socket))
  })
  server.maxConnections = options.maxConnections ?? DEFAULT_EGRESS_MAX_CONNECTIONS
  await new Promise<void>((ok, fail) => {
    server.once('error', fail)
    server.listen(socketPath, () => {
      server.off('error', fail)
      ok()
    })
  })
  // The sandbox uid (when Barbican is root) must be able to connect; the folder holding the
  // socket on the host is Barbican's own (0700), so no other host user reaches it.
  chmodSync(socketPath, 0o666)
  return {
    socketPath,
    close: () =>
      new Promise<void>((ok) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => ok())
      }),
  }
}

function refused({ options }: Gate, attempt: EgressAttempt): void {
  options.log.warn('egress refused', { ...attempt })
  options.onRefused?.(attempt)
}

/** Checks `host:port` and its DNS answers; returns the address to connect to. */
async function destination(
  gate: Gate,
  method: string,
  host: string,
  port: number,
): Promise<string> {
  const { policy, options } = gate
  const base = { upstream: options.upstream, method, host, port }
  const early = policy.refusesDestination(host, port)
  if (early !== undefined) {
    refused(gate, { ...base, reason: early })
    throw new Refusal(early)
  }
  const bare = unbracket(host)
  let addresses: readonly string[]
  try {
    addresses = isIP(bare) ? [bare] : await gate.resolve(bare)
  } catch (err) {
    const reason = `cannot resolve ${host}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`
    refused(gate, { ...base, reason })
    throw new Refusal(reason)
  }
  // Every answer is judged: a name with one public and one private address is refused whole.
  for (const address of addresses) {
    const why = policy.refusesAddress(host, address, port)
    if (why !== undefined) {
      refused(gate, { ...base, address, reason: why })
      throw new Refusal(why)
    }
  }
  const address = addresses[0]
  if (address === undefined) {
    const reason = `${host} has no address`
    refused(gate, { ...base, reason })
    throw new Refusal(reason)
  }
  options.log.info('egress allowed', { ...base, address })
  return address
}

function dial(address: string, port: number, connectTimeoutMs: number): Promise<Socket> {
  return new Promise<Socket>((ok, fail) => {
    const socket = connect({ host: address, port })
    socket.setTimeout(connectTimeoutMs, () =>
      socket.destroy(new Error(`connecting took more than ${connectTimeoutMs} ms`)),
    )
    socket.once('connect', () => {
      socket.setTimeout(0)
      ok(socket)
    })
    socket.once('error', fail)
  })
}

/** `CONNECT host:port`: a tunnel to an allowed destination, bytes piped both ways. */
async function tunnel(
  gate: Gate,
  req: IncomingMessage,
  client: Duplex,
  head: Buffer,
): Promise<void> {
  client.on('error', () => {})
  const target = /^(\[[^\]]+\]|[^:]+):(\d{1,5})$/.exec(req.url ?? '')
  if (!target) {
    client.end(reply(400, 'CONNECT needs host:port'))
    return
  }
  const host = target[1]!
  const port = Number(target[2])
  let remote: Socket
  try {
    const address = await destination(gate, 'CONNECT', host, port)
    remote = await dial(address, port, gate.connectTimeoutMs)
  } catch (err) {
    const status = err instanceof Refusal ? 403 : 502
    client.end(reply(status, (err as Error).message))
    return
  }
  remote.on('error', () => client.destroy())
  client.on('error', () => remote.destroy())
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  if (head.length > 0) remote.write(head)
  remote.pipe(client)
  client.pipe(remote)
  client.once('close', () => remote.destroy())
  remote.once('close', () => client.destroy())
}

/** A plain `http://` request to an allowed destination, forwarded without hop-by-hop headers. */
async function forward(gate: Gate, req: IncomingMessage, res: ServerResponse): Promise<void> {
  let url: URL
  try {
    url = new URL(req.url ?? '')
  } catch {
    send(res, 400, 'a proxy request needs an absolute http:// URL')
    return
  }
  if (url.protocol !== 'http:') {
    send(res, 400, `only http:// is forwarded; use CONNECT for ${url.protocol}`)
    return
  }
  const port = Number(url.port || 80)
  let address: string
  try {
    address = await destination(gate, req.method ?? 'GET', url.hostname, port)
  } catch (err) {
    send(res, err instanceof Refusal ? 403 : 502, (err as Error).message)
    return
  }
  const headers = endToEnd(req.headers)
  headers.host = url.host
  const outbound = httpRequest({
    host: address,
    port,
    method: req.method,
    path: `${url.pathname}${url.search}`,
    headers,
    timeout: gate.connectTimeoutMs,
  })
  outbound.once('response', (answer) => {
    res.writeHead(answer.statusCode ?? 502, endToEnd(answer.headers))
    answer.pipe(res)
  })
  outbound.once('timeout', () => outbound.destroy(new Error('the destination did not answer')))
  outbound.once('error', (err) => {
    if (!res.headersSent) send(res, 502, err.message)
    else res.destroy()
  })
  req.pipe(outbound)
}

/** The headers meant for the other end: the hop-by-hop ones left out. */
function endToEnd(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [key, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(key)) out[key] = value
  }
  return out
}

function reply(status: number, reason: string): string {
  const body = `Barbican egress proxy: ${reason}\n`
  return (
    `HTTP/1.1 ${status} ${status === 403 ? 'Forbidden' : status === 400 ? 'Bad Request' : 'Bad Gateway'}\r\n` +
    `Content-Type: text/plain; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Connection: close\r\n\r\n${body}`
  )
}

function send(res: ServerResponse, status: number, reason: string): void {
  res.writeHead(status, { 'content-type': 'text/plain; charset=utf-8', connection: 'close' })
  res.end(`Barbican egress proxy: ${reason}\n`)
}
