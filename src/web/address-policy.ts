import ipaddr from 'ipaddr.js'

// Which IP addresses the gateway may connect to on a user's behalf (SECURITY-NOTES.md §1.2–1.3).
// Only global unicast: ipaddr.js classifies by bytes (never by string prefix), and a CIDR table
// on top of it names every block the notes list, so a range ipaddr.js files under `unicast`
// (the Azure WireServer address, new documentation blocks) is still refused.

const DENIED_V4: ReadonlyArray<[string, string]> = [
  ['0.0.0.0/8', 'the unspecified ("this network") block'],
  ['10.0.0.0/8', 'a private (RFC 1918) address'],
  ['100.64.0.0/10', 'a carrier-grade NAT (RFC 6598) address'],
  ['127.0.0.0/8', 'a loopback address'],
  ['169.254.0.0/16', 'a link-local address (cloud metadata lives here)'],
  ['172.16.0.0/12', 'a private (RFC 1918) address'],
  ['192.0.0.0/24', 'an IETF protocol assignment (RFC 6890)'],
  ['192.0.2.0/24', 'a documentation address (RFC 5737)'],
  ['192.88.99.0/24', 'a 6to4 relay anycast address'],
  ['192.168.0.0/16', 'a private (RFC 1918) address'],
  ['198.18.0.0/15', 'a benchmarking address (RFC 2544)'],
  ['198.51.100.0/24', 'a documentation address (RFC 5737)'],
  ['203.0.113.0/24', 'a documentation address (RFC 5737)'],
  ['224.0.0.0/4', 'a multicast address'],
  ['240.0.0.0/4', 'a reserved address'],
  ['255.255.255.255/32', 'the broadcast address'],
  // Azure WireServer sits in public space, yet answers only from inside Azure.
  ['168.63.129.16/32', 'the Azure WireServer (platform metadata) address'],
]

// IPv6 is allowed only inside 2000::/3 (global unicast); these are the special blocks inside it.
// Everything outside it (loopback, ::, mapped and compatible forms, NAT64, ULA, link-local,
// site-local, multicast) is refused by the 2000::/3 rule, after mapped IPv4 has been unwrapped.
const DENIED_V6: ReadonlyArray<[string, string]> = [
  ['2001::/32', 'a Teredo tunnel address (it embeds an IPv4 address)'],
  ['2001::/23', 'an IETF protocol assignment (RFC 2928)'],
  ['2001:db8::/32', 'a documentation address (RFC 3849)'],
  ['2002::/16', 'a 6to4 address (it embeds an IPv4 address)'],
  ['3fff::/20', 'a documentation address (RFC 9637)'],
]

type Cidr = [ipaddr.IPv4 | ipaddr.IPv6, number]
const parseTable = (table: ReadonlyArray<[string, string]>) => table.map(([cidr, reason]) => ({ cidr: ipaddr.parseCIDR(cidr) as Cidr, reason }))
const V4_TABLE = parseTable(DENIED_V4)
const V6_TABLE = parseTable(DENIED_V6)
const GLOBAL_UNICAST_V6 = ipaddr.parseCIDR('2000::/3') as Cidr

/** Names the v6 ranges ipaddr.js knows, for a message that says what the address is. */
const V6_RANGE_REASON: Record<string, string> = {
  unspecified: 'the unspecified address',
  loopback: 'a loopback address',
  linkLocal: 'a link-local address',
  multicast: 'a multicast address',
  uniqueLocal: 'a unique-local (private) address',
  deprecatedSiteLocal: 'a site-local address',
  rfc6052: 'a NAT64 address (it embeds an IPv4 address)',
  rfc6145: 'an IPv4-translated address',
  discard: 'a discard-only address',
}

/**
 * Why `address` may not be connected to, as the kind of address it is (a noun phrase that never
 * repeats the address: a refused DNS answer is reported without it), or null when it is global
 * unicast. `address` must be
 * a plain dotted quad or an IPv6 literal without brackets or zone: ipaddr.js alone would accept
 * the very notations (hex, octal, one integer) this policy exists to refuse.
 */
export function addressProblem(address: string): string | null {
  if (ipaddr.IPv4.isValidFourPartDecimal(address)) return v4Problem(ipaddr.IPv4.parse(address))
  if (!address.includes(':') || address.includes('%') || !ipaddr.IPv6.isValid(address)) return 'an address that is not a plain IP address'
  const v6 = ipaddr.IPv6.parse(address)
  // ::ffff:a.b.c.d is IPv4 on the wire: judge the embedded address.
  if (v6.isIPv4MappedAddress()) {
    const problem = v4Problem(v6.toIPv4Address())
    return problem === null ? null : `${problem} (IPv4-mapped)`
  }
  if (!v6.match(GLOBAL_UNICAST_V6)) {
    const range = v6.range()
    if (range === 'unicast' || !(range in V6_RANGE_REASON)) {
      // ::a.b.c.d (IPv4-compatible) and the rest of ::/8 fall here.
      return v6.parts.slice(0, 6).every(part => part === 0) ? 'an IPv4-compatible IPv6 address' : 'an IPv6 address outside global unicast (2000::/3)'
    }
    return V6_RANGE_REASON[range]!
  }
  for (const entry of V6_TABLE) if (v6.match(entry.cidr)) return entry.reason
  return null
}

function v4Problem(v4: ipaddr.IPv4): string | null {
  for (const entry of V4_TABLE) if (v4.match(entry.cidr)) return entry.reason
  // Anything ipaddr.js still files under a special range (AS112 and similar) is not for us.
  const range = v4.range()
  return range === 'unicast' ? null : `a special-purpose address (${range})`
}

/** The address to dial for a checked one: IPv4-mapped IPv6 becomes its IPv4 form. */
export function dialableAddress(address: string): string {
  if (address.includes(':')) {
    const v6 = ipaddr.IPv6.parse(address)
    if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().toString()
    return v6.toNormalizedString()
  }
  return address
}

/**
 * A test-only exception list: resolved addresses inside these CIDRs count as public
 * (`web.fetch.unsafe_test_allow_cidrs`). It never applies to literal IPs written in a URL.
 */
export class AddressAllowance {
  private readonly cidrs: Cidr[]

  constructor(cidrs: readonly string[]) {
    this.cidrs = cidrs.map(cidr => ipaddr.parseCIDR(cidr) as Cidr)
  }

  get empty(): boolean {
    return this.cidrs.length === 0
  }

  allows(address: string): boolean {
    if (this.cidrs.length === 0 || !ipaddr.isValid(address)) return false
    const parsed = ipaddr.process(address)
    return this.cidrs.some(cidr => parsed.kind() === cidr[0].kind() && parsed.match(cidr))
  }
}

/** Whether `text` is a CIDR ipaddr.js accepts (config validation). */
export function isCidr(text: string): boolean {
  return ipaddr.isValidCIDR(text)
}
