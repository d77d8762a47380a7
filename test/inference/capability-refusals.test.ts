import { afterAll, beforeAll, expect, test } from 'bun:test'
import { loadConfig } from '../../src/config/load'
import { buildTestApp, json, type TestApp } from '../support/harness'

// A model without a capability refuses what needs it, naming the field as the client's format
// does: an image by the part that carries it (before: "messages", renamed "input" on Responses,
// whatever the conversation's length), reasoning controls by the dialect's own field.

let t: TestApp
let key: string
beforeAll(async () => {
  t = await buildTestApp()
  key = (await t.createOrg('images', 1_000_000_000n)).adminKey
})
afterAll(() => t.close())

const PNG = 'data:image/png;base64,iVBORw0KGgo='

test.each([
  ['/v1/chat/completions', { messages: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'yes' }, { role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image_url', image_url: { url: PNG } }] }] }, 'messages.2.content.1.image_url.url'],
  ['/v1/responses', { input: [{ role: 'user', content: [{ type: 'input_text', text: 'x' }, { type: 'input_image', image_url: 'https://example.com/a.png', detail: 'auto' }] }] }, 'input.0.content.1.image_url'],
  ['/v1/messages', { max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'text', text: 'x' }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }] }, 'messages.0.content.1'],
])('%s names the image part', async (path, body, param) => {
  const response = await t.request('POST', path, { key, body: { model: 'demo-anonymous', ...body } })
  expect(response.status).toBe(400)
  const { error } = await json(response)
  expect(error.message).toContain('model demo-anonymous does not accept images')
  // Messages' envelope carries no param: the message names the part.
  if (path === '/v1/messages') expect(error.message).toContain(param)
  else expect(error.param).toBe(param)
})

test('a Messages request with thinking on a model without reasoning names thinking, not reasoning_effort', async () => {
  // Regression QA: Anthropic's envelope shows the field in the message, and it read
  // "reasoning_effort: model … does not advertise reasoning controls".
  const env = { SVC_CONFIG: '/virtual/plain.yaml' }
  const plain = await buildTestApp(env, loadConfig(env, () => `
providers: [{ id: demo, type: demo, retention: none }]
models: [{ id: plain, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 32768, max_output_tokens: 4096 }]
plans: { payg: { monthly_allowance: "0", fusion: false } }
`))
  try {
    const { adminKey } = await plain.createOrg('plain', 1_000_000_000n)
    for (const thinking of [{ type: 'adaptive' }, { type: 'enabled', budget_tokens: 2000 }]) {
      const response = await plain.request('POST', '/v1/messages', { key: adminKey, body: { model: 'plain', max_tokens: 4000, thinking, messages: [{ role: 'user', content: 'x' }] } })
      expect(response.status).toBe(400)
      expect((await json(response)).error.message).toBe('thinking: model plain does not advertise reasoning controls')
    }
    // An effort alone is named as sent (regression QA: it read "thinking").
    const effort = await plain.request('POST', '/v1/messages', { key: adminKey, body: { model: 'plain', max_tokens: 50, output_config: { effort: 'high' }, messages: [{ role: 'user', content: 'x' }] } })
    expect((await json(effort)).error.message).toBe('output_config.effort: model plain does not advertise reasoning controls')
  } finally {
    await plain.close()
  }
})
