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

/**
 * Classifies an IP address. An IPv6 address that carries an IPv4 address (mapped
 * `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96` and `64:ff9b:1::/48`, 6to4
 * `2002::/16`, Teredo `2001::/32`) is judged as that IPv4 address, since a resolver may answer
 * with any of these forms and the packets end at the embedded address.
 */
export function classifyAddress(address: string): AddressClass {
  const bare = unbracket(address)
  const embedded = isIP(bare) === 6 ? embeddedIpv4(bare) : undefined
  const ip = embedded ?? bare
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4'
  for (const [kind, list] of LISTS) if (list.check(ip, family)) return kind
  return 'public'
}

/** The IPv4 address an IPv6 address embeds by one of the standard transition schemes. */
export function embeddedIpv4(address: string): string | undefined {
  const h = hextets(address)
  if (h === undefined) return undefined
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`
  const zeros = (from: number, to: number) => h.slice(from, to).every((x) => x === 0)
  // ::ffff:0:0/96 (mapped) and ::/96 (compatible, deprecated; `::` and `::1` are not IPv4).
  if (zeros(0, 5) && h[5] === 0xffff) return v4(h[6]!, h[7]!)
  if (zeros(0, 6) && (h[6] !== 0 || h[7]! > 1)) return v4(h[6]!, h[7]!)
  // NAT64 well-known prefix 64:ff9b::/96 (RFC 6052) and local-use 64:ff9b:1::/48 (RFC 8215).
  if (h[0] === 0x64 && h[1] === 0xff9b && zeros(2, 6)) return v4(h[6]!, h[7]!)
  if (h[0] === 0x64 && h[1] === 0xff9b && h[2] === 1) return v4(h[6]!, h[7]!)
  // 6to4 (RFC 3056): 2002:AABB:CCDD::/48.
  if (h[0] === 0x2002) return v4(h[1]!, h[2]!)
  // Teredo (RFC 4380): 2001:0::/32, the client's IPv4 address inverted in the last 32 bits.
  if (h[0] === 0x2001 && h[1] === 0) return v4(h[6]! ^ 0xffff, h[7]! ^ 0xffff)
  return undefined
}

/** The eight 16-bit groups of an IPv6 address (with `::` and a trailing dotted quad expanded). */
function hextets(address: string): number[] | undefined {
  let text = address.toLowerCase()
  const zone = text.indexOf('%')
  if (zone >= 0) text = text.slice(0, zone)
  const quad = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (quad) {
    const [a, b, c, d] = quad.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, quad.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split('::')
  if (halves.length > 2) return undefined
  const parse = (part: string) =>
    part === '' ? [] : part.split(':').map((x) => Number.parseInt(x, 16))
  const head = parse(halves[0]!)
  const tail = halves.length === 2 ? parse(halves[1]!) : []
  const fill = 8 - head.length - tail.length
  if (fill < 0 || (halves.length === 1 && fill !== 0)) return undefined
  const groups = [...head, ...new Array<number>(halves.length === 2 ? fill : 0).fill(0), ...tail]
  return groups.every((x) => Number.isInteger(x) && x >= 0 && x <= 0xffff) ? groups : undefined
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
