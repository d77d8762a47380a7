import { describe, expect, test } from 'bun:test'
import { anthropicWire } from '../providers/anthropic-wire'
import type { TurnScript } from '../providers/conformance'
import { toolCallGateway } from './upstream-fixtures'

// An Anthropic backend that stops because the model's context window ran out
// (model_context_window_exceeded), as every client gets it: Messages clients that stop reason
// (a larger max_tokens would not help, where max_tokens says it would), the OpenAI formats their
// one length stop. Before, Messages clients got max_tokens.

const served = toolCallGateway()
const turn: TurnScript = { text: 'The summary so f', finish: 'length', usage: { inputTokens: 16000, outputTokens: 4 } }
const CONTEXT_STOP = 'model_context_window_exceeded'
const stream = () => ({ kind: 'sse' as const, body: anthropicWire.stream(turn).replace('"stop_reason":"max_tokens"', `"stop_reason":"${CONTEXT_STOP}"`) })
const json = () => ({ kind: 'json' as const, body: { ...(anthropicWire.json(turn) as object), stop_reason: CONTEXT_STOP } })

describe('an Anthropic backend stops at the context window', () => {
  const messages = [{ role: 'user' as const, content: 'Summarize.' }]

  test('Messages, streamed and not: stop_reason model_context_window_exceeded', async () => {
    served.anthropic.enqueue(stream())
    const streamed = await served.gateway.anthropic.messages.stream({ model: 'an', max_tokens: 100, messages }).finalMessage()
    expect(streamed.stop_reason).toBe(CONTEXT_STOP)
    expect(streamed.content).toMatchObject([{ type: 'text', text: turn.text! }])
    served.anthropic.enqueue(json())
    const created = await served.gateway.anthropic.messages.create({ model: 'an', max_tokens: 100, messages })
    expect([created.stop_reason, created.stop_sequence]).toEqual([CONTEXT_STOP, null])
  })

  test('Chat Completions and Responses: their length stop, as before', async () => {
    served.anthropic.enqueue(stream())
    const chat = await served.gateway.openai.chat.completions.stream({ model: 'an', messages }).finalChatCompletion()
    expect(chat.choices[0]!.finish_reason).toBe('length')
    served.anthropic.enqueue(json())
    const response = await served.gateway.openai.responses.create({ model: 'an', input: 'Summarize.' })
    expect([response.status, response.incomplete_details]).toEqual(['incomplete', { reason: 'max_output_tokens' }])
  })
})
