import { afterAll, beforeAll, expect, test } from 'bun:test'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from '../support/gateway'

// An Anthropic backend's cache writes reach a Messages client as cache_creation_input_tokens,
// apart from input_tokens and cache reads, streamed and not (QA: they were told 0 and added to
// input_tokens). Their price: test/inference/messages-cache-billing.test.ts.

const USAGE = { input_tokens: 100, cache_creation_input_tokens: 50, cache_read_input_tokens: 200, output_tokens: 30 }
const frame = (event: { type: string }) => `event: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`
const message = { id: 'msg_up', type: 'message', role: 'assistant', model: 'claude-up', stop_reason: null, stop_sequence: null }

let upstream: ReturnType<typeof Bun.serve>
let g: ServedGateway
beforeAll(async () => {
  upstream = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as { stream?: boolean }
      if (body.stream !== true) return Response.json({ ...message, content: [{ type: 'text', text: 'ok' }], stop_reason: 'end_turn', usage: USAGE })
      const events = [
        { type: 'message_start', message: { ...message, content: [], usage: { ...USAGE, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'ok' } },
        { type: 'content_block_stop', index: 0 },
        { type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 30 } },
        { type: 'message_stop' },
      ]
      return new Response(events.map(frame).join(''), { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  g = await startServedGateway(
    paygConfig(
      [upstreamProvider('claude', 'anthropic', `http://127.0.0.1:${upstream.port}/v1`, 'UP_KEY')],
      ['  - { id: claude, backends: [{ provider: claude, model: claude-up }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 200000, max_output_tokens: 1024 }'],
    ),
    { UP_KEY: 'sk-upstream-0123456789' },
  )
})
afterAll(async () => {
  await g.close()
  upstream.stop(true)
})

test('create and stream().finalMessage() report the cache writes as the backend did', async () => {
  const params = { model: 'claude', max_tokens: 50, messages: [{ role: 'user' as const, content: 'x' }] }
  const created = await g.anthropic.messages.create(params)
  expect(created.usage).toMatchObject(USAGE)
  const streamed = g.anthropic.messages.stream(params)
  const start = new Promise(resolve => streamed.on('streamEvent', event => event.type === 'message_start' && resolve(event.message.usage)))
  expect((await streamed.finalMessage()).usage).toMatchObject(USAGE)
  expect(await start).toMatchObject({ input_tokens: 100, cache_creation_input_tokens: 50, cache_read_input_tokens: 200 })
  // Through Chat Completions the writes stay inside prompt_tokens (OpenAI has no field for them).
  const completion = await g.openai.chat.completions.create({ model: 'claude', messages: [{ role: 'user', content: 'x' }] })
  expect([completion.usage?.prompt_tokens, completion.usage?.prompt_tokens_details?.cached_tokens]).toEqual([350, 200])
})
