import { describe, expect, test } from 'bun:test'
import { domainProblem, hostMatches, parseDomain } from '../../../src/web/domain-list'

// Hosted web tools' allowed_domains / blocked_domains: entries are host names, and a host
// matches a domain when it is that domain or a subdomain of it (Anthropic's and OpenAI's rule).

describe('parseDomain', () => {
  test('normalises case, a trailing dot and IDN; refuses schemes, paths, ports, wildcards and blanks', () => {
    expect(parseDomain('Docs.Example.COM.')).toEqual({ ok: true, domain: 'docs.example.com' })
    expect(parseDomain('bücher.de')).toEqual({ ok: true, domain: 'xn--bcher-kva.de' })
    for (const [entry, problem] of [
      ['', /blank/], ['  ', /blank/], ['https://a.com', /scheme/], ['a.com/blog', /path/], ['a.com?x', /path/],
      ['a.com:443', /port/], ['*.a.com', /wildcards/], ['user@a.com', /credentials/], ['a..com', /host name/], ['a_b.com', /host name/],
    ] as const) {
      const parsed = parseDomain(entry)
      expect(parsed.ok).toBe(false)
      expect((parsed as { message: string }).message).toMatch(problem)
    }
  })
})

describe('hostMatches and domainProblem', () => {
  test('a host matches its own domain and the domains above it, never a look-alike', () => {
    expect(hostMatches('example.com', 'example.com')).toBe(true)
    expect(hostMatches('Docs.Example.com.', 'example.com')).toBe(true)
    expect(hostMatches('notexample.com', 'example.com')).toBe(false)
    expect(hostMatches('example.com.evil.net', 'example.com')).toBe(false)
    expect(hostMatches('example.com', 'docs.example.com')).toBe(false)
  })

  test('the blocked list wins, the allowed list excludes every other host, no lists allow everything', () => {
    expect(domainProblem('https://a.example.com/x', {})).toBeNull()
    expect(domainProblem('https://a.example.com/x', { allowed: ['example.com'] })).toBeNull()
    expect(domainProblem('https://EXAMPLE.com./x', { allowed: ['example.com'] })).toBeNull()
    expect(domainProblem('https://example.org/x', { allowed: ['example.com'] })).toMatch(/not in the client's allowed_domains/)
    expect(domainProblem('https://a.example.com/x', { blocked: ['example.com'] })).toMatch(/blocked_domains exclude example.com/)
    expect(domainProblem('not a url', { blocked: ['example.com'] })).toMatch(/cannot be read/)
  })
})
