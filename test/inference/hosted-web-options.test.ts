import { describe, expect, test } from 'bun:test'
import { createPlanOrg, type TestApp } from '../support/harness'
import { buildWebApp, type FakeResolver, pageServer, searxngServer, storyPage, stopsAfterEach } from '../support/fake-web'

// The client's options on hosted web tools hold in every format: domain allow / deny lists (a
// guard against prompt-injected fetches, on every redirect hop too), max_uses (a cost bound)
// and Messages' max_content_tokens; search results outside the lists are left out. A URL left
// out is a "Not fetched" note for the model and never connected to or billed. Options a format
// does not define, and malformed ones, are 400s naming the field, before anything is billed.
// The demo model echoes the latest user message, so the reply shows the web context block.

const FETCH_PRICE = 2_000_000n
const SEARCH_PRICE = 5_000_000n
const CREDIT = 1_000_000_000n
const MTOK = 1_000_000n
const ANTHROPIC = { 'anthropic-version': '2023-06-01' }
let t: TestApp
let resolver: FakeResolver
const stops = stopsAfterEach(() => t)

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b
/** The demo model's catalog price (0.10 / 0.40 USD per Mtok) of a turn's tokens. */
const chatPrice = (input: number, output: number) => ceilDiv(BigInt(input) * 100_000_000n, MTOK) + ceilDiv(BigInt(output) * 400_000_000n, MTOK)

async function setup() {
  const searxng = searxngServer()
  stops.push(searxng.stop)
  ;({ t, resolver } = await buildWebApp({ search: searxng.config }))
  const { orgId, key } = await createPlanOrg(t, { name: 'options', credit: CREDIT })
  const pages = pageServer((_, url) => {
    // /hop redirects to the blocked host: a domain list holds on every hop.
    if (url.pathname === '/hop') return new Response(null, { status: 302, headers: { location: `http://blocked.acme-web.com:${url.port}/secret` } })
    if (url.pathname === '/long') return new Response('long text '.repeat(500), { headers: { 'content-type': 'text/plain' } })
    if (url.pathname === '/emoji') return new Response(`a${'😀'.repeat(300)}`, { headers: { 'content-type': 'text/plain; charset=utf-8' } })
    return storyPage(url.pathname)
  })
  stops.push(pages.stop)
  for (const host of ['allowed.acme-web.com', 'blocked.acme-web.com', 'other.example-news.org']) resolver.set(host, ['127.0.0.1'])
  const at = (host: string, path: string) => `http://${host}:${pages.port}${path}`
  /** The pages the page server was asked for, as host and path. */
  const seen = () => pages.seen.map(request => `${request.headers.host!.split(':')[0]} ${request.path}`)
  const spent = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
  const messages = (body: Record<string, unknown>) => t.request('POST', '/v1/messages', { key, headers: ANTHROPIC, body: { model: 'demo-web', max_tokens: 256, ...body } })
  const responses = (body: Record<string, unknown>) => t.request('POST', '/v1/responses', { key, body: { model: 'demo-web', ...body } })
  const chat = (body: Record<string, unknown>) => t.request('POST', '/v1/chat/completions', { key, body: { model: 'demo-web', ...body } })
  return { at, seen, spent, messages, responses, chat, searchQueries: searxng.queries }
}

type Setup = Awaited<ReturnType<typeof setup>>

describe('hosted web_fetch options are applied', () => {
  test('Messages web_fetch: allowed_domains and max_uses fetch and bill only the first allowed URL; the others are noted', async () => {
    const s = await setup()
    const prompt = `Read ${s.at('blocked.acme-web.com', '/secret')}, ${s.at('other.example-news.org', '/x')}, ${s.at('allowed.acme-web.com', '/ok')} and ${s.at('allowed.acme-web.com', '/second')}`
    const response = await s.messages({
      messages: [{ role: 'user', content: prompt }],
      tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 1, allowed_domains: ['Allowed.ACME-web.com.'], citations: { enabled: true }, cache_control: { type: 'ephemeral' } }],
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { content: Array<{ text: string }>; usage: { input_tokens: number; output_tokens: number; server_tool_use: unknown } }
    const reply = body.content[0]!.text
    expect(s.seen()).toEqual(['allowed.acme-web.com /ok'])
    expect(reply).toContain('The story at /ok.')
    expect(reply).toContain(`Not fetched: ${s.at('blocked.acme-web.com', '/secret')} (its host is not in the client's allowed_domains)`)
    expect(reply).toContain(`Not fetched: ${s.at('other.example-news.org', '/x')} (its host is not in the client's allowed_domains)`)
    expect(reply).toContain(`Not fetched: ${s.at('allowed.acme-web.com', '/second')} (the client's max_uses (1) was reached)`)
    expect(body.usage.server_tool_use).toEqual({ web_search_requests: 0, web_fetch_requests: 1 })
    expect(await s.spent()).toBe(chatPrice(body.usage.input_tokens, body.usage.output_tokens) + FETCH_PRICE)
  })

  test('Messages web_fetch: blocked_domains covers subdomains, and a redirect into a blocked domain is not followed or billed', async () => {
    const s = await setup()
    const prompt = `Read ${s.at('blocked.acme-web.com', '/secret')} and ${s.at('other.example-news.org', '/hop')}`
    const response = await s.messages({
      messages: [{ role: 'user', content: prompt }],
      tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', blocked_domains: ['acme-web.com'] }],
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { content: Array<{ text: string }>; usage: { input_tokens: number; output_tokens: number; server_tool_use: unknown } }
    const reply = body.content[0]!.text
    expect(s.seen()).toEqual(['other.example-news.org /hop'])
    expect(reply).toContain(`Not fetched: ${s.at('blocked.acme-web.com', '/secret')} (the client's blocked_domains exclude acme-web.com)`)
    expect(reply).toContain(`redirects to ${s.at('blocked.acme-web.com', '/secret')}: the client's blocked_domains exclude acme-web.com`)
    expect(body.usage.server_tool_use).toEqual({ web_search_requests: 0, web_fetch_requests: 0 })
    expect(await s.spent()).toBe(chatPrice(body.usage.input_tokens, body.usage.output_tokens))
  })

  test("Messages web_fetch: max_content_tokens cuts each page's text", async () => {
    const s = await setup()
    const response = await s.messages({
      messages: [{ role: 'user', content: `Read ${s.at('allowed.acme-web.com', '/long')}` }],
      tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', max_content_tokens: 10 }],
    })
    const reply = ((await response.json()) as { content: Array<{ text: string }> }).content[0]!.text
    expect(reply).toContain("[… cut to fit the client's max_content_tokens]")
    expect(reply).not.toContain('long text '.repeat(20))
  })

  test('max_content_tokens never cuts a surrogate pair in half', async () => {
    // Before: 10 tokens (30 UTF-16 units) of "a😀😀…" ended in a lone "\ud83d", sent on to the model.
    const s = await setup()
    const response = await s.messages({
      messages: [{ role: 'user', content: `Read ${s.at('allowed.acme-web.com', '/emoji')}` }],
      tools: [{ type: 'web_fetch_20250910', name: 'web_fetch', max_content_tokens: 10 }],
    })
    const reply = ((await response.json()) as { content: Array<{ text: string }> }).content[0]!.text
    expect(reply).toContain(`\na${'😀'.repeat(14)}\n[… cut to fit the client's max_content_tokens]`)
    expect(reply.isWellFormed()).toBe(true)
  })

  test('Responses web_fetch: allowed_domains and max_uses', async () => {
    const s = await setup()
    const prompt = `Read ${s.at('blocked.acme-web.com', '/secret')}, ${s.at('allowed.acme-web.com', '/ok')} and ${s.at('allowed.acme-web.com', '/second')}`
    const response = await s.responses({ input: prompt, tools: [{ type: 'web_fetch', allowed_domains: ['allowed.acme-web.com'], max_uses: 1 }] })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { output_text?: string; output: Array<{ content?: Array<{ text: string }> }>; usage: { input_tokens: number; output_tokens: number; server_tool_use: unknown } }
    const reply = body.output.flatMap(item => item.content ?? []).map(part => part.text).join('')
    expect(s.seen()).toEqual(['allowed.acme-web.com /ok'])
    expect(reply).toContain("(its host is not in the client's allowed_domains)")
    expect(reply).toContain("(the client's max_uses (1) was reached)")
    expect(body.usage.server_tool_use).toEqual({ web_fetch_requests: 1, web_search_requests: 0 })
    expect(await s.spent()).toBe(chatPrice(body.usage.input_tokens, body.usage.output_tokens) + FETCH_PRICE)
  })

  test('Chat Completions web_fetch: blocked_domains and max_uses', async () => {
    const s = await setup()
    const prompt = `Read ${s.at('blocked.acme-web.com', '/secret')}, ${s.at('other.example-news.org', '/a')} and ${s.at('allowed.acme-web.com', '/b')}`
    const response = await s.chat({ messages: [{ role: 'user', content: prompt }], tools: [{ type: 'web_fetch', blocked_domains: ['blocked.acme-web.com'], max_uses: 1 }] })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { choices: Array<{ message: { content: string } }>; usage: { prompt_tokens: number; completion_tokens: number; server_tool_use: unknown } }
    expect(s.seen()).toEqual(['other.example-news.org /a'])
    expect(body.choices[0]!.message.content).toContain(`Not fetched: ${s.at('allowed.acme-web.com', '/b')} (the client's max_uses (1) was reached)`)
    expect(body.usage.server_tool_use).toEqual({ web_fetch_requests: 1, web_search_requests: 0 })
    expect(await s.spent()).toBe(chatPrice(body.usage.prompt_tokens, body.usage.completion_tokens) + FETCH_PRICE)
  })

  test("Messages web_fetch, the gateway's own type: blocked_domains and max_uses, as on Chat Completions", async () => {
    const s = await setup()
    const prompt = `Read ${s.at('blocked.acme-web.com', '/secret')}, ${s.at('other.example-news.org', '/a')} and ${s.at('allowed.acme-web.com', '/b')}`
    const response = await s.messages({ messages: [{ role: 'user', content: prompt }], tools: [{ type: 'web_fetch', blocked_domains: ['blocked.acme-web.com'], max_uses: 1 }] })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { content: Array<{ text: string }>; usage: { input_tokens: number; output_tokens: number; server_tool_use: unknown } }
    expect(s.seen()).toEqual(['other.example-news.org /a'])
    expect(body.content[0]!.text).toContain(`Not fetched: ${s.at('allowed.acme-web.com', '/b')} (the client's max_uses (1) was reached)`)
    expect(body.usage.server_tool_use).toEqual({ web_search_requests: 0, web_fetch_requests: 1 })
    expect(await s.spent()).toBe(chatPrice(body.usage.input_tokens, body.usage.output_tokens) + FETCH_PRICE)
  })
})

describe('hosted web_search domain lists filter the results', () => {
  // The fake SearXNG answers bun.sh/docs and github.com/oven-sh/bun to every query.
  const searchCases: Array<[string, (s: Setup) => Promise<Response>, (body: any) => { text: string; usage: any; input: number; output: number }]> = [
    [
      'Responses web_search filters.allowed_domains (user_location and search_context_size accepted)',
      s => s.responses({ input: 'what is bun', tools: [{ type: 'web_search', filters: { allowed_domains: ['bun.sh'] }, user_location: { type: 'approximate', country: 'DE' }, search_context_size: 'low' }] }),
      body => ({ text: JSON.stringify(body.output), usage: body.usage.server_tool_use, input: body.usage.input_tokens, output: body.usage.output_tokens }),
    ],
    [
      'Messages web_search_20250305 blocked_domains (user_location accepted)',
      s => s.messages({ messages: [{ role: 'user', content: 'what is bun' }], tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3, blocked_domains: ['github.com'], user_location: { type: 'approximate', country: 'DE' } }] }),
      body => ({ text: body.content[0].text, usage: body.usage.server_tool_use, input: body.usage.input_tokens, output: body.usage.output_tokens }),
    ],
    [
      'Chat Completions web_search allowed_domains',
      s => s.chat({ messages: [{ role: 'user', content: 'what is bun' }], tools: [{ type: 'web_search', allowed_domains: ['bun.sh'] }] }),
      body => ({ text: body.choices[0].message.content, usage: body.usage.server_tool_use, input: body.usage.prompt_tokens, output: body.usage.completion_tokens }),
    ],
  ]
  for (const [name, send, read] of searchCases) {
    test(name, async () => {
      const s = await setup()
      const response = await send(s)
      expect(response.status).toBe(200)
      const { text, usage, input, output } = read(await response.json())
      expect(text).toContain('Bun docs — https://bun.sh/docs')
      expect(text).not.toContain('github.com')
      expect(text).toContain("Results outside the client's domain lists were left out.")
      expect(usage).toMatchObject({ web_search_requests: 1, web_fetch_requests: 0 })
      expect(s.searchQueries).toEqual(['what is bun'])
      expect(await s.spent()).toBe(chatPrice(input, output) + SEARCH_PRICE)
    })
  }

  test('an allow list no result is in leaves none (the search is still billed, as run)', async () => {
    const s = await setup()
    const response = await s.chat({ messages: [{ role: 'user', content: 'what is bun' }], tools: [{ type: 'web_search', allowed_domains: ['python.org'] }] })
    const body = (await response.json()) as { choices: Array<{ message: { content: string } }> }
    expect(body.choices[0]!.message.content).toContain('No results.')
    expect(body.choices[0]!.message.content).not.toContain('bun.sh')
  })
})

describe('malformed or unknown hosted tool options are 400s naming the field, never billed', () => {
  const fetchTool = { type: 'web_fetch_20250910', name: 'web_fetch' }
  const cases: Array<[string, 'messages' | 'responses' | 'chat', unknown, string, RegExp]> = [
    ['Messages: both lists', 'messages', { ...fetchTool, allowed_domains: ['a.com'], blocked_domains: ['b.com'] }, 'tools.0.blocked_domains', /cannot be used together with allowed_domains/],
    ['Messages: a URL as a domain', 'messages', { ...fetchTool, allowed_domains: ['https://a.com'] }, 'tools.0.allowed_domains.0', /without a scheme/],
    ['Messages: a path', 'messages', { ...fetchTool, blocked_domains: ['a.com/blog'] }, 'tools.0.blocked_domains.0', /without a path/],
    ['Messages: a port', 'messages', { type: 'web_search_20250305', name: 'web_search', allowed_domains: ['a.com:8080'] }, 'tools.0.allowed_domains.0', /without a port/],
    ['Messages: a blank domain', 'messages', { ...fetchTool, blocked_domains: [' '] }, 'tools.0.blocked_domains.0', /not blank/],
    ['Messages: an empty allow list', 'messages', { ...fetchTool, allowed_domains: [] }, 'tools.0.allowed_domains', /at least one domain/],
    ['Messages: max_uses 0', 'messages', { ...fetchTool, max_uses: 0 }, 'tools.0.max_uses', /max_uses/],
    ['Messages: a fetch option on search', 'messages', { type: 'web_search_20250305', name: 'web_search', max_content_tokens: 100 }, 'tools.0.max_content_tokens', /not an option of the hosted web_search tool/],
    ['Messages: an option the gateway does not know', 'messages', { ...fetchTool, url_sources: ['user'] }, 'tools.0.url_sources', /not an option/],
    ["Messages: web_fetch (the gateway's own) takes the other routes' options only", 'messages', { type: 'web_fetch', name: 'web_fetch', max_content_tokens: 100 }, 'tools.0.max_content_tokens', /not an option of the hosted web_fetch tool here \(its options: max_uses, allowed_domains, blocked_domains\)/],
    ["Messages: web_search (the gateway's own) with a bad list", 'messages', { type: 'web_search', allowed_domains: ['a.com:8080'] }, 'tools.0.allowed_domains.0', /without a port/],
    ['Responses: a filter other than allowed_domains', 'responses', { type: 'web_search', filters: { blocked_domains: ['a.com'] } }, 'tools.0.filters.blocked_domains', /not a web_search filter/],
    ['Responses: external_web_access', 'responses', { type: 'web_search', external_web_access: false }, 'tools.0.external_web_access', /not an option/],
    ['Responses: a bad search_context_size', 'responses', { type: 'web_search', search_context_size: 'huge' }, 'tools.0.search_context_size', /low, medium, high/],
    ['Responses: web_fetch with a scheme', 'responses', { type: 'web_fetch', allowed_domains: ['http://a.com'] }, 'tools.0.allowed_domains.0', /without a scheme/],
    ['Chat Completions: citations on web_fetch', 'chat', { type: 'web_fetch', citations: { enabled: true } }, 'tools.0.citations', /not an option/],
    ['Chat Completions: max_uses not an integer', 'chat', { type: 'web_fetch', max_uses: 1.5 }, 'tools.0.max_uses', /max_uses/],
    ['Chat Completions: a wildcard', 'chat', { type: 'web_search', blocked_domains: ['*.a.com'] }, 'tools.0.blocked_domains.0', /wildcards/],
  ]
  for (const [name, format, tool, param, message] of cases) {
    test(name, async () => {
      const s = await setup()
      const prompt = `Read ${s.at('allowed.acme-web.com', '/ok')}`
      const response =
        format === 'messages'
          ? await s.messages({ messages: [{ role: 'user', content: prompt }], tools: [tool] })
          : format === 'responses'
          ? await s.responses({ input: prompt, tools: [tool] })
          : await s.chat({ messages: [{ role: 'user', content: prompt }], tools: [tool] })
      expect(response.status).toBe(400)
      const error = ((await response.json()) as { error: { type: string; message: string; param?: string } }).error
      expect(error.type).toBe('invalid_request_error')
      // Messages' envelope has no param: the message names the field.
      if (format === 'messages') expect(error.message).toContain(param)
      else expect(error.param).toBe(param)
      expect(error.message).toMatch(message)
      expect(s.seen()).toEqual([])
      expect(await s.spent()).toBe(0n)
    })
  }
})
