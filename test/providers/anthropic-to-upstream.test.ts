import { describe, expect, test } from 'bun:test'
import type { ChatRequest } from '../../src/inference/canonical'
import { toUpstream, UnsupportedRequestError } from '../../src/providers/anthropic/to-upstream'
import { chat, weatherTool } from '../support/anthropic-to-upstream'
import { CLAUDE_MODEL as MODEL } from './anthropic-wire'

// The Anthropic request body built from a canonical request: sampling, images and tool choice.
// Conversation history is in anthropic-to-upstream-history.test.ts, the thinking budget in
// anthropic-to-upstream-thinking.test.ts.

describe('anthropic toUpstream: exact bodies', () => {
  test('json_schema is Anthropic structured output (output_config.format, the description kept in the schema); json_object has no equivalent: refused, never dropped', () => {
    expect(() => toUpstream(chat({ responseFormat: { type: 'json_object' } }), MODEL)).toThrow(/json_object response formats \(response_format\) are not available/)
    const schema = { type: 'object', properties: { a: { type: 'string' } }, required: ['a'], additionalProperties: false }
    expect(toUpstream(chat({ responseFormat: { type: 'json_schema', name: 'x', schema, strict: false } }), MODEL).output_config).toEqual({ format: { type: 'json_schema', schema } })
    const described = toUpstream(chat({ responseFormat: { type: 'json_schema', name: 'x', schema, description: 'One letter' } }), MODEL).output_config
    expect(described).toEqual({ format: { type: 'json_schema', schema: { ...schema, description: 'One letter' } } })
    expect(toUpstream(chat({ responseFormat: { type: 'text' } }), MODEL).output_config).toBeUndefined()
  })

  test('plain chat: systems joined and hoisted, sampling mapped, user/seed/format never sent, always streamed', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'system', parts: [{ type: 'text', text: 'You are terse.' }] },
          { role: 'user', parts: [{ type: 'text', text: 'Hello' }, { type: 'text', text: '' }] },
          { role: 'assistant', parts: [{ type: 'text', text: 'Hi.' }] },
          { role: 'system', parts: [{ type: 'text', text: 'Answer in French.' }] },
          { role: 'user', parts: [{ type: 'text', text: 'How are you?' }] },
        ],
        sampling: { temperature: 0.2, topP: 0.9, maxOutputTokens: 300, stop: ['END'], seed: 7 },
        user: 'end-user-42',
        responseFormat: { type: 'text' },
        hosted: { webSearch: true, webFetch: true },
      }),
      MODEL,
    )
    expect(body).toEqual({
      model: MODEL,
      max_tokens: 300,
      system: 'You are terse.\n\nAnswer in French.',
      messages: [
        { role: 'user', content: [{ type: 'text', text: 'Hello' }] },
        { role: 'assistant', content: [{ type: 'text', text: 'Hi.' }] },
        { role: 'user', content: [{ type: 'text', text: 'How are you?' }] },
      ],
      // temperature and top_p together are a 400 on current models: temperature wins.
      temperature: 0.2,
      stop_sequences: ['END'],
      stream: true,
    })
    expect(JSON.stringify(body)).not.toContain('end-user-42')
  })

  test('max_tokens falls back to the route; top_p alone is sent', () => {
    const body = toUpstream(chat({ sampling: { topP: 0.5 } }), MODEL)
    expect(body).toEqual({ model: MODEL, max_tokens: 8192, messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], top_p: 0.5, stream: true })
  })

  test("a temperature above Anthropic's 1 (an OpenAI client may send up to 2) is refused before the call; 1 is sent", () => {
    expect(() => toUpstream(chat({ sampling: { temperature: 1.5 } }), MODEL)).toThrow(/temperature 1.5 is above 1/)
    expect(toUpstream(chat({ sampling: { temperature: 1 } }), MODEL).temperature).toBe(1)
    // With thinking on a temperature is not sent, but one above 1 is still refused, not dropped.
    expect(() => toUpstream(chat({ sampling: { temperature: 1.5, maxOutputTokens: 4000 }, reasoning: { effort: 'low' } }), MODEL)).toThrow(/temperature 1.5 is above 1/)
  })

  test('images: bytes → base64, https URL → url source, data URL → base64', () => {
    const body = toUpstream(
      chat({
        messages: [
          {
            role: 'user',
            parts: [
              { type: 'text', text: 'Compare' },
              { type: 'image', mediaType: 'image/png', data: new Uint8Array([137, 80, 78, 71]) },
              { type: 'image', mediaType: 'image/jpeg', data: new URL('https://example.com/cat.jpg') },
              { type: 'image', mediaType: 'image/png', data: new URL('data:image/gif;base64,R0lGODlh') },
            ],
          },
        ],
      }),
      MODEL,
    )
    expect(body.messages).toEqual([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'Compare' },
          { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw==' } },
          { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } },
          { type: 'image', source: { type: 'base64', media_type: 'image/gif', data: 'R0lGODlh' } },
        ],
      },
    ])
  })

  test('a percent-encoded data URL decodes to its bytes; malformed encoding is refused', () => {
    const image = (href: string) => toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'image', mediaType: 'image/png', data: new URL(href) }] }] }), MODEL).messages[0]!.content[0]
    expect(image('data:image/png,%89PNG')).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: Buffer.from([0x89, 0x50, 0x4e, 0x47]).toString('base64') } })
    expect(() => image('data:image/png,%zz')).toThrow(UnsupportedRequestError)
  })

  test('an image type Anthropic does not take is refused before the call (another backend may carry it); image/jpg is sent as image/jpeg', () => {
    // QA: image/jpg and image/svg+xml reached Anthropic, whose 400 no other backend of the model retries.
    const image = (mediaType: string, data: Uint8Array | URL) => toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'image', mediaType, data }] }] }), MODEL).messages[0]!.content[0]
    expect(image('image/jpg', new Uint8Array([255, 216]))).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9g=' } })
    expect(image('image/*', new URL('data:image/JPG;base64,/9g='))).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9g=' } })
    for (const [type, data] of [['image/svg+xml', new Uint8Array([60])], ['image/bmp', new Uint8Array([66])], ['image/*', new URL('data:image/heic;base64,AAAA')]] as const) {
      expect(() => image(type, data)).toThrow(/takes only image\/jpeg, image\/png, image\/gif and image\/webp/)
    }
    // A URL source is Anthropic's to fetch and judge.
    expect(image('image/*', new URL('https://example.com/cat.svg'))).toEqual({ type: 'image', source: { type: 'url', url: 'https://example.com/cat.svg' } })
  })

  test('a subarray image sends only its own bytes', () => {
    const backing = new Uint8Array([1, 2, 137, 80, 78, 71, 3])
    const body = toUpstream(chat({ messages: [{ role: 'user', parts: [{ type: 'image', mediaType: 'image/png', data: backing.subarray(2, 6) }] }] }), MODEL)
    expect(body.messages[0]!.content[0]).toEqual({ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw==' } })
  })

})

describe('anthropic toUpstream: tool choice', () => {
  const cases: Array<[string, Partial<ChatRequest>, unknown]> = [
    ['unset', {}, undefined],
    ['auto', { toolChoice: 'auto' }, { type: 'auto' }],
    ['none', { toolChoice: 'none' }, { type: 'none' }],
    ['none ignores parallel=false (Anthropic rejects the flag on none)', { toolChoice: 'none', parallelToolCalls: false }, { type: 'none' }],
    ['required → any', { toolChoice: 'required' }, { type: 'any' }],
    ['{name} → tool', { toolChoice: { name: 'get_weather' } }, { type: 'tool', name: 'get_weather' }],
    ['parallel=false alone → auto without parallel use', { parallelToolCalls: false }, { type: 'auto', disable_parallel_tool_use: true }],
    ['required + parallel=false', { toolChoice: 'required', parallelToolCalls: false }, { type: 'any', disable_parallel_tool_use: true }],
    ['{name} + parallel=false', { toolChoice: { name: 'get_weather' }, parallelToolCalls: false }, { type: 'tool', name: 'get_weather', disable_parallel_tool_use: true }],
    ['parallel=true → nothing to say', { parallelToolCalls: true }, undefined],
  ]
  for (const [name, overrides, expected] of cases) {
    test(name, () => {
      expect(toUpstream(chat({ tools: [weatherTool], ...overrides }), MODEL).tool_choice).toEqual(expected as never)
    })
  }

  test('no tools → neither tools nor tool_choice', () => {
    const body = toUpstream(chat({ toolChoice: 'required', parallelToolCalls: false }), MODEL)
    expect(body.tools).toBeUndefined()
    expect(body.tool_choice).toBeUndefined()
  })
})
