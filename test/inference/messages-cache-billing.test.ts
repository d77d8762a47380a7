import { afterAll, beforeAll, expect, test } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import { anthropicClient, openAIClient, paygConfig, upstreamProvider } from '../support/gateway'
import { buildConfiguredApp, type TestApp, type TestOrg } from '../support/harness'

// Prompt-cache writes are billed at the model's write price for their lifetime (1.25× the input
// price for 5 minutes and 2× for an hour unless configured, what Anthropic bills), reads at the
// cached price, the rest at the input price, in one rounding: the ledger's charge is exact to the
// nano. (QA: writes were billed as plain input, below what Anthropic charges the operator.)
//
// The upstream is a real HTTP server that caches as Anthropic does, in miniature: a token is a
// word; a request reads the longest prefix ending at one of its breakpoints that an earlier
// request wrote, and writes each later breakpoint's segment for that breakpoint's lifetime.

const OUTPUT_TOKENS = 20
const words = (count: number, word: string) => `${word} `.repeat(count).trim()

interface Segment {
  readonly tokens: number
  readonly key: string
  readonly ttl?: '5m' | '1h'
}

/** The prompt's text blocks in Anthropic's cache order (system, then messages), each a segment with its breakpoint. */
function segments(body: any): Segment[] {
  const blocks: any[] = []
  if (typeof body.system === 'string') blocks.push({ type: 'text', text: body.system })
  else blocks.push(...(body.system ?? []))
  for (const message of body.messages) blocks.push(...(typeof message.content === 'string' ? [{ type: 'text', text: message.content }] : message.content))
  // Automatic caching: the breakpoint goes on the last block.
  if (body.cache_control) blocks[blocks.length - 1] = { ...blocks[blocks.length - 1], cache_control: body.cache_control }
  let key = ''
  return blocks.map(block => {
    const text = block.text ?? block.content ?? ''
    key += `${text}\u0000`
    return { tokens: text.split(/\s+/).filter(Boolean).length, key, ttl: block.cache_control ? (block.cache_control.ttl ?? '5m') : undefined }
  })
}

function cachingUpstream() {
  const cache = new Set<string>()
  const received: any[] = []
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as any
      received.push(body)
      const parts = segments(body)
      const total = parts.reduce((sum, part) => sum + part.tokens, 0)
      let read = 0
      let readAt = -1
      parts.forEach((part, index) => {
        if (part.ttl !== undefined && cache.has(part.key)) {
          readAt = index
          read = parts.slice(0, index + 1).reduce((sum, each) => sum + each.tokens, 0)
        }
      })
      const written = { '5m': 0, '1h': 0 }
      let segment = 0
      parts.forEach((part, index) => {
        if (index <= readAt) return
        segment += part.tokens
        if (part.ttl === undefined) return
        written[part.ttl] += segment
        segment = 0
        cache.add(part.key)
      })
      const writes = written['5m'] + written['1h']
      // A compatible upstream of the older shape: no split of its writes by lifetime.
      const split = body.model === 'claude-nosplit' ? {} : { cache_creation: { ephemeral_5m_input_tokens: written['5m'], ephemeral_1h_input_tokens: written['1h'] } }
      const usage = { input_tokens: total - read - writes, cache_read_input_tokens: read, cache_creation_input_tokens: writes, ...split }
      const message = { id: 'msg_up', type: 'message', role: 'assistant', model: body.model, stop_sequence: null }
      if (body.stream === false) return Response.json({ ...message, content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', usage: { ...usage, output_tokens: OUTPUT_TOKENS } })
      const frame = (event: { type: string }) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
      const events = [
        { type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...usage, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ok' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: OUTPUT_TOKENS } },
        { type: 'message_stop' },
      ]
      return new Response(events.map(frame).join(''), { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, received, stop: () => server.stop(true) }
}

// Nanos per token: input 3 USD/Mtok = 3000, cached 300, output 15000; writes unset: 3750 (5m) and 6000 (1h).
const PRICE = 'price: { input_per_mtok: "3", output_per_mtok: "15", cached_input_per_mtok: "0.30" }'
const LIMITS = 'context_length: 200000, max_output_tokens: 1024, capabilities: { tools: true }'
const RATES = { input: 3000n, cached: 300n, output: 15_000n, write5m: 3750n, write1h: 6000n }
/** The expected charge of one call: exact, in nanos (every rate is a whole nano per token here). */
const expected = (usage: { input: number; read?: number; write5m?: number; write1h?: number }, rates = RATES) =>
  BigInt(usage.input) * rates.input + BigInt(usage.read ?? 0) * rates.cached + BigInt(usage.write5m ?? 0) * rates.write5m + BigInt(usage.write1h ?? 0) * rates.write1h + BigInt(OUTPUT_TOKENS) * rates.output

let upstream: ReturnType<typeof cachingUpstream>
let t: TestApp
let org: TestOrg
let sdk: Anthropic

beforeAll(async () => {
  upstream = cachingUpstream()
  t = await buildConfiguredApp(
    paygConfig(
      [upstreamProvider('claude', 'anthropic', `${upstream.url}/v1`, 'UP_KEY')],
      [
        `  - { id: claude, backends: [{ provider: claude, model: claude-up }], ${PRICE}, ${LIMITS} }`,
        `  - { id: claude-nosplit, backends: [{ provider: claude, model: claude-nosplit }], ${PRICE}, ${LIMITS} }`,
        `  - { id: claude-nosplit-dear5m, backends: [{ provider: claude, model: claude-nosplit }], price: { input_per_mtok: "3", output_per_mtok: "15", cached_input_per_mtok: "0.30", cache_write_input_per_mtok: "9" }, ${LIMITS} }`,
        `  - { id: claude-priced, backends: [{ provider: claude, model: claude-up }], price: { input_per_mtok: "3", output_per_mtok: "15", cached_input_per_mtok: "0.30", cache_write_input_per_mtok: "4", cache_write_1h_input_per_mtok: "7.5" }, ${LIMITS} }`,
      ],
    ),
    { UP_KEY: 'sk-upstream-0123456789' },
  )
  org = await t.createOrg('cache-billing', 10_000_000_000n)
  sdk = anthropicClient(t.listen(), org.adminKey)
})
afterAll(async () => {
  await t.close()
  upstream.stop()
})

let spent = 0n
/** What the last call cost the organization (a pay-as-you-go org pays from its prepaid balance). */
async function lastCharge(): Promise<bigint> {
  const total = 10_000_000_000n - (await t.deps.balance(org.orgId)).prepaidNanos
  const charge = total - spent
  spent = total
  return charge
}

const system = (count: number, word: string, ttl?: '5m' | '1h') => [
  { type: 'text' as const, text: words(count, word), cache_control: ttl === undefined ? { type: 'ephemeral' as const } : { type: 'ephemeral' as const, ttl } },
]

test('a 5-minute write is billed at 1.25× the input price; the next call reads it at the cached price', async () => {
  const params = { model: 'claude', max_tokens: 100, system: system(1000, 'alpha'), messages: [{ role: 'user' as const, content: 'hello there' }] }
  const first = await sdk.messages.create(params)
  expect(first.usage).toMatchObject({ input_tokens: 2, cache_creation_input_tokens: 1000, cache_read_input_tokens: 0, cache_creation: { ephemeral_5m_input_tokens: 1000, ephemeral_1h_input_tokens: 0 } })
  expect(await lastCharge()).toBe(expected({ input: 2, write5m: 1000 }))
  // Streamed this time (the same-format pass-through): the prefix is read from the cache.
  const second = await sdk.messages.stream(params).finalMessage()
  expect(second.usage).toMatchObject({ input_tokens: 2, cache_creation_input_tokens: 0, cache_read_input_tokens: 1000 })
  expect(await lastCharge()).toBe(expected({ input: 2, read: 1000 }))
  expect(upstream.received.map(body => body.system)).toEqual([params.system, params.system])
})

test('1-hour and 5-minute writes in one call are each billed at their price, as the upstream split them', async () => {
  const params = {
    model: 'claude',
    max_tokens: 100,
    system: system(2000, 'beta', '1h'),
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: words(500, 'gamma'), cache_control: { type: 'ephemeral' as const, ttl: '5m' as const } }, { type: 'text' as const, text: 'go' }] }],
  }
  const message = await sdk.messages.stream(params).finalMessage()
  expect(message.usage).toMatchObject({ input_tokens: 1, cache_creation_input_tokens: 2500, cache_creation: { ephemeral_5m_input_tokens: 500, ephemeral_1h_input_tokens: 2000 } })
  expect(await lastCharge()).toBe(expected({ input: 1, write5m: 500, write1h: 2000 }))
})

test('automatic caching (the top-level cache_control) is billed as the upstream reports its writes', async () => {
  const params = { model: 'claude', max_tokens: 100, cache_control: { type: 'ephemeral' as const, ttl: '1h' as const }, messages: [{ role: 'user' as const, content: words(300, 'delta') }] }
  await sdk.messages.create(params)
  expect(upstream.received.at(-1).cache_control).toEqual({ type: 'ephemeral', ttl: '1h' })
  expect(await lastCharge()).toBe(expected({ input: 0, write1h: 300 }))
  await sdk.messages.create(params)
  expect(await lastCharge()).toBe(expected({ input: 0, read: 300 }))
})

test('writes reported without their lifetime are billed at the 1-hour price when the request set a 1-hour hint, else at the 5-minute one', async () => {
  const mixed = {
    model: 'claude-nosplit',
    max_tokens: 100,
    system: system(400, 'epsilon', '1h'),
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: words(100, 'zeta'), cache_control: { type: 'ephemeral' as const } }] }],
  }
  const message = await sdk.messages.create(mixed)
  // The dearer reading, told back as it was billed.
  expect(message.usage).toMatchObject({ cache_creation_input_tokens: 500, cache_creation: { ephemeral_5m_input_tokens: 0, ephemeral_1h_input_tokens: 500 } })
  expect(await lastCharge()).toBe(expected({ input: 0, write1h: 500 }))
  await sdk.messages.create({ ...mixed, system: system(400, 'eta') })
  expect(await lastCharge()).toBe(expected({ input: 0, write5m: 500 }))
})

test('unsplit writes are billed at the dearer possible price when the 5-minute one is configured above the 1-hour one', async () => {
  // 5-minute writes at 9 USD/M, 1-hour ones at their 6 USD/M default: a request with a 1-hour and
  // a 5-minute hint may have either written, so its unsplit writes are read as the dearer 5-minute
  // ones. (QA: they were read as 1-hour ones, the cheaper reading.)
  const mixed = {
    model: 'claude-nosplit-dear5m',
    max_tokens: 100,
    system: system(400, 'kappa', '1h'),
    messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: words(100, 'lambda'), cache_control: { type: 'ephemeral' as const } }] }],
  }
  const message = await sdk.messages.create(mixed)
  const charge = await lastCharge()
  expect(message.usage).toMatchObject({ cache_creation_input_tokens: 500, cache_creation: { ephemeral_5m_input_tokens: 500, ephemeral_1h_input_tokens: 0 } })
  expect(charge).toBe(expected({ input: 0, write5m: 500 }, { ...RATES, write5m: 9000n }))
})

test('configured write prices are used instead of the defaults', async () => {
  const params = { model: 'claude-priced', max_tokens: 100, system: system(700, 'theta', '1h'), messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: words(50, 'iota'), cache_control: { type: 'ephemeral' as const } }] }] }
  await sdk.messages.create(params)
  expect(await lastCharge()).toBe(expected({ input: 0, write5m: 50, write1h: 700 }, { ...RATES, write5m: 4000n, write1h: 7500n }))
})

test('a Chat Completions client sets no hint, so none is sent and nothing is written', async () => {
  const before = upstream.received.length
  await openAIClient(t.listen(), org.adminKey).chat.completions.create({ model: 'claude', messages: [{ role: 'system', content: words(1000, 'alpha') }, { role: 'user', content: 'hello there' }] })
  expect(JSON.stringify(upstream.received.slice(before))).not.toContain('cache_control')
  expect(await lastCharge()).toBe(expected({ input: 1002 }))
})
