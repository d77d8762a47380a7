import { afterEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { loadConfig } from '../../src/config/load'
import { anthropicWire } from '../providers/anthropic-wire'
import type { TurnScript } from '../providers/conformance'
import { openAIWire } from '../providers/openai-wire'
import { BUN_RESULTS, FakeResolver, loggingTransport, pageServer, searxngServer, storyPage } from '../support/fake-web'
import { FakeUpstream } from '../support/fake-upstream'
import { buildTestApp, createPlanOrg, type TestApp } from '../support/harness'

// Hosted web_fetch / web_search through the Responses and Messages client formats (issue 7
// point 5), with the official SDKs over a real socket, in front of fake OpenAI-compatible and
// Anthropic upstreams; pages come from a local server reached only through the scripted
// resolver, search from a fake SearXNG. Checked: the upstream sees the delimited web context,
// each format reports the runs in its usage (`usage.server_tool_use` — Anthropic's own field on
// Messages, the gateway's Chat Completions extension on Responses, whose usage has none), and
// the ledger holds the chat charge plus one unit per page fetched and per search run.

const FETCH_PRICE = 2_000_000n
const SEARCH_PRICE = 5_000_000n
const CREDIT = 1_000_000_000n
// The models' price: 1 / 2 USD per Mtok = 1000 / 2000 nanos per token.
const chatPrice = (input: number, output: number) => BigInt(input) * 1000n + BigInt(output) * 2000n
const TURN: TurnScript = { text: 'Here is what the page says.', finish: 'stop', usage: { inputTokens: 400, outputTokens: 7 } }
const EXPECTED_USAGE = { input: 400, output: 7 }

type ServerToolUse = { web_fetch_requests: number; web_search_requests: number }

const stops: Array<() => Promise<void> | void> = []
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop()
})

async function setup() {
  const openai = await FakeUpstream.start()
  const anthropic = await FakeUpstream.start()
  stops.push(() => openai.close(), () => anthropic.close())
  const searxng = searxngServer(BUN_RESULTS.slice(0, 1).map(({ publishedDate, ...undated }) => undated))
  stops.push(searxng.stop)
  const pages = pageServer((_, url) => storyPage(url.pathname))
  stops.push(pages.stop)
  const capabilities = '{ tools: true, supports_web_fetch: true, supports_web_search: true }'
  const yaml = `
providers:
  - { id: oa, type: openai-compatible, base_url: "${openai.url}/v1", api_key_env: UP_KEY, retention: none }
  - { id: an, type: anthropic, base_url: "${anthropic.url}/v1", api_key_env: UP_KEY, retention: none }
models:
  - { id: web-openai, backends: [{ provider: oa, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 32768, max_output_tokens: 1024, capabilities: ${capabilities} }
  - { id: web-anthropic, backends: [{ provider: an, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 32768, max_output_tokens: 1024, capabilities: ${capabilities} }
  - { id: plain-openai, backends: [{ provider: oa, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 32768, max_output_tokens: 1024 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
web:
  fetch: { timeout_ms: 2000, max_bytes: 65536, unsafe_test_allow_cidrs: ["127.0.0.1/32"] }
  search: ${searxng.config}
prices: { web_fetch: "0.002", web_search: "0.005" }
`
  const env = { SVC_CONFIG: '/virtual/web-dialects.yaml', UP_KEY: 'sk-up-0123456789' }
  const resolver = new FakeResolver()
  const { transport, egress } = loggingTransport()
  const t: TestApp = await buildTestApp(env, loadConfig(env, () => yaml), { resolver, webTransport: transport })
  stops.push(() => t.close())
  const { orgId, key: secret } = await createPlanOrg(t, { name: 'web', credit: CREDIT })
  resolver.set('news.acme-web.com', ['127.0.0.1'])
  const base = t.listen()
  return {
    upstreams: { openai, anthropic },
    pages,
    egress,
    site: `http://news.acme-web.com:${pages.port}`,
    responses: new OpenAI({ apiKey: secret, baseURL: `${base}/v1`, maxRetries: 0 }),
    messages: new Anthropic({ apiKey: secret, baseURL: base, maxRetries: 0 }),
    spent: async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos,
  }
}

type Setup = Awaited<ReturnType<typeof setup>>
type Backend = 'openai' | 'anthropic'
const WIRE = { openai: openAIWire, anthropic: anthropicWire }

/** What the upstream received, as text (its user message carries the web context). */
function upstreamSaw(s: Setup, backend: Backend): string {
  return JSON.stringify(s.upstreams[backend].onlyRequest().body)
}

/** One call through a client format: returns the visible text and the usage's server_tool_use. */
type Caller = (s: Setup, model: string, prompt: string, tools: 'fetch' | 'search' | 'both', stream: boolean) => Promise<{ text: string; serverToolUse: ServerToolUse | undefined; input: number; output: number }>

const callResponses: Caller = async (s, model, prompt, tools, stream) => {
  const hosted = [...(tools !== 'search' ? [{ type: 'web_fetch' }] : []), ...(tools !== 'fetch' ? [{ type: 'web_search' }] : [])] as unknown as OpenAI.Responses.Tool[]
  const params = { model, input: prompt, tools: hosted }
  const response = stream ? await s.responses.responses.stream(params).finalResponse() : await s.responses.responses.create(params)
  const usage = response.usage as OpenAI.Responses.ResponseUsage & { server_tool_use?: ServerToolUse }
  return { text: response.output_text, serverToolUse: usage.server_tool_use, input: usage.input_tokens, output: usage.output_tokens }
}

const callMessages: Caller = async (s, model, prompt, tools, stream) => {
  const hosted = [
    ...(tools !== 'search' ? [{ type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 3 }] : []),
    ...(tools !== 'fetch' ? [{ type: 'web_search_20250305', name: 'web_search', max_uses: 1 }] : []),
  ] as unknown as Anthropic.ToolUnion[]
  const params = { model, max_tokens: 256, messages: [{ role: 'user' as const, content: prompt }], tools: hosted }
  const message = stream ? await s.messages.messages.stream(params).finalMessage() : await s.messages.messages.create(params)
  const text = message.content.flatMap(block => (block.type === 'text' ? [block.text] : [])).join('')
  const usage = message.usage
  return { text, serverToolUse: (usage.server_tool_use ?? undefined) as ServerToolUse | undefined, input: usage.input_tokens + (usage.cache_read_input_tokens ?? 0), output: usage.output_tokens }
}

const CLIENTS: Array<[string, Caller]> = [['Responses', callResponses], ['Messages', callMessages]]

for (const [client, call] of CLIENTS) {
  describe(`hosted web tools through ${client}`, () => {
    for (const backend of ['openai', 'anthropic'] as const) {
      for (const stream of [false, true]) {
        test(`${backend} backend, ${stream ? 'streamed' : 'plain'}: fetch and search run, the upstream sees the delimited context, usage and billing count them`, async () => {
          const s = await setup()
          s.upstreams[backend].enqueue({ kind: 'sse', body: WIRE[backend].stream(TURN) })
          const result = await call(s, `web-${backend}`, `What does ${s.site}/story say about bun?`, 'both', stream)
          expect(result.text).toBe(TURN.text!)
          const saw = upstreamSaw(s, backend)
          expect(saw).toMatch(/<<<page 1 [0-9a-f]{12}>>>/)
          expect(saw).toContain(`URL: ${s.site}/story`)
          expect(saw).toContain('The story at /story.')
          expect(saw).toMatch(/<<<search [0-9a-f]{12}>>>/)
          expect(saw).toContain('1. Bun docs — https://bun.sh/docs')
          expect(saw).toContain('untrusted')
          expect(s.pages.seen.map(seen => seen.path)).toEqual(['/story'])
          expect(result.serverToolUse).toEqual({ web_fetch_requests: 1, web_search_requests: 1 })
          expect({ input: result.input, output: result.output }).toEqual(EXPECTED_USAGE)
          expect(await s.spent()).toBe(chatPrice(result.input, result.output) + FETCH_PRICE + SEARCH_PRICE)
        })
      }
    }

    test('enabled but nothing to run (no URL named): usage reports zero counts, only the chat is billed', async () => {
      for (const stream of [false, true]) {
        const s = await setup()
        s.upstreams.openai.enqueue({ kind: 'sse', body: openAIWire.stream(TURN) })
        const result = await call(s, 'web-openai', 'no links here', 'fetch', stream)
        expect(result.serverToolUse).toEqual({ web_fetch_requests: 0, web_search_requests: 0 })
        expect(s.egress).toEqual([])
        expect(await s.spent()).toBe(chatPrice(result.input, result.output))
      }
    })

    test('without hosted tools, usage carries no server_tool_use', async () => {
      const s = await setup()
      s.upstreams.openai.enqueue({ kind: 'sse', body: openAIWire.stream(TURN) })
      const model = 'web-openai'
      const result =
        client === 'Responses'
          ? await s.responses.responses.create({ model, input: 'hi' }).then(response => (response.usage as { server_tool_use?: unknown }).server_tool_use)
          : await s.messages.messages.create({ model, max_tokens: 64, messages: [{ role: 'user', content: 'hi' }] }).then(message => message.usage.server_tool_use ?? undefined)
      expect(result).toBeUndefined()
    })

    test('a model without the capability refuses with 400 before anything is fetched or billed', async () => {
      const s = await setup()
      const error = await call(s, 'plain-openai', `read ${s.site}/a`, 'fetch', false).then(() => undefined, error => error)
      expect(error).toBeInstanceOf(client === 'Responses' ? OpenAI.BadRequestError : Anthropic.BadRequestError)
      expect((error as Error).message).toMatch(/does not support hosted web_fetch/)
      expect(s.egress).toEqual([])
      expect(s.upstreams.openai.requests).toHaveLength(0)
      expect(await s.spent()).toBe(0n)
    })
  })
}

describe("hosted web tools through Messages, in the gateway's own spellings", () => {
  // Spec §4.7 / §4.12: the body flags and the undated tool types of the other two routes work on
  // Messages too, with the same meaning (before: 400 unknown field "web_fetch", or
  // "tools.0.name is missing" / "must be a dated server tool type"). The SDK's types know only
  // Anthropic's tools, hence the casts.
  const FORMS: Array<[string, Record<string, unknown>]> = [
    ['body flags web_fetch / web_search: true', { web_fetch: true, web_search: true }],
    ['tool entries {type: "web_fetch"} / {type: "web_search"}', { tools: [{ type: 'web_fetch' }, { type: 'web_search' }] }],
    ['named tool entries with options', { tools: [{ type: 'web_fetch', name: 'web_fetch', max_uses: 1, allowed_domains: ['acme-web.com'] }, { type: 'web_search', name: 'web_search' }] }],
  ]
  for (const [name, hosted] of FORMS) {
    for (const stream of [false, true]) {
      test(`${name}, ${stream ? 'streamed' : 'plain'}: fetch and search run and usage.server_tool_use counts them, as with the dated tools`, async () => {
        const s = await setup()
        s.upstreams.anthropic.enqueue({ kind: 'sse', body: anthropicWire.stream(TURN) })
        const params = { model: 'web-anthropic', max_tokens: 256, messages: [{ role: 'user', content: `What does ${s.site}/story say about bun?` }], ...hosted } as Anthropic.MessageCreateParamsNonStreaming
        const message = stream ? await s.messages.messages.stream(params).finalMessage() : await s.messages.messages.create(params)
        const saw = upstreamSaw(s, 'anthropic')
        expect(saw).toContain(`URL: ${s.site}/story`)
        expect(saw).toContain('The story at /story.')
        expect(saw).toContain('1. Bun docs — https://bun.sh/docs')
        expect(message.usage.server_tool_use).toEqual({ web_fetch_requests: 1, web_search_requests: 1 })
        expect(await s.spent()).toBe(chatPrice(message.usage.input_tokens, message.usage.output_tokens) + FETCH_PRICE + SEARCH_PRICE)
      })
    }
  }

  test('the capability check holds for both spellings: 400 before anything is fetched or billed', async () => {
    for (const hosted of [{ web_fetch: true }, { tools: [{ type: 'web_fetch', name: 'web_fetch' }] }]) {
      const s = await setup()
      const params = { model: 'plain-openai', max_tokens: 64, messages: [{ role: 'user', content: `read ${s.site}/a` }], ...hosted } as Anthropic.MessageCreateParamsNonStreaming
      const error = await s.messages.messages.create(params).then(() => undefined, error => error)
      expect(error).toBeInstanceOf(Anthropic.BadRequestError)
      expect((error as Error).message).toMatch(/does not support hosted web_fetch/)
      expect(s.egress).toEqual([])
      expect(await s.spent()).toBe(0n)
    }
  })
})
