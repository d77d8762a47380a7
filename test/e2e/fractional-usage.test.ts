import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { startServedGateway, type ServedGateway } from '../support/gateway'

// An upstream's usage report is its claim: a backend that reports a fractional token count
// (input_tokens: 1.5) is floored as every count is, and billed. Before, an Anthropic stream's
// 1.5 reached the pricing's BigInt and threw after the answer was sent: nothing was charged, the
// client got an in-band ledger error, and the call's hold and concurrency slot were never freed
// (two such streams at a concurrency limit of 2 refused every later call of the organization).

const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const STREAM = [
  event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [], stop_reason: null, usage: { input_tokens: 1.5, output_tokens: 1 } } }),
  event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'hello there' } }),
  event('content_block_stop', { index: 0 }),
  event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5.9 } }),
  event('message_stop', {}),
].join('')
// 1 input token at 3 USD and 5 output tokens at 7 USD per million, in nanos.
const CHARGE = 1n * 3000n + 5n * 7000n

let upstream: ReturnType<typeof Bun.serve>
let g: ServedGateway

beforeAll(async () => {
  upstream = Bun.serve({ port: 0, hostname: '127.0.0.1', fetch: () => new Response(STREAM, { headers: { 'content-type': 'text/event-stream' } }) })
  g = await startServedGateway(
    `providers:
  - { id: up, type: anthropic, base_url: "http://127.0.0.1:${upstream.port}", api_key_env: UP_KEY, retention: none }
models:
  - { id: m, backends: [{ provider: up, model: claude-x }], price: { input_per_mtok: "3", output_per_mtok: "7" }, context_length: 100000, max_output_tokens: 1000 }
plans: { payg: { monthly_allowance: "0", fusion: false } }
limits: { org_inference_concurrency: 2 }
`,
    { UP_KEY: 'sk-up-0123456789' },
  )
})

afterAll(async () => {
  await g.close()
  upstream.stop(true)
})

async function settled(): Promise<bigint> {
  const rows = await g.t.deps.database.client.execute({ sql: "select coalesce(sum(amount_nanos), 0) as total from ledger_entries where org_id = ? and kind = 'settle'", args: [g.orgId] })
  return BigInt(rows.rows[0]!.total as bigint)
}

describe('fractional token counts from an upstream', () => {
  test('streamed and collected, in both client formats: floored, billed, and every hold and slot freed', async () => {
    const before = await settled()
    // More calls than the organization's concurrency limit: a leaked slot would refuse the third.
    for (let round = 0; round < 2; round++) {
      const messages = await g.anthropic.messages.stream({ model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] }).finalMessage()
      expect(messages.content.map(block => (block.type === 'text' ? block.text : block.type))).toEqual(['hello there'])
      expect(messages.usage).toMatchObject({ input_tokens: 1, output_tokens: 5 })
      const chunks = await g.openai.chat.completions.create({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] })
      let usage: unknown
      for await (const chunk of chunks) if (chunk.usage) usage = chunk.usage
      expect(usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 5 })
      const collected = await g.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }] })
      expect(collected.usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 5 })
    }
    expect(await settled()).toBe(before + 6n * CHARGE)
    expect(g.t.deps.limits.concurrency.inUse(g.orgId)).toBe(0)
    expect(g.t.deps.ledger.pools.all().every(pool => pool.held === 0n)).toBe(true)
  })
})
