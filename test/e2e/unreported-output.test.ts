import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from '../support/gateway'

// An Anthropic backend whose answer carries no valid output count (message_delta without usage,
// or with an output_tokens that is negative, a string or null; no message_delta at all) is billed
// the output the gateway counted, as the same bytes from a Chat Completions backend are. Before,
// message_start's placeholder `output_tokens: 1` was kept as the answer's count and a 1,000-token
// answer was billed 1 output token (QA chaos pass: long_no_delta_usage, long_bad_delta_usage).
// Every client format, streamed and collected; the Messages stream is the pass-through path.

const TEXT = 'The quick brown fox jumps over the dog. ' // 40 bytes
const PIECES = 100
/** The meter's count of the answer: 4,000 bytes at 4 bytes a token. */
const COUNTED = (TEXT.length * PIECES) / 4
const INPUT = 5
/** At 1 USD per million tokens, input and output: 1,000 nanos a token. */
const CHARGE = BigInt(INPUT + COUNTED) * 1000n

/** message_delta's usage (undefined: none), or `no-delta` for a stream without message_delta. */
const VARIANTS: Record<string, Record<string, unknown> | undefined | 'no-delta'> = {
  'no usage': undefined,
  'negative output_tokens': { output_tokens: -1 },
  'output_tokens as a string': { output_tokens: '1000' },
  'null output_tokens': { output_tokens: null },
  'no message_delta': 'no-delta',
}

const event = (type: string, data: Record<string, unknown>) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`

/** A valid count below the meter's (the control: the upstream's own count wins). */
const REPORTED = 900

/**
 * The answer for a prompt naming a variant. A stream is sent chunked, as Anthropic sends it; with
 * ` (declared)` after the variant, with its length declared (the provider reads it whole).
 */
function answer(prompt: string, stream: boolean): Response {
  const variant = prompt.replace(/ \(declared\)$/, '')
  const delta = variant === 'reported' ? { output_tokens: REPORTED } : VARIANTS[variant]
  // Anthropic's own message_start: the input count and the placeholder output count of 1.
  const startUsage = { input_tokens: INPUT, output_tokens: 1 }
  if (!stream) {
    const usage = delta === undefined || delta === 'no-delta' ? { input_tokens: INPUT } : { input_tokens: INPUT, ...delta }
    return Response.json({ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [{ type: 'text', text: TEXT.repeat(PIECES) }], stop_reason: 'end_turn', stop_sequence: null, usage })
  }
  const parts = [
    event('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-x', content: [], stop_reason: null, usage: startUsage } }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ]
  for (let i = 0; i < PIECES; i++) parts.push(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: TEXT } }))
  parts.push(event('content_block_stop', { index: 0 }))
  if (delta !== 'no-delta') parts.push(event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, ...(delta === undefined ? {} : { usage: delta }) }))
  parts.push(event('message_stop', {}))
  if (prompt !== variant) return new Response(parts.join(''), { headers: { 'content-type': 'text/event-stream' } })
  const bytes = new TextEncoder().encode(parts.join(''))
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      for (let at = 0; at < bytes.length; at += 1024) controller.enqueue(bytes.subarray(at, at + 1024))
      controller.close()
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
}

let upstream: ReturnType<typeof Bun.serve>
let g: ServedGateway

beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: async request => {
      const body = (await request.json()) as { stream?: boolean; messages: Array<{ content: string | Array<{ text?: string }> }> }
      const content = body.messages.at(-1)!.content
      return answer(typeof content === 'string' ? content : content.map(part => part.text ?? '').join(''), body.stream !== false)
    },
  })
  g = await startServedGateway(
    paygConfig(
      [upstreamProvider('up', 'anthropic', `http://127.0.0.1:${upstream.port}/v1`, 'UP_KEY')],
      ['  - { id: m, backends: [{ provider: up, model: claude-x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 100000, max_output_tokens: 4096 }'],
    ),
    { UP_KEY: 'sk-up-0123456789' },
  )
})

afterAll(async () => {
  await g.close()
  upstream.stop(true)
})

async function balance(): Promise<bigint> {
  return (await g.t.deps.balance(g.orgId)).prepaidNanos
}

/** Each client format, streamed and collected: the output tokens the reply reports. */
const CLIENTS: Record<string, (prompt: string) => Promise<number | undefined>> = {
  'chat, streamed': async prompt => {
    const chunks = await g.openai.chat.completions.create({ model: 'm', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: prompt }] })
    let tokens: number | undefined
    for await (const chunk of chunks) if (chunk.usage) tokens = chunk.usage.completion_tokens
    return tokens
  },
  'chat, collected': async prompt => (await g.openai.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: prompt }] })).usage?.completion_tokens,
  'responses, streamed': async prompt => {
    const events = await g.openai.responses.create({ model: 'm', stream: true, input: prompt })
    let tokens: number | undefined
    for await (const item of events) if (item.type === 'response.completed') tokens = item.response.usage?.output_tokens
    return tokens
  },
  'responses, collected': async prompt => (await g.openai.responses.create({ model: 'm', input: prompt })).usage?.output_tokens,
  'messages, streamed (pass-through)': async prompt => (await g.anthropic.messages.stream({ model: 'm', max_tokens: 4096, messages: [{ role: 'user', content: prompt }] }).finalMessage()).usage.output_tokens,
  'messages, collected': async prompt => (await g.anthropic.messages.create({ model: 'm', max_tokens: 4096, messages: [{ role: 'user', content: prompt }] })).usage.output_tokens,
}

describe('an Anthropic answer without a valid output count is billed the output counted', () => {
  for (const variant of Object.keys(VARIANTS)) {
    for (const [client, call] of Object.entries(CLIENTS)) {
      test(`${variant}: ${client}`, async () => {
        const before = await balance()
        expect(await call(variant)).toBe(COUNTED)
        expect(before - (await balance())).toBe(CHARGE)
      })
    }
  }

  for (const [client, call] of Object.entries(CLIENTS)) {
    test(`no usage, a stream of declared length: ${client}`, async () => {
      const before = await balance()
      expect(await call('no usage (declared)')).toBe(COUNTED)
      expect(before - (await balance())).toBe(CHARGE)
    })
  }

  test('a valid output count in message_delta still wins over the count', async () => {
    // The control: the upstream's own count, lower than the meter's, is what is billed.
    const before = await balance()
    expect(await CLIENTS['chat, streamed']!('reported')).toBe(REPORTED)
    expect(before - (await balance())).toBe(BigInt(INPUT + REPORTED) * 1000n)
  })
})
