import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import type { TurnScript } from '../providers/conformance'
import { ADAPTIVE_ONLY_MODEL as ADAPTIVE_ONLY, BUDGET_ONLY_MODEL as BUDGET_ONLY, claudeModelLine, strictUpstreamsSuite } from '../support/strict-anthropic'

// The efforts above high (`xhigh`, `max`), from every client dialect (official SDKs): sent as
// written to an Anthropic binding with adaptive thinking, the models that take them; the top of
// what the backend takes elsewhere: the high budget on a budget binding, reasoning_effort high on
// an OpenAI-compatible one. Both upstreams are real servers on port 0 recording what they got.

const turn: TurnScript = { reasoning: { text: 'Add them.', signature: 'sig-1' }, text: 'Four.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 10 } }

type Top = 'xhigh' | 'max'

describe('reasoning efforts xhigh and max from every dialect to every backend kind', () => {
  const model = (id: string, backends: string) => claudeModelLine(id, backends, { maxOutputTokens: 64000, reasoning: true })
  const s = strictUpstreamsSuite(turn, [
    model('new', `[{ provider: claude, model: ${ADAPTIVE_ONLY}, thinking: adaptive }]`),
    model('old', `[{ provider: claude, model: ${BUDGET_ONLY}, thinking: budget }]`),
    model('gpt', '[{ provider: oai, model: gpt-5 }]'),
  ], { compatible: true })

  /** The thinking fields of the one call the Anthropic upstream received. */
  const claudeSent = () => {
    expect(s.claude.received).toHaveLength(1)
    const { model, thinking, output_config } = s.claude.received[0]!.body
    return { model, thinking, output_config }
  }

  /** An effort in each dialect's own field; resolves to the answer's text. */
  const ask: Record<string, (model: string, effort: Top) => Promise<string | null | undefined>> = {
    'Chat Completions reasoning_effort': async (model, effort) =>
      (await s.openai.chat.completions.create({ model, messages: [{ role: 'user', content: '2+2?' }], reasoning_effort: effort })).choices[0]!.message.content,
    'Responses reasoning.effort': async (model, effort) => (await s.openai.responses.create({ model, input: '2+2?', reasoning: { effort } })).output_text,
    // Streamed: the SDK refuses a non-streamed call with max_tokens this large.
    'Messages output_config.effort': async (model, effort) => {
      const message = await s.anthropic.messages.stream({ model, max_tokens: 64000, output_config: { effort }, messages: [{ role: 'user', content: '2+2?' }] }).finalMessage()
      return message.content.find(block => block.type === 'text')?.text
    },
  }

  for (const [dialect, call] of Object.entries(ask)) {
    for (const effort of ['xhigh', 'max'] as const) {
      test(`${dialect} ${effort}: as written on an adaptive binding, the high budget on a budget one, high on an OpenAI-compatible one`, async () => {
        expect(await call('new', effort)).toBe('Four.')
        expect(claudeSent()).toEqual({ model: ADAPTIVE_ONLY, thinking: { type: 'adaptive' }, output_config: { effort } })
        s.claude.received.length = 0
        expect(await call('old', effort)).toBe('Four.')
        expect(claudeSent()).toEqual({ model: BUDGET_ONLY, thinking: { type: 'enabled', budget_tokens: 24576 }, output_config: undefined })
        expect(await call('gpt', effort)).toBe('Four.')
        expect(s.compatible.bodies).toHaveLength(1)
        expect(s.compatible.bodies[0].reasoning_effort).toBe('high')
      })
    }
  }

  test('Messages: adaptive thinking at max as written on an adaptive binding; a budget with xhigh on a budget binding sends effort high', async () => {
    await s.anthropic.messages.create({ model: 'new', max_tokens: 4000, thinking: { type: 'adaptive' }, output_config: { effort: 'max' }, messages: [{ role: 'user', content: '2+2?' }] })
    expect(claudeSent()).toEqual({ model: ADAPTIVE_ONLY, thinking: { type: 'adaptive' }, output_config: { effort: 'max' } })
    s.claude.received.length = 0
    await s.anthropic.messages.create({ model: 'old', max_tokens: 4000, thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'xhigh' }, messages: [{ role: 'user', content: '2+2?' }] })
    expect(claudeSent()).toEqual({ model: BUDGET_ONLY, thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'high' } })
  })

  test('count_tokens carries xhigh to an adaptive binding', async () => {
    const counted = await s.anthropic.messages.countTokens({ model: 'new', output_config: { effort: 'xhigh' }, messages: [{ role: 'user', content: '2+2?' }] })
    expect(counted.input_tokens).toBe(42)
    expect(claudeSent()).toMatchObject({ thinking: { type: 'adaptive' }, output_config: { effort: 'xhigh' } })
  })

  test('"none" (reasoning off) has no carrier: a 400 naming the field in both OpenAI dialects, no upstream call', async () => {
    const chat = await s.openai.chat.completions.create({ model: 'gpt', messages: [{ role: 'user', content: '2+2?' }], reasoning_effort: 'none' }).catch((error: unknown) => error)
    expect(chat).toBeInstanceOf(OpenAI.BadRequestError)
    expect((chat as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('reasoning_effort')
    const responses = await s.openai.responses.create({ model: 'gpt', input: '2+2?', reasoning: { effort: 'none' } }).catch((error: unknown) => error)
    expect(responses).toBeInstanceOf(OpenAI.BadRequestError)
    expect((responses as InstanceType<typeof OpenAI.BadRequestError>).param).toBe('reasoning.effort')
    expect((responses as InstanceType<typeof OpenAI.BadRequestError>).message).toContain('omit reasoning.effort')
    expect(s.compatible.bodies).toHaveLength(0)
  })
})
