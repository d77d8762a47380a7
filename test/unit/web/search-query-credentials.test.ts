import { describe, expect, test } from 'bun:test'
import { withoutCredentials } from '../../../src/inference/enrich/urls-in-text'

// What of a user's text the hosted web_search may send its backend (a third party, as Brave is):
// credentials in an address written without http(s):// are cut as those in a URL are
// (test/inference/hosted-web-search-query.test.ts runs the whole chat).

describe('withoutCredentials: addresses without http(s)://', () => {
  test('a password before a host, or a credential key in the query or fragment, is cut to the host and path', () => {
    // Before, each of these reached the search backend as written.
    const cases: Array<[string, string]> = [
      ['log in as user:pass@example.com/path please', 'log in as example.com/path please'],
      ['the proxy admin:s3cr3t@proxy.corp.example:3128 is down', 'the proxy proxy.corp.example:3128 is down'],
      ['db at root:hunter2@10.0.0.5:5432/app, why?', 'db at 10.0.0.5:5432/app, why?'],
      ['redis :pw@localhost:6379', 'redis localhost:6379'],
      ['see example.com/x?api_key=sk-LIVE-123 for it', 'see example.com/x for it'],
      ['open www.host.tld/?token=', 'open www.host.tld/'],
      ['try api.example.com?access_token=abc&x=1.', 'try api.example.com.'],
      ['callback app.example.com/cb#access_token=FRAG-9', 'callback app.example.com/cb'],
      ['(bob:pw@example.org/a?b=1)', '(example.org/a)'],
      ['**user:pass@example.com**', '**example.com**'],
      ['me@example.com/x?token=abc', 'me@example.com/x'],
      ['postgres://user:pw@db.internal/app and ftp://files.example.com/x?signature=abc', 'postgres://db.internal/app and ftp://files.example.com/x'],
      ['compare https://api.example.com/v1?api_key=A and api.example.com/v2?api_key=B', 'compare https://api.example.com/v1 and api.example.com/v2'],
    ]
    for (const [text, query] of cases) expect({ text, query: withoutCredentials(text) }).toEqual({ text, query })
  })

  test('a URL of another scheme with text before it in the same word is cut from its scheme on', () => {
    // QA: the scheme was looked for only at the start of a word, so these reached the backend whole.
    const cases: Array<[string, string]> = [
      ['Why does DATABASE_URL=postgres://app:hunter2@db.acme-web.com/app fail?', 'Why does DATABASE_URL=postgres://db.acme-web.com/app fail?'],
      ['run --db=mysql://root:pw@host.example.com/x now', 'run --db=mysql://host.example.com/x now'],
      ['url=redis://:pw@cache.example.com', 'url=redis://cache.example.com'],
      ['jdbc:postgresql://u:p@db.example.com/app refuses me', 'jdbc:postgresql://db.example.com/app refuses me'],
      ['(S3=s3://bucket.example.com/x?X-Amz-Signature=abc)', '(S3=s3://bucket.example.com/x)'],
    ]
    for (const [text, query] of cases) expect({ text, query: withoutCredentials(text) }).toEqual({ text, query })
    expect(withoutCredentials('set DATABASE_URL=postgres://db.example.com/app')).toBe('set DATABASE_URL=postgres://db.example.com/app')
  })

  test('after a password, a single-label host with a port or an IPv6 literal is a host too', () => {
    // QA: a host that was no domain name left the whole word, password and all, as written.
    const cases: Array<[string, string]> = [
      ['connect root:hunter2@db-prod:5432 fails', 'connect db-prod:5432 fails'],
      ['psql user:pw@[::1]:5432/app', 'psql [::1]:5432/app'],
      ['(user:pw@[2001:db8::1])', '([2001:db8::1])'],
      ['try app:s3cr3t@redis_cache:6379.', 'try redis_cache:6379.'],
      ['[root:hunter2@db-prod:5432] and [u:p@[::1]]', '[db-prod:5432] and [[::1]]'],
    ]
    for (const [text, query] of cases) expect({ text, query: withoutCredentials(text) }).toEqual({ text, query })
    // No password, or a single label without a port: no address.
    for (const text of ['me@db-prod:5432', 'score 3:1@home', 'a::b::c@d', 'see [::1]:5432 and a:b@[x]']) expect(withoutCredentials(text)).toBe(text)
  })

  test('a label before an email address, an anchor and a query key without a value are no credentials', () => {
    // QA: these ordinary queries lost their email's local part or their `#anchor` / `?key`.
    for (const text of [
      'from:bob@example.com subject:report',
      'Email:bob@corp.com, To:alice.smith+news@mail.example.org and cc:x@y.example.com.',
      'see README.md#code and foo.bar?key, or https://docs.example.com/guide#code',
      'www.host.tld/?token&page=2 and example.com/#session',
    ]) {
      expect(withoutCredentials(text)).toBe(text)
    }
    // A password stays a credential: another word before it, a path or port after the host, a value
    // on the key, a key=value fragment.
    const cases: Array<[string, string]> = [
      ['admin:hunter2@intranet.example.com', 'intranet.example.com'],
      ['from:pw@example.com/x and to:pw@example.com:8080', 'example.com/x and example.com:8080'],
      ['foo.bar?key=abc and README.md#code=abc', 'foo.bar and README.md'],
      ['https://app.example.com/cb#code=abc&state=1', 'https://app.example.com/cb'],
      // No mail address has an IP literal for its domain, and account-like words are no labels.
      ['cc:hunter2@10.0.0.5 and contact:p4ss@[10.0.0.1]', '10.0.0.5 and [10.0.0.1]'],
      ['owner:hunter2@192.168.1.10 mail:Winter2024@smtp.corp.example.com', '192.168.1.10 smtp.corp.example.com'],
    ]
    for (const [text, query] of cases) expect({ text, query: withoutCredentials(text) }).toEqual({ text, query })
  })

  test('ordinary text is left as written: email addresses, times, ratios, paths and URLs without credentials', () => {
    for (const text of [
      'write to me@example.com or mailto:me@example.com at 10:30',
      'the meeting is 10:30-11:00, ratio 16:9, score 3:1@home',
      'Vec<T> in std::collections, a::b::c@d',
      'example.com/docs?page=2&q=token and www.example.org/?lang=en',
      'git@github.com:org/repo.git and ssh me@host.example.com',
      'version v1.2/x?token=1 is not a host, nor file:line 12:30',
      'https://docs.example.com/guide?page=2 and https://blog.example.com/@someone/post',
      'sip:alice@atlanta.example.com and xmpp:romeo@montague.example.net',
    ]) {
      expect(withoutCredentials(text)).toBe(text)
    }
  })
})
