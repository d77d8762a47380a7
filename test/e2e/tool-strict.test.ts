import { afterAll, beforeAll, beforeEach, describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import type { TurnScript } from '../providers/conformance'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { type TestApp } from '../support/harness'
import { recordingCompatible, strictAnthropic, strictAnthropicProvider } from '../support/strict-anthropic'

// Strict tool use (the tool's input is guaranteed to follow its schema), end to end: a Messages
// tool's `strict`, a Chat Completions or Responses function's `strict`, each sent by the official
// SDK, reaches an Anthropic upstream as the tool's `strict` and an OpenAI-compatible one as
// `function.strict`. Both upstreams are real servers on port 0 recording what they received.

const UPSTREAM_KEY = 'sk-upstream-0123456789'
const turn: TurnScript = { text: 'Sunny.', finish: 'stop', usage: { inputTokens: 20, outputTokens: 3 } }
const SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'], additionalProperties: false }

describe('strict tool use from every dialect to both backend kinds', () => {
  let claude: ReturnType<typeof strictAnthropic>
  let compatible: ReturnType<typeof recordingCompatible>
  let t: TestApp
  let openai: OpenAI
  let anthropic: Anthropic

  beforeAll(async () => {
    claude = strictAnthropic(turn)
    compatible = recordingCompatible(turn)
    const model = (id: string, backends: string) =>
      `  - { id: ${id}, backends: ${backends}, price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 200000, max_output_tokens: 8192, capabilities: { tools: true } }`
    ;({ t, openai, anthropic } = await startServedGateway(paygConfig(
      [strictAnthropicProvider(claude.url), upstreamProvider('oai', 'openai-compatible', compatible.url, 'UPSTREAM_KEY')],
      [model('claude', '[{ provider: claude, model: claude-sonnet-4-5 }]'), model('gpt', '[{ provider: oai, model: gpt-5 }]')],
    ), { UPSTREAM_KEY }))
  })

  afterAll(async () => {
    claude.stop()
    compatible.stop()
    await t.close()
  })

  beforeEach(() => {
    claude.received.length = 0
    compatible.bodies.length = 0
  })

  /** The tools of the one call the backend of `model` received. */
  const toolsSent = (model: 'claude' | 'gpt') => {
    const bodies = model === 'claude' ? claude.received.map(({ body }) => body) : compatible.bodies
    expect(bodies).toHaveLength(1)
    return bodies[0].tools
  }

  const ask: Record<string, (model: string, strict: boolean) => Promise<string | null | undefined>> = {
    'Messages tools[].strict': async (model, strict) => {
      const message = await anthropic.messages.create({
        model, max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }],
        tools: [{ name: 'get_weather', description: 'Weather in a city', input_schema: SCHEMA as Anthropic.Tool.InputSchema, strict }],
      })
      return message.content.find(block => block.type === 'text')?.text
    },
    'Chat Completions function.strict': async (model, strict) =>
      (await openai.chat.completions.create({
        model, messages: [{ role: 'user', content: 'Weather?' }],
        tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict } }],
      })).choices[0]!.message.content,
    'Responses function strict': async (model, strict) =>
      (await openai.responses.create({ model, input: 'Weather?', tools: [{ type: 'function', name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict }] })).output_text,
  }

  for (const [dialect, call] of Object.entries(ask)) {
    test(`${dialect}: an Anthropic backend gets strict, an OpenAI-compatible one function.strict`, async () => {
      expect(await call('claude', true)).toBe('Sunny.')
      expect(toolsSent('claude')).toEqual([{ name: 'get_weather', description: 'Weather in a city', input_schema: SCHEMA, strict: true }])
      expect(await call('gpt', true)).toBe('Sunny.')
      expect(toolsSent('gpt')).toEqual([{ type: 'function', function: { name: 'get_weather', description: 'Weather in a city', parameters: SCHEMA, strict: true } }])
      // `false` is carried too: the client said so.
      claude.received.length = 0
      await call('claude', false)
      expect(toolsSent('claude')[0].strict).toBe(false)
    })
  }

  test('Messages: a tool without strict is sent without it', async () => {
    await anthropic.messages.create({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }], tools: [{ name: 'get_weather', input_schema: SCHEMA as Anthropic.Tool.InputSchema }] })
    expect('strict' in toolsSent('claude')[0]).toBe(false)
  })

  test('Messages: a non-boolean strict is a 400 naming the field', async () => {
    const refused = await anthropic.messages
      .create({ model: 'claude', max_tokens: 100, messages: [{ role: 'user', content: 'Weather?' }], tools: [{ name: 'get_weather', input_schema: SCHEMA as Anthropic.Tool.InputSchema, strict: 'yes' as unknown as boolean }] })
      .catch((error: unknown) => error)
    expect(refused).toBeInstanceOf(Anthropic.BadRequestError)
    expect((refused as InstanceType<typeof Anthropic.BadRequestError>).message).toContain('strict')
    expect(claude.received).toHaveLength(0)
  })
})
