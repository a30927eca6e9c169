/**
 * The grammar of `sandbox.network.allow` entries (docs/sandbox.md, ADR 040): an exact host name,
 * a `*.suffix` pattern, an IP address or a CIDR range, each with an optional `:port` (`:*` for any
 * port; without one, only 80 and 443). The config schema rejects an entry this cannot read; the
 * egress proxy matches destinations against the rules it returns (src/sandbox/egress-policy.ts).
 */
import { BlockList, isIP } from 'node:net'

/** `sandbox.network.maxConnections` when unset: connections through the egress proxy at once. */
export const DEFAULT_EGRESS_MAX_CONNECTIONS = 32

/** Ports a rule without `:port` admits. */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443]

export type Ports = 'any' | readonly number[]

export interface NameRule {
  readonly kind: 'exact' | 'suffix'
  /** Lower-case; for `suffix`, with its leading dot (`.example.com`). */
  readonly name: string
  readonly ports: Ports
}

export interface AddressRule {
  readonly kind: 'address'
  readonly list: BlockList
  readonly ports: Ports
}

export type Rule = NameRule | AddressRule

/** Why an allow entry cannot be read, or undefined when it can (the config schema asks). */
export function egressEntryProblem(entry: string): string | undefined {
  try {
    parseEgressEntry(entry)
    return undefined
  } catch (err) {
    return (err as Error).message
  }
}

function parsePorts(text: string | undefined, entry: string): Ports {
  if (text === undefined) return DEFAULT_EGRESS_PORTS
  if (text === '*') return 'any'
  const port = Number(text)
  if (!/^\d{1,5}$/.test(text) || port < 1 || port > 65_535) {
    throw new Error(`"${entry}": the port must be 1-65535 or *`)
  }
  return [port]
}

/** The rule one entry states; throws an Error naming the entry when it cannot be read. */
export function parseEgressEntry(raw: string): Rule {
  const entry = raw.trim().toLowerCase()
  // [v6]:port, v4:port, name:port; a bare IPv6 address has several colons and no port.
  let host = entry
  let port: string | undefined
  const bracketed = /^\[([^\]]+)\](?::(.+))?$/.exec(entry)
  if (bracketed) {
    host = bracketed[1]!
    port = bracketed[2]
  } else if ((entry.match(/:/g) ?? []).length === 1) {
    const at = entry.lastIndexOf(':')
    host = entry.slice(0, at)
    port = entry.slice(at + 1)
  }
  const ports = parsePorts(port, raw)
  const cidr = /^(.+)\/(\d{1,3})$/.exec(host)
  if (cidr && isIP(cidr[1]!)) {
    const family = isIP(cidr[1]!) === 6 ? 'ipv6' : 'ipv4'
    const prefix = Number(cidr[2])
    if (prefix > (family === 'ipv6' ? 128 : 32)) throw new Error(`"${raw}": bad prefix length`)
    const list = new BlockList()
    list.addSubnet(cidr[1]!, prefix, family)
    return { kind: 'address', list, ports }
  }
  if (isIP(host)) {
    const list = new BlockList()
    list.addAddress(host, isIP(host) === 6 ? 'ipv6' : 'ipv4')
    return { kind: 'address', list, ports }
  }
  const wildcard = host.startsWith('*.')
  const name = wildcard ? host.slice(1) : host
  const labels = (wildcard ? name.slice(1) : name).split('.')
  if (labels.some((l) => !/^[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?$/.test(l))) {
    throw new Error(
      `"${raw}": expected a host name, *.domain, an IP address or a CIDR range, with an optional :port`,
    )
  }
  if (wildcard && labels.length < 2) {
    throw new Error(`"${raw}": a wildcard needs a domain of at least two labels (*.example.com)`)
  }
  return { kind: wildcard ? 'suffix' : 'exact', name, ports }
}
