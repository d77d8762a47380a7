import { afterAll, beforeAll, expect, test } from 'bun:test'
import { buildTestApp, json, type TestApp } from '../support/harness'

// A model without the vision capability refuses an image, naming the part that carries it in
// each format (before: "messages", renamed "input" on Responses, whatever the conversation's length).

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
