/**
 * Which network addresses Barbican may connect to when it follows a URL it did not choose
 * itself (metadata documents, token endpoints, redirects). Private, loopback, link-local and
 * other special-purpose ranges are refused unless the operator allowlisted them, because a URL
 * learnt from a discovery document or a redirect must not turn Barbican into a probe of the
 * network it runs in (SSRF).
 */
import { BlockList, isIP } from 'node:net'

/** Why an address is special; `public` means an ordinary Internet address. */
export type AddressClass = 'public' | 'loopback' | 'private' | 'link-local' | 'reserved'

const SPECIAL: readonly (readonly [AddressClass, string, number, 'ipv4' | 'ipv6'])[] = [
  ['loopback', '127.0.0.0', 8, 'ipv4'],
  ['loopback', '::1', 128, 'ipv6'],
  ['private', '10.0.0.0', 8, 'ipv4'],
  ['private', '172.16.0.0', 12, 'ipv4'],
  ['private', '192.168.0.0', 16, 'ipv4'],
  // Carrier-grade NAT, shared address space (RFC 6598): not on the public Internet either.
  ['private', '100.64.0.0', 10, 'ipv4'],
  ['private', 'fc00::', 7, 'ipv6'],
  ['link-local', '169.254.0.0', 16, 'ipv4'],
  ['link-local', 'fe80::', 10, 'ipv6'],
  ['reserved', '0.0.0.0', 8, 'ipv4'],
  ['reserved', '::', 128, 'ipv6'],
  ['reserved', '224.0.0.0', 3, 'ipv4'],
  ['reserved', 'ff00::', 8, 'ipv6'],
]

const LISTS = new Map<AddressClass, BlockList>()
for (const [kind, net, prefix, family] of SPECIAL) {
  let list = LISTS.get(kind)
  if (!list) {
    list = new BlockList()
    LISTS.set(kind, list)
  }
  list.addSubnet(net, prefix, family)
}

/** Classifies an IP address; IPv4-mapped IPv6 (`::ffff:10.0.0.1`) is judged as the IPv4. */
export function classifyAddress(address: string): AddressClass {
  const bare = unbracket(address)
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare)
  const ip = mapped ? mapped[1]! : bare
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4'
  for (const [kind, list] of LISTS) if (list.check(ip, family)) return kind
  return 'public'
}

/**
 * The operator's exceptions: host names (exact, lower-case), IP addresses and CIDR ranges
 * (`10.1.0.0/16`) that may be reached although they are special.
 */
export class AddressAllowlist {
  readonly #hosts = new Set<string>()
  readonly #ranges = new BlockList()

  constructor(entries: readonly string[]) {
    for (const raw of entries) {
      const entry = unbracket(raw.trim().toLowerCase())
      const cidr = /^(.+)\/(\d{1,3})$/.exec(entry)
      if (cidr && isIP(cidr[1]!)) {
        const family = isIP(cidr[1]!) === 6 ? 'ipv6' : 'ipv4'
        this.#ranges.addSubnet(cidr[1]!, Number(cidr[2]), family)
      } else if (isIP(entry)) {
        this.#ranges.addAddress(entry, isIP(entry) === 6 ? 'ipv6' : 'ipv4')
      } else {
        this.#hosts.add(entry)
      }
    }
  }

  /** True when `host` (a name) or `address` (its resolved IP) was allowlisted. */
  allows(host: string, address?: string): boolean {
    if (this.#hosts.has(unbracket(host.toLowerCase()))) return true
    const ip = address ?? unbracket(host)
    if (isIP(ip) === 0) return false
    return this.#ranges.check(ip, isIP(ip) === 6 ? 'ipv6' : 'ipv4')
  }
}

/** `[::1]` → `::1`, as URL host names write IPv6 literals. */
export function unbracket(host: string): string {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host
}
