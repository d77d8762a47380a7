import { describe, expect, test } from 'bun:test'
import type { ThinkingForm } from '../../src/catalog/types'
import { decodeResponses } from '../../src/inference/dialects/responses/decode'
import type { ResponsesRequest } from '../../src/inference/dialects/responses/schema'
import { THINKING_BUDGET_BY_EFFORT } from '../../src/providers/anthropic/thinking-budget'
import { toUpstream as anthropicBody } from '../../src/providers/anthropic/to-upstream'
import { toUpstream as chatCompletionsBody } from '../../src/providers/openai-compatible/to-upstream'
import { events, ROUTE, seen, setup, textReply } from './scripted-app'

// reasoning.summary (and its deprecated alias generate_summary) asks for the reasoning text. QA:
// it was ignored, so Claude Opus 4.7+ on an adaptive binding, which omits the thinking text unless
// sent display: "summarized", returned reasoning items with summary: []; and a summary without
// an effort turned reasoning off, where OpenAI reasons at the model's default and summarises.

const decode = (reasoning: Record<string, unknown>, route = ROUTE) =>
  decodeResponses({ model: 'scripted', input: 'hi', reasoning } as ResponsesRequest, route)
const claude = (reasoning: Record<string, unknown>, form: ThinkingForm | undefined) => {
  // Room for a budget: the scripted route's own maximum (1024) is at Anthropic's floor.
  const { thinking, output_config } = anthropicBody({ ...decode(reasoning), sampling: { maxOutputTokens: 8192 } }, 'claude-upstream', form)
  return { thinking, output_config }
}

describe('reasoning.summary → an Anthropic backend', () => {
  test('with an effort: display "summarized" in the binding\'s form', () => {
    expect(claude({ effort: 'high', summary: 'detailed' }, 'adaptive')).toEqual({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort: 'high' } })
    expect(claude({ effort: 'low', summary: 'concise' }, 'budget')).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.low, display: 'summarized' }, output_config: undefined })
    // The deprecated name is read as summary.
    expect(claude({ effort: 'high', generate_summary: 'auto' }, 'adaptive').thinking).toEqual({ type: 'adaptive', display: 'summarized' })
  })

  test('alone: reasoning at the backend\'s default, summarised (an unset form reads it as an effort alone: a budget)', () => {
    expect(decode({ summary: 'auto' }).reasoning).toEqual({ summarized: true })
    expect(claude({ summary: 'auto' }, 'adaptive')).toEqual({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: undefined })
    // Anthropic's default effort (high), capped at half of max_tokens.
    expect(claude({ summary: 'auto' }, 'budget')).toEqual({ thinking: { type: 'enabled', budget_tokens: 4096, display: 'summarized' }, output_config: undefined })
    expect(claude({ summary: 'auto' }, undefined)).toEqual({ thinking: { type: 'enabled', budget_tokens: 4096, display: 'summarized' }, output_config: undefined })
    const roomy = anthropicBody({ ...decode({ summary: 'detailed' }), sampling: { maxOutputTokens: 64_000 } }, 'claude-upstream', 'budget')
    expect(roomy.thinking).toEqual({ type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.high, display: 'summarized' })
  })

  test('null (either name) asks for nothing', () => {
    expect(decode({ summary: null }).reasoning).toBeUndefined()
    expect(decode({ summary: null, generate_summary: null }).reasoning).toBeUndefined()
    expect(decode({ effort: 'medium', summary: null }).reasoning).toEqual({ effort: 'medium' })
  })
})

test('an OpenAI-compatible backend is sent nothing new: the effort as reasoning_effort, or none', () => {
  const body = (reasoning: Record<string, unknown>) => chatCompletionsBody(decode(reasoning), 'gpt-upstream') as unknown as Record<string, unknown>
  const alone = body({ summary: 'auto' })
  expect(alone.reasoning_effort).toBeUndefined()
  expect(JSON.stringify(alone)).not.toContain('summar')
  const withEffort = body({ effort: 'medium', summary: 'detailed' })
  expect(withEffort.reasoning_effort).toBe('medium')
  expect(JSON.stringify(withEffort)).not.toContain('summar')
})

test('a model without reasoning takes a summary alone and reasons not (OpenAI accepts it there); an effort stays a 400', async () => {
  const { post } = await setup(() => events([...textReply]), { capabilities: { reasoning: false } })
  const summarised = await post({ model: 'scripted', input: 'hi', reasoning: { summary: 'detailed' } })
  expect(summarised.status).toBe(200)
  expect(seen.map(request => request.reasoning)).toEqual([undefined])
  const effort = await post({ model: 'scripted', input: 'hi', reasoning: { effort: 'high', summary: 'detailed' } })
  expect([effort.status, ((await effort.json()) as { error: { param: string } }).error.param]).toEqual([400, 'reasoning.effort'])
})
