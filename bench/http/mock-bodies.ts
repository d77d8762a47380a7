/**
 * The mock upstream's answers (mock-upstream.ts serves them; in-process.ts answers fetch with
 * them): a chat.completion of `chunks` words, or the same turn as SSE frames (a role chunk,
 * `chunks` content chunks, the finish chunk, the usage chunk and `[DONE]`).
 */
export function mockBodies(chunks = 20): { completion: string; frames: string[] } {
  const usage = { prompt_tokens: 12, completion_tokens: chunks, total_tokens: 12 + chunks }
  // Key order as OpenAI sends it (id, object, created, model): the bench's bytes stay as before.
  const head = (object: string) => ({ id: 'chatcmpl-bench', object, created: 1_700_000_000, model: 'bench-upstream' })
  const completion = JSON.stringify({
    ...head('chat.completion'),
    choices: [{ index: 0, message: { role: 'assistant', content: 'word '.repeat(chunks).trim() }, finish_reason: 'stop' }],
    usage,
  })
  const frame = (choices: object[], extra: object = {}) => `data: ${JSON.stringify({ ...head('chat.completion.chunk'), choices, ...extra })}\n\n`
  const frames = [
    frame([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
    ...Array.from({ length: chunks }, (_, i) => frame([{ index: 0, delta: { content: i === 0 ? 'word' : ' word' }, finish_reason: null }])),
    frame([{ index: 0, delta: {}, finish_reason: 'stop' }]),
    frame([], { usage }),
    'data: [DONE]\n\n',
  ]
  return { completion, frames }
}

/**
 * The same turn as an Anthropic Messages stream (in-process.ts --messages, mock-upstream.ts):
 * message_start, a text block of `chunks` text deltas with a ping inside, message_delta with the
 * usage, message_stop.
 */
export function anthropicFrames(chunks = 20): string[] {
  const event = (type: string, data: object) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  const usage = { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }
  return [
    event('message_start', { message: { id: 'msg_bench', type: 'message', role: 'assistant', model: 'bench-upstream', content: [], stop_reason: null, stop_sequence: null, usage } }),
    event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
    event('ping', {}),
    ...Array.from({ length: chunks }, (_, i) => event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: i === 0 ? 'word' : ' word' } })),
    event('content_block_stop', { index: 0 }),
    event('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: chunks } }),
    event('message_stop', {}),
  ]
}

/** The same turn as one Anthropic Messages JSON answer (a collected call's, `stream: false`). */
export function anthropicMessage(chunks = 20): string {
  return JSON.stringify({
    id: 'msg_bench',
    type: 'message',
    role: 'assistant',
    model: 'bench-upstream',
    content: [{ type: 'text', text: 'word '.repeat(chunks).trim() }],
    stop_reason: 'end_turn',
    stop_sequence: null,
    usage: { input_tokens: 12, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: chunks },
  })
}
