import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, encryptedChat, generateClientKeys, type Attestation, type E2eeContext } from '../../src/client/tee'
import { json } from '../support/harness'
import { NEAR_V2, PHALA_V2, gatewaysPerFormat } from '../support/tee'

// QA: encryptChatRequest encrypted only string content. A content array (the OpenAI SDK's
// usual shape), function tools, history tool calls, message names and a named tool_choice went
// out in plaintext unless encryptAllFields was set, and the gateway answered 400 after reading
// them. Each is now refused by the library before anything is sent, naming the field; the
// gateway refuses the same field in plaintext, so the two rules agree.

type Json = Record<string, any>
const setups = gatewaysPerFormat([['near2', NEAR_V2], ['phala2', PHALA_V2]] as const)

async function context(name: string): Promise<E2eeContext> {
  const s = setups[name]!
  const attestation: Attestation = await json(await s.t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa', { key: s.key }))
  return contextFor(attestation, generateClientKeys('ecdsa'))
}

const SECRET = 'SECRET'
const base = (): Json => ({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'hello' }, { role: 'assistant', content: 'hi' }, { role: 'user', content: 'again' }] })
const tool = { type: 'function', function: { name: `${SECRET}_lookup`, parameters: { type: 'object' } } }
const call = { id: 'c1', type: 'function', function: { name: `${SECRET}_lookup`, arguments: '{}' } }

// [family, what, the plaintext it adds, options, the library's error]
const CASES: Array<[string, string, (body: Json) => void, { encryptAllFields?: boolean }, string]> = [
  ['near2', 'a content array', b => { b.messages[0].content = [{ type: 'text', text: SECRET }] }, {}, 'messages[0].content cannot be sent: content arrays would travel in plaintext and the gateway refuses them'],
  ['near2', 'content that is an object', b => { b.messages[0].content = { text: SECRET } }, {}, 'messages[0].content cannot be sent: it must be a string'],
  ['near2', 'function tools without all-fields', b => { b.tools = [tool] }, {}, 'tools cannot be sent: it is encrypted only with encryptAllFields'],
  ['near2', 'history tool calls without all-fields', b => { b.messages[1].tool_calls = [call] }, {}, 'messages[1].tool_calls cannot be sent: it is encrypted only with encryptAllFields'],
  ['near2', 'a message name without all-fields', b => { b.messages[0].name = SECRET }, {}, 'messages[0].name cannot be sent: it is encrypted only with encryptAllFields'],
  ['near2', 'a named tool_choice without all-fields', b => { b.tools = []; b.tool_choice = { type: 'function', function: { name: SECRET } } }, {}, 'tool_choice cannot be sent: it is encrypted only with encryptAllFields'],
  ['near2', 'a message key the gateway does not know', b => { b.messages[1].function_call = { name: SECRET, arguments: '{}' } }, {}, 'messages[1].function_call cannot be sent: an Encrypted assistant message does not carry it'],
  ['near2', 'a top-level field the gateway does not know', b => { b.functions = [{ name: SECRET }] }, {}, 'functions cannot be sent: the gateway refuses a field it does not know'],
  ['near2', 'a hosted tool', b => { b.tools = [{ type: 'web_search', query: SECRET }] }, { encryptAllFields: true }, 'tools[0] cannot be sent: only function tools'],
  // QA: a known field can carry content too; the gateway's value rules are applied before sending.
  ['near2', 'a prediction', b => { b.prediction = { type: 'content', content: `${SECRET} draft` } }, {}, 'prediction cannot be sent: the gateway refuses it after reading it in plaintext (prediction is not supported'],
  ['near2', 'audio parameters', b => { b.audio = { voice: SECRET, format: 'wav' } }, {}, 'audio cannot be sent: the gateway refuses it after reading it in plaintext (audio output is not supported'],
  ['near2', 'service_tier the gateway refuses', b => { b.service_tier = SECRET }, {}, 'service_tier cannot be sent: the gateway refuses it after reading it in plaintext (service_tier "SECRET" is not supported'],
  ['near2', 'store: true', b => { b.store = true }, {}, 'store cannot be sent: the gateway refuses it'],
  ['near2', 'uncensored', b => { b.uncensored = SECRET }, {}, 'uncensored cannot be sent: the gateway refuses it'],
  ['near2', 'n above 1', b => { b.n = 2 }, {}, 'n cannot be sent: the gateway refuses it after reading it in plaintext (n must be 1)'],
  ['near2', 'tool_choice "required" without tools', b => { b.tool_choice = 'required' }, {}, 'tool_choice cannot be sent: the gateway refuses it after reading it in plaintext (tool_choice "required" needs at least one function tool)'],
  ['near2', 'a function key the gateway does not know', b => { b.tools = [{ type: 'function', function: { ...tool.function, examples: [SECRET] } }] }, { encryptAllFields: true }, 'tools[0].function.examples cannot be sent: the gateway refuses it'],
  ['near2', 'a strict that is not a boolean', b => { b.tools = [{ type: 'function', function: { ...tool.function, strict: SECRET } }] }, { encryptAllFields: true }, 'tools[0].function.strict cannot be sent: it must be a boolean'],
  ['phala2', 'function tools', b => { b.tools = [tool] }, {}, 'tools cannot be sent: Phala-family backends decrypt only message content'],
  ['phala2', 'a message name', b => { b.messages[0].name = SECRET }, {}, 'messages[0].name cannot be sent: Phala-family backends decrypt only message content'],
  ['phala2', 'history tool calls', b => { b.messages[1].tool_calls = [call] }, {}, 'messages[1].tool_calls cannot be sent: Phala-family backends decrypt only message content'],
  ['phala2', 'all-fields', () => {}, { encryptAllFields: true }, `encryptAllFields cannot be sent: ${PHALA_V2} backends encrypt no tool fields`],
]

describe('encryptChatRequest refuses what would travel in plaintext, before sending', () => {
  for (const [name, what, add, options, message] of CASES) {
    test(`${name}: ${what}`, async () => {
      const ctx = await context(name)
      const plain = base()
      add(plain)
      expect(() => encryptChatRequest(plain, ctx, options)).toThrow(message)
      // What the library sent before: the rest encrypted, this in plaintext. The gateway refuses it.
      const { body, headers } = encryptChatRequest(base(), ctx, name === 'near2' ? options : {})
      add(body)
      if (name === 'phala2' && options.encryptAllFields) headers['svc-encrypted-encrypt-all-fields'] = '1'
      const s = setups[name]!
      const seen = s.t.sims[name]!.state.seen.length
      const response = await s.t.request('POST', '/v1/chat/completions', { key: s.key, body, headers })
      expect(response.status).toBe(400)
      expect(s.t.sims[name]!.state.seen.length).toBe(seen)
    })
  }

  test('near2: with all-fields every one of them goes as ciphertext, and the backend reads it', async () => {
    const ctx = await context('near2')
    const plain = base()
    plain.messages[0].name = 'alice'
    plain.messages[1] = { role: 'assistant', content: null, tool_calls: [call] }
    plain.messages.splice(2, 0, { role: 'tool', tool_call_id: 'c1', content: `${SECRET} result` })
    plain.tools = [tool]
    plain.tool_choice = { type: 'function', function: { name: tool.function.name } }
    const { body, headers } = encryptChatRequest(plain, ctx, { encryptAllFields: true })
    const s = setups.near2!
    expect((await s.t.request('POST', '/v1/chat/completions', { key: s.key, body, headers })).status).toBe(200)
    const seen = s.t.sims.near2!.state.seen.at(-1)!
    expect(seen.rawBody).not.toContain(SECRET)
    expect(seen.rawBody).not.toContain('alice')
    expect(seen.plain.messages[1].tool_calls[0].function).toEqual(call.function)
    expect(seen.plain.messages[0].name).toBe('alice')
  })
})

test("near2: a function's strict goes as its plaintext boolean, and the backend reads it (before: dropped)", async () => {
  const ctx = await context('near2')
  const plain = base()
  plain.tools = [{ type: 'function', function: { ...tool.function, strict: true } }, { type: 'function', function: { name: 'other', strict: false } }]
  const { body, headers } = encryptChatRequest(plain, ctx, { encryptAllFields: true })
  expect(body.tools.map((entry: Json) => entry.function.strict)).toEqual([true, false])
  const s = setups.near2!
  expect((await s.t.request('POST', '/v1/chat/completions', { key: s.key, body, headers })).status).toBe(200)
  const seen = s.t.sims.near2!.state.seen.at(-1)!
  expect(seen.rawBody).not.toContain(SECRET)
  expect(seen.plain.tools.map((entry: Json) => entry.function.strict)).toEqual([true, false])
})

describe('encryptedChat', () => {
  test('a content array is refused before the chat is sent: only the attestation went out', async () => {
    const s = setups.near2!
    const asked: string[] = []
    const counting: typeof fetch = (async (url: string, init?: RequestInit) => {
      asked.push(new URL(url).pathname)
      return fetch(url, init)
    }) as typeof fetch
    const messages = [{ role: 'user', content: [{ type: 'text', text: SECRET }] }]
    await expect(encryptedChat({ baseUrl: s.t.listen(), apiKey: s.key, model: 'sim:encrypted', messages, fetch: counting })).rejects.toThrow('messages[0].content cannot be sent')
    expect(asked).toEqual(['/api/v1/attestation'])
  })

  test('NEAR: history tool calls and names are encrypted with all-fields, without tools (before: sent in plaintext, 400)', async () => {
    const s = setups.near2!
    const messages = [{ role: 'user', content: 'weather?', name: 'alice' }, { role: 'assistant', content: null, tool_calls: [call] }, { role: 'tool', tool_call_id: 'c1', content: 'sunny' }]
    const result = await encryptedChat({ baseUrl: s.t.listen(), apiKey: s.key, model: 'sim:encrypted', messages })
    expect(result).toMatchObject({ authenticated: true, content: 'echo: weather?' })
    const seen = s.t.sims.near2!.state.seen.at(-1)!
    expect(seen.headers['x-encrypt-all-fields']).toBe('true')
    expect(seen.rawBody).not.toContain(SECRET)
    expect(seen.plain.messages[1].tool_calls[0].function).toEqual(call.function)
  })
})
