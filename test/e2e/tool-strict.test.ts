import { describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import type { TurnScript } from '../providers/conformance'
import { claudeModelLine, strictUpstreamsSuite } from '../support/strict-anthropic'

// Strict tool use (the tool's input is guaranteed to follow its schema), end to end: a Messages
// tool's `strict`, a Chat Completions or Responses function's `strict`, each sent by the official
// SDK, reaches an Anthropic upstream as the tool's `strict` and an OpenAI-compatible one as
// `function.strict`. Both upstreams are real servers on port 0 recording what they received.

const turn: TurnScript = { text: 'Sunny.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 3 } }
const SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }

describe('strict tool use from every dialect to both backend kinds', () => {
  const s = strictUpstreamsSuite(turn, [
    claudeModelLine('claude', '[{ provider: claude, model: claude-sonnet-4-5 }]'),
    claudeModelLine('gpt', '[{ provider: oai, model: gpt-5 }]'),
  ], { compatible: true })

  /** The tools of the one call the backend of `model` received. */
  const toolsSent = (model: 'claude' | 'gpt') => {
    const bodies = model === 'claude' ? s.claude.received.map(({ body }) => body) : s.compatible.bodies
    expect(bodies).toHaveLength(1)
    return bodies[0].tools
  }

  const ask: Record<string, (model: string, strict: boolean) => Promise<string | null | undefined>> = {
    'Messages tools[].strict': async (model, strict) => {
      const message = await s.anthropic.messages.create({
        model, max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }],
        tools: [{ name: 'get_weather', description: 'Weather in a city', input_schema: SCHEMA as Anthropic.Tool.InputSchema, strict }],
      })
      return message.content.find(block => block.type === 'text')?.text
    },
    'Chat Completions function.strict': async (model, strict) =>
      (await s.openai.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Weather?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict } }],
      })).choices[0]!.message.content,
    'Responses function strict': async (model, strict) =>
      (await s.openai.responses.create({ model, input: 'Weather?', tools: [{ type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict }] })).output_text,
  }

  for (const [dialect, call] of Object.entries(ask)) {
    test(`${dialect}: an Anthropic backend gets strict, an OpenAI-compatible one function.strict`, async () => {
      expect(await call('claude', true)).toBe('Sunny.')
      expect(toolsSent('claude')).toEqual([{ name: 'get_weather', description: 'Weather in a city', input_schema: SCHEMA, strict: true }])
      expect(await call('gpt', true)).toBe('Sunny.')
      expect(toolsSent('gpt')).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict: true } }])
      // `false` is carried too: the client said so.
      s.claude.received.length = 0
      await call('claude', false)
      expect(toolsSent('claude')[0].strict).toBe(false)
    })
  }

  test('Messages: a tool without strict is sent without it', async () => {
    await s.anthropic.messages.create({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }], tools: [{ name: 'get_weather', input_schema: SCHEMA as Anthropic.Tool.InputSchema }] })
    expect('strict' in toolsSent('claude')[0]).toBe(false)
  })

  test('Messages: a non-boolean strict is a 400 naming the field', async () => {
    const refused = await s.anthropic.messages
      .create({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }], tools: [{ name: 'get_weather', input_schema: SCHEMA as Anthropic.Tool.InputSchema, strict: 'yes' as unknown as boolean }] })
      .catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Anthropic.BadRequestError)
    expect((refused as InstanceType<typeof Anthropic.BadRequestError>).message).toContain('strict')
    expect(s.claude.received).toHaveLength(0)
  })
})
