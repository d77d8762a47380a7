// Client domain lists for the hosted web tools (Anthropic's allowed_domains / blocked_domains,
// OpenAI's filters.allowed_domains): a client's guard against prompt-injected fetches, so they
// are checked on every URL fetched, every redirect hop and every search result. Both vendors'
// docs include subdomains: "example.com" covers "docs.example.com".

/** A client's allow or deny list, already checked and normalised (see parseDomain). */
export interface DomainLists {
  /** Only hosts equal to or under one of these. Absent: every host. */
  allowed?: string[]
  /** Never hosts equal to or under one of these. */
  blocked?: string[]
}

// Labels of letters, digits and dashes (an IPv4 literal is four such labels).
const HOST_NAME = /^[a-z0-9-]+(\.[a-z0-9-]+)*$/

/**
 * One list entry as the host name it names (lower case, punycode, no trailing dot), or why it is
 * not one: no scheme, path, port, query, credentials or wildcard, as both vendors document.
 */
export function parseDomain(entry: string): { ok: true; domain: string } | { ok: false; message: string } {
  if (entry.trim() === '') return { ok: false, message: 'must be a host name such as example.com, not blank' }
  if (entry.includes('://')) return { ok: false, message: `must be a host name without a scheme (example.com, not ${entry.slice(0, 60)})` }
  if (/[/?#]/.test(entry)) return { ok: false, message: 'must be a host name without a path' }
  if (entry.includes(':')) return { ok: false, message: 'must be a host name without a port' }
  if (/[\s@*\\]/.test(entry)) return { ok: false, message: 'must be a host name (no spaces, credentials or wildcards; subdomains are included anyway)' }
  let host: string
  try {
    // The WHATWG parser, as for the URLs checked against it: case and IDN are read the same way.
    host = normalHost(new URL(`http://${entry}/`).hostname)
  } catch {
    return { ok: false, message: 'must be a host name such as example.com' }
  }
  if (!HOST_NAME.test(host)) return { ok: false, message: 'must be a host name such as example.com' }
  return { ok: true, domain: host }
}

/** Whether `host` is `domain` or one of its subdomains (case and a trailing dot ignored). */
export function hostMatches(host: string, domain: string): boolean {
  const normal = normalHost(host)
  return normal === domain || normal.endsWith(`.${domain}`)
}

/** Why the lists exclude `url` (a reason for the model and the client), or null when they allow it. */
export function domainProblem(url: string, lists: DomainLists): string | null {
  if (lists.allowed === undefined && lists.blocked === undefined) return null
  let host: string
  try {
    host = new URL(url).hostname
  } catch {
    return 'its host cannot be read, so the client\'s domain lists cannot be checked'
  }
  const blocked = lists.blocked?.find(domain => hostMatches(host, domain))
  if (blocked !== undefined) return `the client's blocked_domains exclude ${blocked}`
  if (lists.allowed !== undefined && !lists.allowed.some(domain => hostMatches(host, domain))) return 'its host is not in the client\'s allowed_domains'
  return null
}

function normalHost(host: string): string {
  return host.toLowerCase().replace(/\.$/, '')
}
