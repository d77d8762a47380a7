import { describe, expect, test } from 'bun:test'
import type Anthropic from '@anthropic-ai/sdk'
import type { TurnScript } from '../providers/conformance'
import { ADAPTIVE_ONLY_MODEL as ADAPTIVE_ONLY, BUDGET_ONLY_MODEL as BUDGET_ONLY, claudeModelLine, strictUpstreamsSuite } from '../support/strict-anthropic'

// The catalog's per-binding `thinking` form, end to end: clients of all three dialects (official
// SDKs) → gateway → an Anthropic upstream that, like the real API, refuses budget thinking on an
// adaptive-only model (Opus 4.7) and adaptive thinking on a model before 4.6 (Sonnet 4.5). What
// the upstream received is asserted, and that the client got its answer.

const turn: TurnScript = { reasoning: { text: 'Add them.', signature: 'sig-1' }, text: 'Four.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 10 } }

describe('thinking form per Anthropic binding: effort, budget and adaptive requests from every dialect', () => {
  const model = (id: string, backends: string) => claudeModelLine(id, backends, { maxOutputTokens: 64000, reasoning: true })
  const s = strictUpstreamsSuite(turn, [
    model('new', `[{ provider: claude, model: ${ADAPTIVE_ONLY}, thinking: adaptive }]`),
    model('old', `[{ provider: claude, model: ${BUDGET_ONLY}, thinking: budget }]`),
    // Ordered fallback from an adaptive-only binding to a budget-only one: each call in its own form.
    model('mixed', `[{ provider: claude, model: ${ADAPTIVE_ONLY}, thinking: adaptive }, { provider: claude, model: ${BUDGET_ONLY}, thinking: budget }]`),
  ])

  /** The thinking fields of the one call the upstream received. */
  const sent = () => {
    expect(s.claude.received).toHaveLength(1)
    const { model, thinking, output_config, temperature } = s.claude.received[0]!.body
    return { model, thinking, output_config, temperature }
  }

  /** An effort alone, in each dialect's own field, for a model id; resolves to the answer's text. */
  const effortOnly: Record<string, (model: string, effort: 'low' | 'medium' | 'high') => Promise<string | null | undefined>> = {
    'Chat Completions reasoning_effort': async (model, effort) =>
      (await s.openai.chat.completions.create({ model, messages: [{ role: 'user', content: '2+2?' }], reasoning_effort: effort, temperature: 0.2 })).choices[0]!.message.content,
    'Responses reasoning.effort': async (model, effort) => (await s.openai.responses.create({ model, input: '2+2?', reasoning: { effort }, temperature: 0.2 })).output_text,
    'Messages output_config.effort': async (model, effort) => {
      const message = await s.anthropic.messages.create({ model, max_tokens: 20000, output_config: { effort }, messages: [{ role: 'user', content: '2+2?' }] })
      return message.content.find(block => block.type === 'text')?.text
    },
  }

  for (const [dialect, ask] of Object.entries(effortOnly)) {
    test(`${dialect}: adaptive thinking with the effort on an adaptive binding, a budget on a budget one`, async () => {
      expect(await ask('new', 'medium')).toBe('Four.')
      expect(sent()).toEqual({ model: ADAPTIVE_ONLY, thinking: { type: 'adaptive' }, output_config: { effort: 'medium' }, temperature: undefined })
      s.claude.received.length = 0
      expect(await ask('old', 'medium')).toBe('Four.')
      expect(sent()).toEqual({ model: BUDGET_ONLY, thinking: { type: 'enabled', budget_tokens: 8192 }, output_config: undefined, temperature: undefined })
    })
  }

  test("Messages: a client's budget on an adaptive binding becomes adaptive at the effort it reads as (its own effort wins), streamed too", async () => {
    const ask = (params: Partial<Anthropic.MessageCreateParamsNonStreaming>) =>
      s.anthropic.messages.stream({ model: 'new', max_tokens: 16000, messages: [{ role: 'user', content: '2+2?' }], ...params }).finalMessage()
    const final = await ask({ thinking: { type: 'enabled', budget_tokens: 3000 } })
    expect(final.content).toMatchObject([{ type: 'thinking', thinking: 'Add them.', signature: 'sig-1' }, { type: 'text', text: 'Four.' }])
    expect(sent()).toMatchObject({ thinking: { type: 'adaptive' }, output_config: { effort: 'medium' } })
    s.claude.received.length = 0
    await ask({ thinking: { type: 'enabled', budget_tokens: 1024 } })
    expect(sent()).toMatchObject({ thinking: { type: 'adaptive' }, output_config: { effort: 'low' } })
    s.claude.received.length = 0
    await ask({ thinking: { type: 'enabled', budget_tokens: 12000, display: 'summarized' }, output_config: { effort: 'low' } })
    expect(sent()).toMatchObject({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort: 'low' } })
  })

  test("Messages: a client's adaptive thinking on a budget binding becomes a budget from its effort (default high), capped at half of max_tokens", async () => {
    // Streamed: the SDK refuses a non-streamed call with max_tokens this large.
    const ask = (params: Partial<Anthropic.MessageCreateParamsNonStreaming>) =>
      s.anthropic.messages.stream({ model: 'old', max_tokens: 64000, messages: [{ role: 'user', content: '2+2?' }], ...params }).finalMessage()
    expect((await ask({ thinking: { type: 'adaptive' } })).content.at(-1)).toMatchObject({ type: 'text', text: 'Four.' })
    expect(sent()).toEqual({ model: BUDGET_ONLY, thinking: { type: 'enabled', budget_tokens: 24576 }, output_config: undefined, temperature: undefined })
    s.claude.received.length = 0
    await ask({ thinking: { type: 'adaptive' }, output_config: { effort: 'low' } })
    expect(sent()).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 2048 }, output_config: undefined })
    s.claude.received.length = 0
    await ask({ thinking: { type: 'adaptive' }, max_tokens: 10000 })
    expect(sent()).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 5000 } })
    // No budget fits under Anthropic's floor of 1024: answered without thinking rather than refused.
    s.claude.received.length = 0
    await ask({ thinking: { type: 'adaptive' }, max_tokens: 1000 })
    expect(sent()).toMatchObject({ thinking: undefined, output_config: undefined })
  })

  test('a history ending with reasoning, thinking on: the thinking it ends with is not sent (Anthropic refuses a final thinking block), from Responses and Messages', async () => {
    // Before, it went as the final block of a final assistant turn, and Anthropic answered 400.
    const response = await s.openai.responses.create({
      model: 'old',
      input: [
        { role: 'user', content: '2+2?' },
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Add them.' }], encrypted_content: 'sig-1' },
      ],
      reasoning: { effort: 'low' },
    })
    expect(response.output_text).toBe('Four.')
    const thinking = { type: 'thinking' as const, thinking: 'Add them.', signature: 'sig-1' }
    const message = await s.anthropic.messages.create({
      model: 'old',
      max_tokens: 20000,
      thinking: { type: 'enabled', budget_tokens: 2000 },
      messages: [{ role: 'user', content: '2+2?' }, { role: 'assistant', content: [thinking, { type: 'text', text: 'It is' }, { ...thinking, signature: 'sig-2' }] }],
    })
    expect(message.content.at(-1)).toMatchObject({ type: 'text', text: 'Four.' })
    // A turn of thinking alone is left out, as an empty assistant turn is; a turn with more keeps its other blocks.
    expect(s.claude.received.map(({ body }) => [body.thinking.type, body.messages.at(-1)])).toEqual([
      ['enabled', { role: 'user', content: [{ type: 'text', text: '2+2?' }] }],
      ['enabled', { role: 'assistant', content: [thinking, { type: 'text', text: 'It is' }] }],
    ])
  })

  test('count_tokens sends the form the binding takes', async () => {
    const counted = await s.anthropic.messages.countTokens({ model: 'new', thinking: { type: 'enabled', budget_tokens: 20000 }, messages: [{ role: 'user', content: '2+2?' }] })
    expect(counted.input_tokens).toBe(42)
    expect(s.claude.received[0]!.path).toBe('/v1/messages/count_tokens')
    expect(sent()).toMatchObject({ thinking: { type: 'adaptive' }, output_config: { effort: 'high' } })
  })

  test('fallback between bindings of different forms: each upstream call in its own form', async () => {
    s.claude.overloadNext()
    const completion = await s.openai.chat.completions.create({ model: 'mixed', messages: [{ role: 'user', content: '2+2?' }], reasoning_effort: 'high' })
    expect(completion.choices[0]!.message.content).toBe('Four.')
    expect(s.claude.received.map(({ body }) => [body.model, body.thinking, body.output_config])).toEqual([
      [ADAPTIVE_ONLY, { type: 'adaptive' }, { effort: 'high' }],
      [BUDGET_ONLY, { type: 'enabled', budget_tokens: 24576 }, undefined],
    ])
  })
})
