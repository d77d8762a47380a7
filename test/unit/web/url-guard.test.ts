import { describe, expect, test } from 'bun:test'
import { addressProblem, AddressAllowance } from '../../../src/web/address-policy'
import { pageKey } from '../../../src/web/fetcher'
import { checkUrlTarget, isSensitiveKey, parseSafeUrl, type UrlRule } from '../../../src/web/url-guard'
import { REWRITTEN_SPELLINGS } from '../../support/url-spellings'

// The URL policy, case by case, over every bypass class of SECURITY-NOTES.md §1.2 plus public
// URLs that must pass. Each row: input, then `ok` or the rule it must break.

type Expect = 'ok' | UrlRule
const CASES: Array<[string, string, Expect]> = [
  // Public URLs that must pass.
  ['public', 'https://example.com/', 'ok'],
  ['public', 'https://example.com', 'ok'],
  ['public', 'https://example.com?q=1', 'ok'],
  ['public', 'https://en.wikipedia.org/wiki/Server-side_request_forgery', 'ok'],
  ['public', 'http://news.ycombinator.com/item?id=1', 'ok'],
  ['public', 'https://example.com:8443/path', 'ok'],
  ['public', 'http://example.com:8080/', 'ok'],
  ['public', 'https://sub.domain.example.co.uk/a/b?c=d&e=f', 'ok'],
  ['public', 'https://example.com/#section', 'ok'],
  ['public', 'https://xn--bcher-kva.de/', 'ok'],
  ['public', 'http://8.8.8.8/', 'ok'],
  ['public', 'http://1.1.1.1/dns-query', 'ok'],
  ['public', 'http://172.32.0.1/', 'ok'],
  ['public', 'http://100.128.0.1/', 'ok'],
  ['public', 'http://192.169.1.1/', 'ok'],
  ['public', 'http://[2606:4700:4700::1111]/', 'ok'],
  ['public', 'http://[2a00:1450:4001::200e]/', 'ok'],
  ['public', 'http://[::ffff:808:808]/', 'ok'],
  ['public: a value may name a credential, only keys are checked', 'https://example.com/search?q=api_key', 'ok'],
  ['public: keys that merely contain a word', 'https://example.com/?keyword=x&tokens=3&monkey=1', 'ok'],
  ['public: 400 bytes exactly', `https://example.com/${'a'.repeat(400 - 'https://example.com/'.length)}`, 'ok'],
  ['public: @ inside the fragment is not userinfo', 'http://example.com#@evil.com', 'ok'],
  ['public: dashes and digits in labels', 'https://a-1.b2.example.com/', 'ok'],

  // Alternative IPv4 notation.
  ['one integer', 'http://2130706433/', 'numeric-host'],
  ['hex integer', 'http://0x7f000001/', 'numeric-host'],
  ['octal integer', 'http://017700000001/', 'numeric-host'],
  ['hex parts', 'http://0x7f.0x0.0x0.0x1/', 'numeric-host'],
  ['octal with leading zeros', 'http://0177.0.0.1/', 'numeric-host'],
  ['zero-padded parts', 'http://127.000.000.001/', 'numeric-host'],
  ['mixed radix', 'http://0x7f.0.1/', 'numeric-host'],
  ['three parts', 'http://127.0.1/', 'numeric-host'],
  ['two parts', 'http://127.1/', 'numeric-host'],
  ['bare zero', 'http://0/', 'numeric-host'],
  ['metadata as an integer', 'http://2852039166/', 'numeric-host'],
  ['private as hex', 'http://0xa000001/', 'numeric-host'],
  ['five parts', 'http://1.2.3.4.5/', 'syntax'],

  // Whole special ranges (literal dotted quads).
  ['loopback', 'http://127.0.0.1/', 'address'],
  ['loopback, top of the block', 'http://127.255.255.254/', 'address'],
  ['unspecified', 'http://0.0.0.0/', 'address'],
  ['this network', 'http://0.1.2.3/', 'address'],
  ['RFC 1918 10/8', 'http://10.0.0.1/', 'address'],
  ['RFC 1918 172.16/12 low', 'http://172.16.0.1/', 'address'],
  ['RFC 1918 172.16/12 high', 'http://172.31.255.255/', 'address'],
  ['RFC 1918 192.168/16', 'http://192.168.1.1/', 'address'],
  ['link-local metadata', 'http://169.254.169.254/latest/meta-data/', 'address'],
  ['ECS task metadata', 'http://169.254.170.2/v2/credentials', 'address'],
  ['CGNAT low', 'http://100.64.0.1/', 'address'],
  ['CGNAT (Alibaba metadata)', 'http://100.100.100.200/', 'address'],
  ['CGNAT high', 'http://100.127.255.255/', 'address'],
  ['IETF assignments (Oracle metadata)', 'http://192.0.0.192/', 'address'],
  ['TEST-NET-1', 'http://192.0.2.1/', 'address'],
  ['6to4 relay anycast', 'http://192.88.99.1/', 'address'],
  ['benchmarking', 'http://198.18.0.1/', 'address'],
  ['benchmarking high', 'http://198.19.255.255/', 'address'],
  ['TEST-NET-2', 'http://198.51.100.7/', 'address'],
  ['TEST-NET-3', 'http://203.0.113.9/', 'address'],
  ['multicast', 'http://224.0.0.1/', 'address'],
  ['multicast SSDP', 'http://239.255.255.250/', 'address'],
  ['reserved class E', 'http://240.0.0.1/', 'address'],
  ['broadcast', 'http://255.255.255.255/', 'address'],
  ['Azure WireServer (public range)', 'http://168.63.129.16/', 'address'],

  // IPv6 forms.
  ['IPv6 loopback', 'http://[::1]/', 'address'],
  ['IPv6 loopback, long form', 'http://[0:0:0:0:0:0:0:1]/', 'canonical'],
  ['IPv6 unspecified', 'http://[::]/', 'address'],
  ['ULA', 'http://[fc00::1]/', 'address'],
  ['ULA: AWS IMDS over IPv6', 'http://[fd00:ec2::254]/', 'address'],
  ['link-local', 'http://[fe80::1]/', 'address'],
  ['link-local with zone', 'http://[fe80::1%25eth0]/', 'syntax'],
  ['site-local', 'http://[fec0::1]/', 'address'],
  ['multicast', 'http://[ff02::1]/', 'address'],
  ['discard prefix', 'http://[100::1]/', 'address'],
  ['documentation', 'http://[2001:db8::1]/', 'address'],
  ['documentation (RFC 9637)', 'http://[3fff::1]/', 'address'],

  // IPv4 embedded in IPv6.
  ['IPv4-mapped loopback, dotted', 'http://[::ffff:127.0.0.1]/', 'canonical'],
  ['IPv4-mapped loopback, hex', 'http://[::ffff:7f00:1]/', 'address'],
  ['IPv4-mapped metadata', 'http://[::ffff:a9fe:a9fe]/', 'address'],
  ['IPv4-mapped private', 'http://[::ffff:a00:1]/', 'address'],
  ['IPv4-compatible', 'http://[::7f00:1]/', 'address'],
  ['IPv4-compatible, dotted', 'http://[::127.0.0.1]/', 'canonical'],
  ['NAT64 well-known prefix', 'http://[64:ff9b::7f00:1]/', 'address'],
  ['NAT64 local-use prefix', 'http://[64:ff9b:1::a00:1]/', 'address'],
  ['6to4', 'http://[2002:7f00:1::1]/', 'address'],
  ['Teredo', 'http://[2001::1]/', 'address'],
  ['IPv4-translated', 'http://[::ffff:0:7f00:1]/', 'address'],

  // Encoded or Unicode hosts.
  ['percent-encoded host', 'http://%31%32%37.0.0.1/', 'canonical'],
  ['percent-encoded dot', 'http://127%2e0.0.1/', 'canonical'],
  ['percent-encoded letters', 'http://%6c%6f%63%61%6c%68%6f%73%74/', 'canonical'],
  ['full-width digits', 'http://１２７.０.０.１/', 'canonical'],
  ['ideographic full stops', 'http://127。0。0。1/', 'canonical'],
  ['enclosed alphanumerics', 'http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/', 'canonical'],
  ['full-width letters', 'https://ｅxample.com/', 'canonical'],
  ['upper-case host', 'https://EXAMPLE.com/', 'canonical'],
  ['Unicode IDN not in xn-- form', 'http://bücher.de/', 'canonical'],
  ['percent-encoded slash before @', 'http://example.com%2f@127.0.0.1/', 'userinfo'],

  // Local-use names.
  ['localhost', 'http://localhost/', 'local-name'],
  ['localhost with a port', 'http://localhost:8080/', 'local-name'],
  ['localhost upper case', 'http://LOCALHOST/', 'canonical'],
  ['localhost, trailing dot', 'http://localhost./', 'local-name'],
  ['localhost subdomain', 'http://api.localhost/', 'local-name'],
  ['.local mDNS', 'http://printer.local/', 'local-name'],
  ['.internal (GCP metadata)', 'http://metadata.google.internal/computeMetadata/v1/', 'local-name'],
  ['.home.arpa', 'http://router.home.arpa/', 'local-name'],
  ['reverse DNS name', 'http://1.0.0.127.in-addr.arpa/', 'local-name'],
  ['single label', 'http://intranet/', 'local-name'],
  ['single label with port', 'http://db:5432/', 'local-name'],
  ['.lan', 'http://nas.lan/', 'local-name'],
  ['.test', 'http://app.test/', 'local-name'],
  ['.example', 'http://www.example/', 'local-name'],
  ['.invalid', 'http://x.invalid/', 'local-name'],
  ['.onion', 'http://abc.onion/', 'local-name'],
  ['.corp', 'http://wiki.corp/', 'local-name'],
  ['trailing dot on a public name', 'https://example.com./', 'local-name'],
  ['numeric last label', 'http://example.123/', 'syntax'],
  ['underscore in label', 'http://my_host.example.com/', 'host-syntax'],

  // Userinfo and parser differentials.
  ['user and password', 'https://user:pass@example.com/', 'userinfo'],
  ['user only', 'https://user@example.com/', 'userinfo'],
  ['empty userinfo', 'https://@example.com/', 'userinfo'],
  ['empty password', 'https://user:@example.com/', 'userinfo'],
  ['public name as userinfo', 'https://example.com@127.0.0.1/', 'userinfo'],
  ['userinfo hiding a private host', 'http://good.com:80@evil.local/', 'userinfo'],
  ['backslash before @', 'http://example.com\\@127.0.0.1/', 'syntax'],
  ['backslash as a slash', 'http:\\\\127.0.0.1\\', 'syntax'],
  ['percent-encoded @', 'http://example.com%40127.0.0.1/', 'syntax'],
  ['missing slashes', 'http:example.com/', 'canonical'],
  ['three slashes', 'http:///example.com/', 'canonical'],
  ['dot segments', 'https://example.com/a/../b', 'canonical'],
  ['encoded dot segments', 'https://example.com/%2e%2e/etc', 'canonical'],

  // Non-HTTP schemes.
  ['file', 'file:///etc/passwd', 'scheme'],
  ['gopher', 'gopher://127.0.0.1:6379/_INFO', 'scheme'],
  ['dict', 'dict://127.0.0.1:11211/stats', 'scheme'],
  ['ftp', 'ftp://example.com/file', 'scheme'],
  ['ldap', 'ldap://example.com/', 'scheme'],
  ['data', 'data:text/html,<script>alert(1)</script>', 'scheme'],
  ['javascript', 'javascript:alert(1)', 'scheme'],
  ['jar', 'jar:http://example.com/a.jar!/', 'scheme'],
  ['ws', 'ws://example.com/socket', 'scheme'],
  ['wss', 'wss://example.com/socket', 'scheme'],
  ['blob', 'blob:https://example.com/uuid', 'scheme'],
  ['upper-case scheme', 'HTTP://example.com/', 'canonical'],
  ['scheme-relative', '//example.com/', 'syntax'],
  ['no scheme', 'example.com', 'syntax'],

  // Whitespace, control characters and length.
  ['empty', '', 'syntax'],
  ['leading space', ' https://example.com/', 'syntax'],
  ['trailing newline', 'https://example.com/\n', 'syntax'],
  ['tab inside the host', 'https://exa\tmple.com/', 'syntax'],
  ['NUL', 'https://example.com/\u0000', 'syntax'],
  ['no-break space', 'https://example.com/\u00a0', 'syntax'],
  ['line separator', 'https://example.com/\u2028', 'syntax'],
  ['401 bytes', `https://example.com/${'a'.repeat(401 - 'https://example.com/'.length)}`, 'length'],
  ['multi-byte characters count as bytes', `https://example.com/${'é'.repeat(200)}`, 'length'],

  // Ports browsers refuse.
  ['ssh port', 'https://example.com:22/', 'port'],
  ['smtp port', 'http://example.com:25/', 'port'],
  ['X11 port', 'http://example.com:6000/', 'port'],
  ['default port written out', 'http://example.com:80/', 'canonical'],
  ['port 0 (no server listens there)', 'http://example.com:0/', 'port'],
  ['port 0 with a leading zero', 'http://example.com:00/', 'canonical'],

  // Sensitive query keys.
  ['api_key', 'https://example.com/?api_key=abc', 'sensitive-query'],
  ['apikey', 'https://example.com/?apikey=abc', 'sensitive-query'],
  ['API-KEY upper case', 'https://example.com/?API-KEY=abc', 'sensitive-query'],
  ['percent-encoded key', 'https://example.com/?%61pi_key=abc', 'sensitive-query'],
  ['access_token', 'https://example.com/cb?access_token=abc', 'sensitive-query'],
  ['token', 'https://example.com/?token=abc', 'sensitive-query'],
  ['refresh_token', 'https://example.com/?refresh_token=abc', 'sensitive-query'],
  ['password', 'https://example.com/login?user=a&password=b', 'sensitive-query'],
  ['client_secret', 'https://example.com/?client_secret=s', 'sensitive-query'],
  ['secret', 'https://example.com/?secret=s', 'sensitive-query'],
  ['OAuth code', 'https://example.com/callback?code=xyz&state=1', 'sensitive-query'],
  ['session id', 'https://example.com/?sessionid=1', 'sensitive-query'],
  ['session', 'https://example.com/?session=1', 'sensitive-query'],
  ['S3 presigned signature', 'https://bucket.s3.amazonaws.com/o?X-Amz-Signature=abc', 'sensitive-query'],
  ['S3 presigned credential', 'https://bucket.s3.amazonaws.com/o?X-Amz-Credential=abc', 'sensitive-query'],
  ['S3 security token', 'https://bucket.s3.amazonaws.com/o?X-Amz-Security-Token=abc', 'sensitive-query'],
  ['GCS signed URL', 'https://storage.googleapis.com/b/o?X-Goog-Signature=abc', 'sensitive-query'],
  ['Azure SAS sig', 'https://acct.blob.core.windows.net/c/b?sv=2020&sig=abc', 'sensitive-query'],
  ['Google Maps key', 'https://maps.googleapis.com/maps/api/geocode/json?key=AIza', 'sensitive-query'],
  ['vendor token suffix', 'https://example.com/?github_token=ghp', 'sensitive-query'],
  ['vendor password suffix', 'https://example.com/?db_password=x', 'sensitive-query'],
  ['OAuth 1 token', 'https://example.com/?oauth_token=x', 'sensitive-query'],
  ['JWT', 'https://example.com/?jwt=eyJ', 'sensitive-query'],
  ['CAS ticket', 'https://example.com/?ticket=ST-1', 'sensitive-query'],
  ['auth', 'https://example.com/?auth=x', 'sensitive-query'],
  ['SAML response', 'https://example.com/acs?SAMLResponse=x', 'sensitive-query'],
  ['key without a value', 'https://example.com/?token', 'sensitive-query'],
  ['key after a semicolon (servers that split on ;)', 'https://example.com/?a=1;token=x', 'sensitive-query'],
  ['encoded key after a semicolon', 'https://example.com/?a=1;%61pi_key=x', 'sensitive-query'],
  ['public: a semicolon between harmless keys', 'https://example.com/?a=1;b=2', 'ok'],
  // PHP and Rack read a bracketed key by its name before the brackets (QA: these were fetched).
  ['bracketed index after the key', 'https://example.com/?access_token[0]=x', 'sensitive-query'],
  ['bracketed name after the key', 'https://example.com/?api_key[x]=x', 'sensitive-query'],
  ['empty brackets after the key', 'https://example.com/?password[]=x', 'sensitive-query'],
  ['encoded brackets after the key', 'https://example.com/?token%5B0%5D=x', 'sensitive-query'],
  ['leading brackets (Rack skips them)', 'https://example.com/?[token][a]=x', 'sensitive-query'],
  ['public: a harmless key with brackets', 'https://example.com/?filter[tag]=x&ids[]=1', 'ok'],
]

describe('checkUrlTarget: the same rules, without the fetch-only limits', () => {
  // Image URLs (forwarded for a backend to fetch) use checkUrlTarget: every address, name,
  // scheme, userinfo, canonical-form and port rule of parseSafeUrl, not its length cap or its
  // credential query keys (a presigned image URL carries a signature by design).
  for (const [name, input, expected] of CASES) {
    test(`${name}: ${JSON.stringify(input).slice(0, 80)}`, () => {
      const result = checkUrlTarget(input)
      const got = result.ok ? 'ok' : result.rule
      if (expected === 'sensitive-query') expect(got).toBe('ok')
      else if (expected === 'length') expect(got === 'ok' || got === 'canonical').toBe(true)
      else expect(got).toBe(expected)
      if (result.ok) expect(result.parsed.href).toBe(new URL(input).href)
    })
  }

  test('a presigned image URL passes; the same URL at a private address does not', () => {
    expect(checkUrlTarget('https://bucket.s3.amazonaws.com/cat.png?X-Amz-Signature=abc').ok).toBe(true)
    expect(checkUrlTarget('http://10.0.0.5/cat.png?X-Amz-Signature=abc')).toMatchObject({ ok: false, rule: 'address' })
  })
})

/**
 * Rows whose verdict differs for an image URL: real names a backend would resolve, which the
 * fetch's stricter name rule refuses (QA: legacy S3 bucket hosts, the absolute form's dot).
 */
const NAMES_A_BACKEND_RESOLVES: Record<string, string> = { 'trailing dot on a public name': 'ok', 'underscore in label': 'ok' }

describe("checkUrlTarget, spelling 'parsed': URLs forwarded as their parsed href (image parts)", () => {
  // The backend receives `parsed.href`, never the text as written, so a spelling the parser
  // rewrites is judged as that href: the verdict is the one the href gets written out, and every
  // other row (whitespace, backslashes, userinfo, schemes, ports, names, addresses) is unchanged.
  const verdict = (result: ReturnType<typeof checkUrlTarget>) => (result.ok ? 'ok' : result.rule)
  for (const [name, input] of CASES) {
    test(`${name}: ${JSON.stringify(input).slice(0, 80)}`, () => {
      const result = checkUrlTarget(input, 'parsed')
      const exact = verdict(checkUrlTarget(input))
      if (Object.hasOwn(NAMES_A_BACKEND_RESOLVES, name)) {
        expect(verdict(result)).toBe(NAMES_A_BACKEND_RESOLVES[name]!)
      } else if (exact === 'canonical' || exact === 'numeric-host') {
        const href = new URL(input).href
        expect(verdict(result)).toBe(verdict(checkUrlTarget(href)))
        if (result.ok) expect(result.parsed.href).toBe(href)
      } else {
        expect(verdict(result)).toBe(exact)
      }
    })
  }

  test('spellings OpenAI and Anthropic take pass, as their canonical href', () => {
    for (const [input, href] of REWRITTEN_SPELLINGS) {
      const result = checkUrlTarget(input, 'parsed')
      expect({ input, href: result.ok ? result.parsed.href : result.message }).toEqual({ input, href })
      expect(checkUrlTarget(input).ok).toBe(false)
    }
  })

  test('names a backend resolves pass; their local-use forms stay refused, a trailing dot or not', () => {
    for (const input of ['https://my_bucket.s3.amazonaws.com/cat.png', 'https://_dmarc.example.com/x.png', 'https://cdn.example.com./cat.png']) {
      expect({ input, ok: checkUrlTarget(input, 'parsed').ok }).toEqual({ input, ok: true })
    }
    for (const input of ['http://localhost./x.png', 'http://printer.local./x.png', 'http://intranet./x.png', 'http://my_host./x.png', 'http://a..b.example.com/x.png', 'http://-bad_.example.com/x.png']) {
      expect({ input, ok: checkUrlTarget(input, 'parsed').ok }).toEqual({ input, ok: false })
    }
  })

  test("a refusal quoting a client's key or host never ends in half a surrogate pair", () => {
    // QA: the credential key was cut at 40 UTF-16 units, and the message went into the chat's context block.
    const refusal = parseSafeUrl(`https://example.com/?${encodeURIComponent(`${'a'.repeat(39)}😀_token`)}=1`)
    expect(refusal.ok).toBe(false)
    if (!refusal.ok) expect(refusal.message.isWellFormed()).toBe(true)
  })

  test('a refused spelling says what to write instead', () => {
    expect(checkUrlTarget('https://cdn.example.com/my cat.png', 'parsed')).toMatchObject({ ok: false, rule: 'syntax', message: expect.stringContaining('a space as %20') })
    expect(checkUrlTarget('https://cdn.example.com\\img.png', 'parsed')).toMatchObject({ ok: false, rule: 'syntax', message: expect.stringContaining('%5C for a backslash') })
  })
})

describe('parseSafeUrl: bypass classes and public URLs', () => {
  test(`the table has at least 100 cases (${CASES.length})`, () => {
    expect(CASES.length).toBeGreaterThanOrEqual(100)
  })

  for (const [name, input, expected] of CASES) {
    test(`${name}: ${JSON.stringify(input).slice(0, 80)} → ${expected}`, () => {
      const result = parseSafeUrl(input)
      const got = result.ok ? 'ok' : result.rule
      expect(got).toBe(expected)
      if (!result.ok) expect(result.message.length).toBeGreaterThan(10)
      else {
        // The URL as written (results echo it); the parsed form is what is connected to.
        expect(result.url as string).toBe(input)
        expect(result.parsed.href).toBe(new URL(input).href)
      }
    })
  }

  test('a rejected URL says which rule it broke and, when it helps, the canonical form', () => {
    const result = parseSafeUrl('https://EXAMPLE.com/')
    expect(result.ok).toBe(false)
    if (!result.ok) expect(result.message).toContain('"https://example.com/"')
    const numeric = parseSafeUrl('http://2130706433/')
    if (!numeric.ok) expect(numeric.message).toContain('127.0.0.1')
  })
})

// What the resolver may answer: the fetcher checks every answer with addressProblem.
const ADDRESSES: Array<[string, boolean]> = [
  ['93.184.216.34', true], ['8.8.8.8', true], ['172.32.0.1', true], ['2606:4700::6810:84e5', true], ['::ffff:8.8.8.8', true],
  ['127.0.0.1', false], ['10.1.2.3', false], ['172.20.0.1', false], ['192.168.0.10', false], ['169.254.169.254', false],
  ['100.64.1.1', false], ['0.0.0.0', false], ['224.0.0.251', false], ['255.255.255.255', false], ['168.63.129.16', false],
  ['::1', false], ['::', false], ['fd00:ec2::254', false], ['fe80::1', false], ['ff02::fb', false], ['::ffff:127.0.0.1', false],
  ['::ffff:169.254.169.254', false], ['64:ff9b::a9fe:a9fe', false], ['2002:a9fe:a9fe::', false], ['2001:0:4136:e378::1', false],
  // Spellings ipaddr.js alone would accept, which a resolver never returns: refused as not plain.
  ['0x7f.0.0.1', false], ['2130706433', false], ['0177.0.0.1', false], ['fe80::1%eth0', false], ['localhost', false],
]

describe('addressProblem: every resolved answer', () => {
  for (const [address, allowed] of ADDRESSES) {
    test(`${address} → ${allowed ? 'public' : 'refused'}`, () => {
      expect(addressProblem(address) === null).toBe(allowed)
    })
  }

  test('the test-only allowance covers only its CIDRs, and only exact families', () => {
    const allowance = new AddressAllowance(['127.0.0.1/32'])
    expect(allowance.allows('127.0.0.1')).toBe(true)
    expect(allowance.allows('127.0.0.2')).toBe(false)
    expect(allowance.allows('10.0.0.1')).toBe(false)
    expect(new AddressAllowance([]).allows('127.0.0.1')).toBe(false)
  })
})

test('isSensitiveKey normalises case, separators and vendor suffixes', () => {
  for (const key of ['X-Amz-Signature', 'x_amz_signature', 'Access.Token', 'STRIPE_SECRET', 'my-api-key']) expect(isSensitiveKey(key)).toBe(true)
  for (const key of ['q', 'page', 'keyword', 'tokens', 'passage', 'codec']) expect(isSensitiveKey(key)).toBe(false)
})

test('pageKey: one page however it is spelled (RFC 3986 §6.2.2), different pages stay different', () => {
  const key = (url: string) => pageKey(new URL(url))
  for (const same of ['https://example.com/a?', 'https://example.com/%61', 'https://example.com/a#part', 'https://example.com:443/a']) expect(key(same)).toBe(key('https://example.com/a'))
  expect(key('https://example.com/~x?q=%7e')).toBe(key('https://example.com/%7Ex?q=~'))
  expect(key('https://example.com/a%2fb')).toBe(key('https://example.com/a%2Fb'))
  // An encoded reserved character (the slash) is not the character itself.
  expect(key('https://example.com/a%2Fb')).not.toBe(key('https://example.com/a/b'))
  for (const other of ['https://example.com/A', 'https://example.com/a?q', 'http://example.com/a', 'https://example.com:8443/a']) expect(key(other)).not.toBe(key('https://example.com/a'))
})
