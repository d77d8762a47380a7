import { carriesCredentials } from '../../web/url-guard'

// The URLs a user's message names, for the hosted web tools: those to fetch (namedUrls), and
// those to keep from the search backend (withoutCredentials).

// URLs in prose: scheme, then anything up to whitespace, a quote, a `}`, or a `]` that closes no
// `[` the URL opened (withinBrackets: an IPv6 literal host, "http://[2606:4700::1111]:8080/", and
// a bracketed query key, PHP's and Rack's "?filter[tag]=news", are part of it; "[https://…/x]" and
// "[https://…/x](…)" end at the `]`). A `)` is taken too and trimmed afterwards unless the URL
// opened it (".../wiki/Mercury_(planet)"). Both are counted after the match, not in the regex: a
// regex alternation repeated along a long run of text is slow, and JSC gives up on it unmatched.
// Quotes and brackets are typographic ones too (“…”, ‘…’, «…», „…“) and CJK and full-width
// punctuation (「…」, （…）, "，" or "。" right after the URL, as Chinese and Japanese prose has
// it): none can stand in a URL as the fetch takes it (canonical, so ASCII). Other non-ASCII
// characters (letters, dashes, symbols) do not end one: "…/wiki/Michelson–Morley_experiment" is
// one URL (refused as not canonical), not ".../wiki/Michelson", another page. The scheme starts a
// URL after anything but an ASCII letter or digit, so after Markdown's `_` or `*` emphasis too.
const URL_ENDS = String.raw`\s<>"'\x60}\p{Pi}\p{Pf}\u201a\u201e\u3001-\u3003\u3008-\u3011\u3014-\u301f\uff01-\uff0f\uff1a-\uff20\uff3b-\uff40\uff5b-\uff65`
const URL_IN_TEXT = new RegExp(String.raw`(?<![a-z0-9])https?:\/\/[^${URL_ENDS}]+`, 'giu')

/** Distinct URLs in order of mention, trailing sentence punctuation trimmed, at most `limit`. */
export function namedUrls(text: string, limit: number): string[] {
  const found: string[] = []
  for (const { url } of urlsIn(text)) {
    if (!found.includes(url)) found.push(url)
    if (found.length === limit) break
  }
  return found
}

/**
 * The user's text as a search backend (a third party, as Brave is) may read it: each URL in it
 * that carries credentials (carriesCredentials: userinfo or a credential query key, as every URL
 * the fetch refuses for credentials has) is cut to its scheme, host and path, or left out when it
 * does not parse (QA: the fetch refused such URLs, and the search was sent them whole). So is
 * an address written without http(s):// (withoutBareCredentials), which the fetch never reads.
 */
export function withoutCredentials(text: string): string {
  let kept = ''
  let from = 0
  for (const { url, at } of urlsIn(text)) {
    kept += withoutBareCredentials(text.slice(from, at))
    const parsed = carriesCredentials(url) ? URL.parse(url) : url
    kept += parsed === null ? '' : typeof parsed === 'string' ? parsed : `${parsed.origin}${parsed.pathname}`
    from = at + url.length
  }
  return kept + withoutBareCredentials(text.slice(from))
}

// An address's host as people write it without a scheme: a domain name ending in a label of
// letters (a TLD; `10:30` or `v1.2` is no host), an IPv4 address or localhost, and a port.
const BARE_HOST = /^(?:(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+(?:\p{L}{2,63}|xn--[a-z0-9-]{1,59})|[0-9]{1,3}(?:\.[0-9]{1,3}){3}|localhost)(?::[0-9]{1,5})?$/iu
// Hosts that follow a password although they are no domain name: a single label with a port (a
// container or intranet name, `db-prod:5432`) and an IPv6 literal (`[::1]:5432`). Without the
// password or the port, `3:1@home` or `a::b::c@d`, the word is no address.
const PASSWORD_HOST = /^(?:[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?:[0-9]{1,5}|\[[0-9a-f:.]+\](?::[0-9]{1,5})?)$/i
// Schemes written `scheme:user@host` that name a person or a line, not a password: `mailto:me@example.com`.
const ADDRESS_SCHEMES = new Set(['mailto', 'sip', 'sips', 'xmpp', 'im', 'pres', 'tel'])
// Labels written before an email address, as mail headers and search operators (Gmail's, GitHub's,
// Jira's) have them: `from:bob@example.com`, `Email:bob@corp.com`. Only these: another word there,
// `admin:hunter2@intranet.example.com`, is as likely a user name and its password.
const EMAIL_LABELS = new Set([
  'from', 'to', 'cc', 'bcc', 'deliveredto', 'email', 'e-mail', 'sender', 'recipient',
  'reply-to', 'author', 'committer', 'assignee', 'reviewer', 'reporter', 'mentions',
])
// An email address's domain: a name ending in a letter TLD (`bob@10.0.0.5` or `bob@[10.0.0.1]` is
// no mail address, so a label before it is read as a user name and its password).
const MAIL_DOMAIN = /^(?:[\p{L}\p{N}](?:[\p{L}\p{N}-]*[\p{L}\p{N}])?\.)+(?:\p{L}{2,63}|xn--[a-z0-9-]{1,59})$/iu
// A URL's scheme, starting after anything but an ASCII letter or digit, as in URL_IN_TEXT.
const SCHEME = /(?<![a-z0-9])[a-z][a-z0-9+.-]*:\/\//i
// A word in the text, as URL_IN_TEXT ends a URL.
const WORD = new RegExp(String.raw`[^${URL_ENDS}]+`, 'gu')

/**
 * `text` with the credentials of each address in it written without http(s):// cut, to its host
 * and path: `user:pass@example.com/path` or `root:pw@db-prod:5432` (a password before a host: an
 * email address has none), `example.com/x?api_key=…` or `www.host.tld/?token=` (a credential key,
 * as carriesCredentials judges it), and another scheme's URL (`postgres://user:pw@db.host/app`, `ftp://host/x?token=`).
 * Anything else is left as written: `me@example.com`, `10:30`, `mailto:me@example.com`.
 */
function withoutBareCredentials(text: string): string {
  return text.replace(WORD, word => {
    // Opening brackets and Markdown emphasis before it, sentence punctuation and closers after.
    const start = /^[([{*_~]*/.exec(word)![0].length
    let end = word.length
    // A `]` that closes an IPv6 literal's `[` stays: `user:pw@[::1]`.
    while (end > start && '.,;:!?*_~)]}'.includes(word[end - 1]!) && !(word[end - 1] === ']' && opens(word.slice(start, end - 1)))) end--
    const address = word.slice(start, Math.max(start, end))
    // A scheme may follow other text in the same word: `DATABASE_URL=postgres://…`, `--db=mysql://…`,
    // `jdbc:postgresql://…`. What precedes it is kept as written; the address starts at the scheme.
    const found = SCHEME.exec(address)
    const lead = found === null ? 0 : found.index
    const scheme = found?.[0] ?? ''
    const rest = address.slice(lead + scheme.length)
    const authority = before(rest, /[/?#]/)
    const at = authority.lastIndexOf('@')
    const userinfo = at < 0 ? undefined : authority.slice(0, at)
    const host = authority.slice(at + 1)
    const tail = rest.slice(authority.length)
    const colon = userinfo?.indexOf(':') ?? -1
    const label = colon < 0 ? '' : userinfo!.slice(0, colon).toLowerCase()
    // `from:bob@example.com` is a search operator before an email address, not user:password@host.
    const labelledEmail = EMAIL_LABELS.has(label) && scheme === '' && tail === '' && MAIL_DOMAIN.test(host) &&
      /^[\p{L}\p{N}._%+-]+$/u.test(userinfo!.slice(colon + 1))
    const password = colon >= 0 && !ADDRESS_SCHEMES.has(label) && !labelledEmail
    // A DNS name is at most 253 characters: a longer run of labels is not read as one. After a
    // password the host may also be one PASSWORD_HOST names: `root:pw@db-prod:5432`.
    const bareHost = host.length <= 253 + 6 && (BARE_HOST.test(host) || (password && PASSWORD_HOST.test(host)))
    if (scheme === '' ? !bareHost : host === '') return word
    // With a scheme any userinfo is a credential, as in an http(s) URL; without one only a password.
    const secretUser = userinfo !== undefined && (scheme !== '' || password)
    // A query key is a credential only with a value: `foo.bar?key` is no URL's secret.
    if (!secretUser && !carriesCredentials(`http://${host}${tail}`, 'valued')) return word
    const path = before(tail, /[?#]/)
    const kept = userinfo !== undefined && !secretUser ? `${userinfo}@` : ''
    return word.slice(0, start + lead) + scheme + kept + host + path + word.slice(start + address.length)
  })
}

/** Whether `text` has a `[` that no `]` after it closes. */
function opens(text: string): boolean {
  return text.lastIndexOf('[') > text.lastIndexOf(']')
}

/** `text` up to the first match of `pattern`, or all of it. */
function before(text: string, pattern: RegExp): string {
  const index = text.search(pattern)
  return index < 0 ? text : text.slice(0, index)
}

/** Each URL in `text` (see URL_IN_TEXT), trimmed, with where it starts. */
function* urlsIn(text: string): Generator<{ url: string; at: number }> {
  const pattern = new RegExp(URL_IN_TEXT)
  for (let match = pattern.exec(text); match !== null; match = pattern.exec(text)) {
    const taken = withinBrackets(match[0])
    // The text after a `]` that ended the URL is read again: another URL may start in it.
    pattern.lastIndex = match.index + taken.length
    const url = trimTrailing(taken)
    if (/^https?:\/\/./i.test(url)) yield { url, at: match.index }
  }
}

/** `text` up to the first `]` that closes no `[` before it. */
function withinBrackets(text: string): string {
  let open = 0
  for (let index = 0; index < text.length; index++) {
    if (text[index] === '[') open++
    else if (text[index] === ']' && open-- === 0) return text.slice(0, index)
  }
  return text
}

/**
 * Drops trailing sentence punctuation, Markdown's emphasis (`*`, `_`, `~`, as GitHub's autolinks
 * drop them: "**https://…/bold**"), and every trailing `)` the URL itself did not open.
 */
function trimTrailing(url: string): string {
  let trimmed = url
  for (;;) {
    trimmed = trimmed.replace(/[.,;:!?*_~]+$/, '')
    const unbalanced = trimmed.endsWith(')') && trimmed.split('(').length < trimmed.split(')').length
    if (!unbalanced) return trimmed
    trimmed = trimmed.slice(0, -1)
  }
}
