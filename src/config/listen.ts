/**
 * Listen addresses: the `HOST:PORT` form shared by the config file and `--listen`, and the
 * loopback test the safe-default rules depend on.
 */
import { isIP } from 'node:net'
import type { ListenAddress } from './config.ts'

/** Default bind address: loopback only, so a new gateway is never reachable from the network. */
export const DEFAULT_LISTEN: ListenAddress = Object.freeze({ host: '127.0.0.1', port: 7300 })

/**
 * Parses `HOST:PORT` (`127.0.0.1:7300`, `localhost:8080`, `[::1]:7300`). Returns a reason
 * instead of throwing so both the config validator and the CLI can word their own error.
 */
export function parseListen(text: string): ListenAddress | { readonly error: string } {
  const match = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text.trim())
  if (!match) return { error: 'expected "HOST:PORT", e.g. "127.0.0.1:7300" or "[::1]:7300"' }
  const host = match[1] ?? match[2] ?? ''
  if (match[1] !== undefined && isIP(host) !== 6) {
    return { error: `"[${host}]" is not an IPv6 address` }
  }
  const port = Number(match[3])
  if (port > 65535) return { error: `port ${port} is out of range (0-65535)` }
  return { host, port }
}

/** Formats an address the way it appears in a URL or a `Host` header. */
export function formatListen(address: ListenAddress): string {
  return `${hostForHeader(address.host)}:${address.port}`
}

/** `::1` → `[::1]`; other hosts unchanged (lower-cased, as Host headers are compared). */
export function hostForHeader(host: string): string {
  return isIP(host) === 6 ? `[${host.toLowerCase()}]` : host.toLowerCase()
}

/**
 * True for addresses only this machine can reach: `localhost`, 127.0.0.0/8, `::1` and the
 * IPv4-mapped loopback. Wildcards (`0.0.0.0`, `::`) are not loopback.
 */
export function isLoopbackHost(host: string): boolean {
  const bare = host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
  const lower = bare.toLowerCase()
  if (lower === 'localhost' || lower.endsWith('.localhost')) return true
  if (isIP(lower) === 4) return lower.startsWith('127.')
  if (isIP(lower) === 6) {
    if (lower === '::1' || lower === '0:0:0:0:0:0:0:1') return true
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
    return mapped?.[1]?.startsWith('127.') === true
  }
  return false
}

/** True for the "every interface" addresses, which no client ever sends as a Host. */
export function isWildcardHost(host: string): boolean {
  return host === '0.0.0.0' || host === '::' || host === '[::]'
}
