/**
 * Which destinations a confined server may reach through its egress proxy
 * (`sandbox.network.allow`, docs/sandbox.md, ADR 040). Two checks, in order:
 *
 * 1. The name and port the server asked for must match an entry: an exact host name, a
 *    `*.suffix` pattern (subdomains only), an IP address or a CIDR range, each with an optional
 *    `:port` (`:*` for any port; without one, only 80 and 443).
 * 2. Every address DNS returns for it, at connect time, must be public, or be covered by an IP
 *    or CIDR entry for that port. A listed *name* never makes a loopback, private, link-local or
 *    metadata address reachable: a name's DNS answers can change (rebinding), an address entry
 *    cannot. To reach an internal service, list its name and its address or range.
 */
import { BlockList, isIP } from 'node:net'
import { classifyAddress, unbracket } from '../net/address-policy.ts'

/** Ports a rule without `:port` admits. */
export const DEFAULT_EGRESS_PORTS: readonly number[] = [80, 443]

type Ports = 'any' | readonly number[]

interface NameRule {
  readonly kind: 'exact' | 'suffix'
  /** Lower-case; for `suffix`, with its leading dot (`.example.com`). */
  readonly name: string
  readonly ports: Ports
}

interface AddressRule {
  readonly kind: 'address'
  readonly list: BlockList
  readonly ports: Ports
}

type Rule = NameRule | AddressRule

/** Why an allow entry cannot be read, or undefined when it can (the config schema asks). */
export function egressEntryProblem(entry: string): string | undefined {
  try {
    parseEntry(entry)
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

function parseEntry(raw: string): Rule {
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

const portMatches = (ports: Ports, port: number) => ports === 'any' || ports.includes(port)

function familyOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4'
}

/** The allow list of one upstream. */
export class EgressPolicy {
  readonly #rules: readonly Rule[]

  /** Throws on an entry `egressEntryProblem` rejects. */
  constructor(entries: readonly string[]) {
    this.#rules = entries.map(parseEntry)
  }

  /**
   * Whether `host:port` may be asked for (check 1), before any DNS lookup. Returns the reason
   * it may not, or undefined.
   */
  refusesDestination(host: string, port: number): string | undefined {
    const name = unbracket(host.toLowerCase()).replace(/\.$/, '')
    if (isIP(name)) {
      if (this.#addressListed(name, port)) return undefined
      return `${host}:${port} is not in sandbox.network.allow`
    }
    const listed = this.#rules.some(
      (r) =>
        r.kind !== 'address' &&
        portMatches(r.ports, port) &&
        (r.kind === 'exact' ? name === r.name : name.endsWith(r.name)),
    )
    return listed ? undefined : `${host}:${port} is not in sandbox.network.allow`
  }

  /**
   * Whether one address DNS returned for an admitted destination may be connected to (check 2).
   * Returns the reason it may not, or undefined.
   */
  refusesAddress(host: string, address: string, port: number): string | undefined {
    const kind = classifyAddress(address)
    if (kind === 'public' || this.#addressListed(unbracket(address), port)) return undefined
    return (
      `${host} resolves to ${address}, a ${kind} address; list the address or its range ` +
      'in sandbox.network.allow to reach it'
    )
  }

  #addressListed(address: string, port: number): boolean {
    const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
    const ip = mapped ? mapped[1]! : address
    return this.#rules.some(
      (r) => r.kind === 'address' && portMatches(r.ports, port) && r.list.check(ip, familyOf(ip)),
    )
  }
}
