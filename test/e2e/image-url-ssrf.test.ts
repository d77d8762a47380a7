import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { WireScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { buildFusionHarness } from '../fusion/support'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { json, type TestApp } from '../support/harness'
import { CREDIT, PRICE_YAML } from './upstream-fixtures'
import { REWRITTEN_SPELLINGS } from '../support/url-spellings'

// Image parts by URL are fetched by the backend, not the gateway: a self-hosted backend (vLLM)
// fetches them from inside the operator's network. So every image URL a client sends passes the
// web fetch's URL guard (checkUrlTarget) at decode time, in every dialect and on every backend:
// a URL naming a private, loopback, link-local, metadata or reserved address (in any spelling the
// WHATWG parser reads as one), a local-use name, userinfo or another scheme is a 400 naming the
// field, never sent upstream and never charged. A public URL reaches the backend in the form that
// was checked: its WHATWG canonical href, whatever spelling the client used (as OpenAI and
// Anthropic take them), except whitespace, control characters and backslashes, which the parser
// drops or reads as something else: those are refused with what to write instead.

const UPSTREAM_KEY = 'sk-upstream-0123456789'

/** URLs a backend must never be asked to fetch, with what makes each one unsafe. */
const UNSAFE: Array<[string, string]> = [
  ['cloud metadata (link-local)', 'http://169.254.169.254/latest/meta-data/'],
  ['a private address with a port', 'http://10.0.0.5:8080/admin'],
  ['IPv6 loopback on the Redis port', 'http://[::1]:6379/'],
  ['loopback', 'http://127.0.0.1/cat.png'],
  ['the unspecified address', 'http://0.0.0.0/'],
  ['the unspecified IPv6 address', 'http://[::]/'],
  ['metadata as one decimal integer', 'http://2852039166/'],
  ['loopback in hex parts', 'http://0x7f.1/'],
  ['loopback as an octal integer', 'http://017700000001/'],
  ['IPv4-mapped metadata', 'http://[::ffff:a9fe:a9fe]/'],
  ['IPv4-mapped private, dotted', 'http://[::ffff:192.168.0.1]/'],
  ['NAT64 embedding loopback', 'http://[64:ff9b::7f00:1]/'],
  ['a unique-local IPv6 address (AWS IMDS)', 'http://[fd00:ec2::254]/'],
  ['CGNAT (Alibaba metadata)', 'http://100.100.100.200/'],
  ['the Azure WireServer', 'http://168.63.129.16/'],
  ['localhost', 'http://localhost:8080/cat.png'],
  ['a .localhost name', 'http://img.localhost/cat.png'],
  ['a .internal name', 'http://metadata.google.internal/computeMetadata/v1/'],
  ['a .local name', 'http://printer.local/scan.jpg'],
  ['a single-label name', 'http://intranet/cat.png'],
  ['userinfo', 'https://user:secret@images.example.com/cat.png'],
  ['empty userinfo', 'https://@images.example.com/cat.png'],
  ['another scheme', 'ftp://images.example.com/cat.png'],
  ['a file URL', 'file:///etc/passwd'],
  ['a percent-encoded host', 'http://%31%32%37.0.0.1/'],
  ['a blocked port', 'http://images.example.com:25/cat.png'],
]

const PUBLIC_URL = 'https://images.example.com/cats/tabby.png?w=640'

/** The rewritten spellings, and a root without its slash (which the fetch takes too). */
const SPELLINGS = [...REWRITTEN_SPELLINGS, ['https://cdn.example.com', 'https://cdn.example.com/'] as const]

/** What the parser would rewrite unreadably: refused, with what to send instead, and no public-host advice. */
const MISSPELT: Array<[string, string]> = [
  ['https://cdn.example.com/my cat.png', 'a space as %20'],
  ['https://cdn.example.com/img.png\n', 'a space as %20'],
  ['https://cdn.example.com\\img.png', '%5C for a backslash'],
]

interface Dialect {
  readonly name: string
  readonly path: string
  /** The request body carrying `url` as the second part of the first user message. */
  body(url: string): Record<string, unknown>
  /** The field the 400 must name. */
  readonly field: string
  /** The error message and param (the Anthropic envelope has no param: the message names the field). */
  refusal(body: any): { message: string; param: string | undefined }
}

const DIALECTS: Dialect[] = [
  {
    name: 'Chat Completions',
    path: '/v1/chat/completions',
    body: url => ({ model: 'm', messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url } }] }] }),
    field: 'messages.0.content.1.image_url.url',
    refusal: body => ({ message: body.error.message, param: body.error.param }),
  },
  {
    name: 'Messages',
    path: '/v1/messages',
    body: url => ({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image', source: { type: 'url', url } }] }] }),
    field: 'messages.0.content.1.source.url',
    refusal: body => ({ message: body.error.message, param: undefined }),
  },
  {
    name: 'Responses',
    path: '/v1/responses',
    body: url => ({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'What is this?' }, { type: 'input_image', image_url: url }] }] }),
    field: 'input.0.content.1.image_url',
    refusal: body => ({ message: body.error.message, param: body.error.param }),
  },
]

const TARGETS: Array<{ type: 'openai-compatible' | 'anthropic'; wire: WireScript }> = [
  { type: 'openai-compatible', wire: openAIWire },
  // Anthropic fetches URL images on its own side, not on the operator's network; the rule is the
  // same anyway, so a request means the same on every backend.
  { type: 'anthropic', wire: anthropicWire },
]

for (const target of TARGETS) {
  describe(`image URLs → ${target.type} backend`, () => {
    let t: TestApp
    let upstream: FakeUpstream
    let orgId: string
    let key: string

    beforeEach(async () => {
      upstream = await FakeUpstream.start()
      ;({ t, orgId, key } = await startServedGateway(paygConfig(
        [upstreamProvider('up', target.type, `${upstream.url}/v1`, 'UPSTREAM_KEY')],
        [`  - { id: m, backends: [{ provider: up, model: upstream-m }], price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 4096, capabilities: { vision: true } }`],
      ), { UPSTREAM_KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      await upstream.close()
      await t.close()
    })

    for (const dialect of DIALECTS) {
      test(`${dialect.name}: every unsafe image URL is a 400 naming ${dialect.field}, never sent upstream, nothing reserved or charged`, async () => {
        for (const [why, url] of UNSAFE) {
          const response = await t.request('POST', dialect.path, { key, body: dialect.body(url) })
          expect({ why, status: response.status }).toEqual({ why, status: 400 })
          const { message, param } = dialect.refusal(await json(response))
          expect(message).toStartWith(`${dialect.field}: `)
          expect(message).toContain('public http(s) URLs')
          expect(param).toBe(dialect.name === 'Messages' ? undefined : dialect.field)
        }
        expect(upstream.requests).toHaveLength(0)
        const balance = await t.deps.balance(orgId)
        expect([balance.prepaidNanos, balance.availableNanos]).toEqual([CREDIT, CREDIT])
        expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
      })

      test(`${dialect.name}: a public https image URL reaches the backend as written`, async () => {
        upstream.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'A tabby cat.', finish: 'stop', usage: { inputTokens: 1700, outputTokens: 4 } }) })
        const response = await t.request('POST', dialect.path, { key, body: dialect.body(PUBLIC_URL) })
        expect(response.status).toBe(200)
        const sent = upstream.onlyRequest().body.messages[0].content[1]
        if (target.type === 'anthropic') expect(sent).toEqual({ type: 'image', source: { type: 'url', url: PUBLIC_URL } })
        else expect(sent).toEqual({ type: 'image_url', image_url: { url: PUBLIC_URL } })
      })
    }

    for (const dialect of DIALECTS) {
      test(`${dialect.name}: any spelling the URL parser reads reaches the backend as its canonical form`, async () => {
        for (const [url, canonical] of SPELLINGS) {
          upstream.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'A cat.', finish: 'stop', usage: { inputTokens: 1700, outputTokens: 3 } }) })
          const response = await t.request('POST', dialect.path, { key, body: dialect.body(url) })
          expect({ url, status: response.status }).toEqual({ url, status: 200 })
          await response.text()
          const sent = upstream.requests.at(-1)!.body.messages[0].content[1]
          if (target.type === 'anthropic') expect(sent).toEqual({ type: 'image', source: { type: 'url', url: canonical } })
          else expect(sent).toEqual({ type: 'image_url', image_url: { url: canonical } })
        }
        expect(upstream.requests).toHaveLength(SPELLINGS.length)
      })

      test(`${dialect.name}: whitespace and backslashes are a 400 saying what to write instead`, async () => {
        for (const [url, fix] of MISSPELT) {
          const response = await t.request('POST', dialect.path, { key, body: dialect.body(url) })
          expect({ url, status: response.status }).toEqual({ url, status: 400 })
          const { message } = dialect.refusal(await json(response))
          expect(message).toStartWith(`${dialect.field}: `)
          expect(message).toContain(fix)
          expect(message).not.toContain('public http(s) URLs')
        }
        expect(upstream.requests).toHaveLength(0)
      })
    }

    test('a base64 data URL image is still taken inline (it names no host)', async () => {
      upstream.enqueue({ kind: 'sse', body: target.wire.stream({ text: 'A pixel.', finish: 'stop', usage: { inputTokens: 1700, outputTokens: 2 } }) })
      const pixel = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=='
      const response = await t.request('POST', '/v1/chat/completions', { key, body: DIALECTS[0]!.body(`data:image/png;base64,${pixel}`) })
      expect(response.status).toBe(200)
      const sent = upstream.onlyRequest().body.messages[0].content[1]
      if (target.type === 'anthropic') expect(sent).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: pixel } })
      else expect(sent).toEqual({ type: 'image_url', image_url: { url: `data:image/png;base64,${pixel}` } })
    })
  })
}

describe('image URLs in Fusion', () => {
  test('an unsafe image URL in a Fusion conversation is a 400 naming the field: no participant or judge called, nothing charged', async () => {
    const h = await buildFusionHarness()
    try {
      const image = { role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: 'http://169.254.169.254/latest/meta-data/' } }] }
      const response = await h.fusion({ models: ['a', 'b'], messages: [image], judge: 'a' })
      expect(response.status).toBe(400)
      const error = (await json(response)).error
      expect([error.code, error.param]).toEqual(['invalid_request', 'messages.0.content.1.image_url.url'])
      expect(h.a.requests.length + h.b.requests.length + h.judge.requests.length).toBe(0)
      const balance = await h.t.deps.balance(h.org.orgId)
      expect([balance.prepaidNanos, balance.availableNanos]).toEqual([10_000_000_000n, 10_000_000_000n])
    } finally {
      await h.close()
    }
  })
})
