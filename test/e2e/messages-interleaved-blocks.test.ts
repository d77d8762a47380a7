import { describe, expect, test } from 'bun:test'
import { oneModelGateway } from '../support/gateway'
import { weatherTool } from './upstream-fixtures'

// An Anthropic-type backend that opens a tool_use block while a text or thinking block is still
// open, and goes on writing into both (Anthropic sends one block at a time; a compatible server
// may not). A Messages client gets one block at a time: the tool block's start stops the open
// one, and that one's later deltas come in a new block after the tool block, never after their
// block's content_block_stop (QA: they did, while no block was open).

const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
const start = (index: number, content_block: object) => event({ type: 'content_block_start', index, content_block })
const delta = (index: number, delta: object) => event({ type: 'content_block_delta', index, delta })
const stop = (index: number) => event({ type: 'content_block_stop', index })
const TOOL = { type: 'tool_use', id: 'toolu_z', name: 'get_weather', input: {} }
const toolUse = { ...TOOL, input: { city: 'X' } }

/** A stream whose content is `blocks` (its frames), framed as Anthropic frames a tool_use turn. */
const answer = (...blocks: string[]) =>
  [
    event({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'x', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 30, output_tokens: 1 } } }),
    ...blocks,
    event({ type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 9 } }),
    event({ type: 'message_stop' }),
  ].join('')

const cases = [
  {
    name: 'text',
    body: answer(
      start(0, { type: 'text', text: '' }),
      start(1, TOOL),
      delta(0, { type: 'text_delta', text: 'A' }),
      delta(1, { type: 'input_json_delta', partial_json: '{"city":' }),
      delta(0, { type: 'text_delta', text: 'B' }),
      delta(1, { type: 'input_json_delta', partial_json: '"X"}' }),
      stop(0),
      stop(1),
    ),
    events: ['start:0', 'stop:0', 'start:1', 'input_json_delta:1', 'input_json_delta:1', 'stop:1', 'start:2', 'text_delta:2', 'text_delta:2', 'stop:2'],
    content: [{ type: 'text', text: '' }, toolUse, { type: 'text', text: 'AB' }],
  },
  {
    name: 'signed thinking',
    body: answer(
      start(0, { type: 'thinking', thinking: '', signature: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'x' }),
      start(1, TOOL),
      delta(1, { type: 'input_json_delta', partial_json: '{"city":"X"}' }),
      delta(0, { type: 'thinking_delta', thinking: 'y' }),
      delta(0, { type: 'signature_delta', signature: 'sig' }),
      stop(0),
      stop(1),
    ),
    // The signature goes with the last part of the thinking, just before its stop.
    events: ['start:0', 'thinking_delta:0', 'stop:0', 'start:1', 'input_json_delta:1', 'stop:1', 'start:2', 'thinking_delta:2', 'signature_delta:2', 'stop:2'],
    content: [{ type: 'thinking', thinking: 'x', signature: '' }, toolUse, { type: 'thinking', thinking: 'y', signature: 'sig' }],
  },
  {
    name: 'thinking whose unsigned stop is all that follows',
    body: answer(
      start(0, { type: 'thinking', thinking: '', signature: '' }),
      delta(0, { type: 'thinking_delta', thinking: 'x' }),
      start(1, TOOL),
      delta(1, { type: 'input_json_delta', partial_json: '{"city":"X"}' }),
      stop(0),
      stop(1),
    ),
    // No empty thinking block after the tool block.
    events: ['start:0', 'thinking_delta:0', 'stop:0', 'start:1', 'input_json_delta:1', 'stop:1'],
    content: [{ type: 'thinking', thinking: 'x', signature: '' }, toolUse],
  },
]

const served = oneModelGateway('anthropic', 'context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true, reasoning: true }')
const request = { model: 'm', max_tokens: 2048, thinking: { type: 'enabled' as const, budget_tokens: 1024 }, messages: [{ role: 'user' as const, content: 'Weather?' }], tools: [weatherTool] }

describe('an Anthropic backend that interleaves a block with a tool_use block: a Messages client gets one block at a time', () => {
  for (const { name, body, events, content } of cases) {
    // The deltas forwarded as the upstream wrote them, and re-encoded (a space the encoder would
    // not write sends every delta through the translator).
    for (const [path, upstream] of [['passed through', body], ['re-encoded', body.replaceAll('"delta":{', '"delta": {')]] as const) {
      test(`${name} (${path})`, async () => {
        served.upstream.enqueue({ kind: 'sse', body: upstream })
        const stream = served.gateway.anthropic.messages.stream(request)
        const seen: string[] = []
        stream.on('streamEvent', frame => {
          if (frame.type === 'content_block_start') seen.push(`start:${frame.index}`)
          else if (frame.type === 'content_block_delta') seen.push(`${frame.delta.type}:${frame.index}`)
          else if (frame.type === 'content_block_stop') seen.push(`stop:${frame.index}`)
          else seen.push(frame.type)
        })
        const final = await stream.finalMessage()
        expect(seen).toEqual(['message_start', ...events, 'message_delta', 'message_stop'])
        expect(final.content).toEqual(content as never)
        expect(final.stop_reason).toBe('tool_use')
      })
    }
  }
})
