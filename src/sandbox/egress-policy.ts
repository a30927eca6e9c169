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
import { isIP } from 'node:net'
import { type Ports, parseEgressEntry, type Rule } from '../config/egress-allow.ts'
import { classifyAddress, unbracket } from '../net/address-policy.ts'

const portMatches = (ports: Ports, port: number) => ports === 'any' || ports.includes(port)

function familyOf(address: string): 'ipv4' | 'ipv6' {
  return isIP(address) === 6 ? 'ipv6' : 'ipv4'
}

/** The allow list of one upstream. */
export class EgressPolicy {
  readonly #rules: readonly Rule[]

  /** Throws on an entry `egressEntryProblem` rejects. */
  constructor(entries: readonly string[]) {
    this.#rules = entries.map(parseEgressEntry)
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
