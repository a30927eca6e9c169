/**
 * The host side of one connect grant (docs/sandbox.md, "Connect grants"): a unix socket, bound
 * into the sandbox where a socat listener carries connections to it (src/sandbox/forwarders.ts),
 * and a plain TCP relay from each connection to the one host:port the grant names. The socket
 * leads nowhere else: what a server may reach is decided by which sockets exist, one per grant.
 * Every connection is logged with the upstream's name, the destination and the address reached,
 * as the egress proxy logs its attempts; one the destination refuses is logged as failed.
 */
import { chmodSync } from 'node:fs'
import { connect, createServer, type Server, type Socket } from 'node:net'
import type { ConnectGrant } from '../config/sandbox-grants.ts'
import type { Logger } from '../telemetry/log.ts'

export interface ConnectForwardOptions {
  readonly upstream: string
  readonly grant: ConnectGrant
  readonly log: Logger
  /** Most connections at once; more are dropped (default 32). */
  readonly maxConnections?: number | undefined
  /** How long connecting to the destination may take (default 10 s). */
  readonly connectTimeoutMs?: number | undefined
}

export interface ConnectForward {
  readonly socketPath: string
  close(): Promise<void>
}

/** Starts the forward on `socketPath` (which must not exist); resolves once it listens. */
export async function startConnectForward(
  socketPath: string,
  options: ConnectForwardOptions,
): Promise<ConnectForward> {
  const { host, port, source } = options.grant
  const timeout = options.connectTimeoutMs ?? 10_000
  const sockets = new Set<Socket>()
  const base = { upstream: options.upstream, host, port, source }

  const relay = (client: Socket) => {
    sockets.add(client)
    client.once('close', () => sockets.delete(client))
    client.on('error', () => {})
    client.pause()
    // Node tries every address the name has (IPv6 and IPv4 alike), as a client outside would.
    const remote = connect({ host: host.replace(/^\[|\]$/g, ''), port, autoSelectFamily: true })
    sockets.add(remote)
    remote.once('close', () => sockets.delete(remote))
    remote.setTimeout(timeout, () =>
      remote.destroy(new Error(`connecting took more than ${timeout} ms`)),
    )
    remote.once('connect', () => {
      remote.setTimeout(0)
      options.log.info('connect allowed', { ...base, address: remote.remoteAddress })
      remote.pipe(client)
      client.pipe(remote)
      client.resume()
    })
    remote.once('error', (err) => {
      if (!remote.remoteAddress) {
        const reason = (err as NodeJS.ErrnoException).code ?? err.message
        options.log.warn('connect failed', { ...base, reason })
      }
      client.destroy()
    })
    client.once('close', () => remote.destroy())
    remote.once('close', () => client.destroy())
  }

  const server: Server = createServer(relay)
  server.maxConnections = options.maxConnections ?? 32
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
