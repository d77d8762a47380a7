import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { parseCharges } from '../support/documents'
import { json } from '../support/harness'
import { answer, buildFusionHarness, fusionEntries, USER_MESSAGES, type FusionHarness } from './support'

// A request a backend's adapter will not send (a temperature above Anthropic's 1, an empty user
// message) never reaches a provider: when every participant is refused so, the run is refused
// as a whole with that 4xx, streamed too, as README (Fusion, Failures) says and as
// /v1/chat/completions answers. QA: the adapter refused only once each part was admitted, so the
// run answered 200 `failed` (or a 200 event stream). A route with another backend that takes the
// request still runs: refused by one adapter, the part reaches the next backend's provider.

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness({
    extraModels: [
      '  - { id: claude-b, backends: [{ provider: pan, model: upstream-claude-b }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
      // Anthropic first, then a Chat Completions backend, which takes temperatures up to 2.
      '  - { id: mixed, backends: [{ provider: pan, model: upstream-mixed }, { provider: pb, model: upstream-mixed }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 16384, max_output_tokens: 2048 }',
    ],
  })
})
afterEach(async () => {
  await h.close()
})

const spent = async () => 10_000_000_000n - (await h.t.deps.balance(h.org.orgId)).prepaidNanos
const held = () => h.t.deps.ledger.pools.get('prepaid', h.org.orgId, null, 0, h.t.clock.now()).held
const FILE_MESSAGES = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: `data:text/plain;base64,${btoa('Quarterly notes.')}`, filename: 'notes.txt' } }] }]
const called = () => h.a.requests.length + h.b.requests.length + h.judge.requests.length + h.claude.requests.length

describe('every participant refused by its adapter', () => {
  for (const [name, extra, message] of [
    ['temperature 1.5 on Anthropic backends', { temperature: 1.5 }, 'temperature 1.5 is above 1'],
    ['an empty user message', { messages: [{ role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi.' }, { role: 'user', content: '' }] }, 'A user message is empty'],
  ] as Array<[string, Record<string, unknown>, string]>) {
    test(`${name}: 400 invalid_request before anything is reserved or called, with stream: true too`, async () => {
      for (const stream of [false, true]) {
        const response = await h.fusion({ models: ['claude', 'claude-b'], messages: USER_MESSAGES, ...extra, stream })
        expect(response.status).toBe(400)
        const { error } = await json(response)
        expect(error).toMatchObject({ code: 'invalid_request', param: 'models' })
        expect(error.message).toStartWith('no participant can serve this request: claude: ')
        expect(error.message).toContain(message)
      }
      expect(called()).toBe(0)
      expect(held()).toBe(0n)
      expect(await spent()).toBe(0n)
      expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(0)
      // The same refusal a chat gets.
      const chat = await h.t.request('POST', '/v1/chat/completions', { key: h.org.adminKey, body: { model: 'claude', messages: USER_MESSAGES, ...extra } })
      expect(chat.status).toBe(400)
    })
  }

  test('one refused by its adapter fails alone, never called; the others run', async () => {
    h.a.enqueue(answer('A says 9.9.'))
    h.judge.enqueue(answer('Checked: 9.9.'))
    const result = await json(await h.fusion({ models: ['claude', 'a'], messages: USER_MESSAGES, temperature: 1.5 }))
    expect(result.status).toBe('partial')
    expect(result.models[0]).toMatchObject({ error_code: 'invalid_request', prompt_tokens: 0 })
    expect(result.models[0].error).toContain('temperature 1.5 is above 1')
    expect(h.claude.requests.length).toBe(0)
    expect((await fusionEntries(h.t)).length).toBe(2)
  })
})

describe("the judge's adapters", () => {
  const EMPTY_TURN = [{ role: 'user', content: 'Hello' }, { role: 'assistant', content: 'Hi.' }, { role: 'user', content: '' }]

  test('a conversation the judge cannot be sent: 400 naming the judge before any participant runs or is billed, with stream: true too', async () => {
    for (const stream of [false, true]) {
      const response = await h.fusion({ models: ['a', 'b'], judge: 'claude', messages: EMPTY_TURN, stream })
      expect(response.status).toBe(400)
      const { error } = await json(response)
      expect(error).toMatchObject({ code: 'invalid_request', param: 'judge' })
      expect(error.message).toStartWith('judge claude: ')
      expect(error.message).toContain('A user message is empty')
    }
    expect(called()).toBe(0)
    expect(held()).toBe(0n)
    expect(await spent()).toBe(0n)
  })

  test('they are asked about the synthesis request itself: a conversation of system text alone gets the candidates as its user turn', async () => {
    h.a.enqueue(answer('A.'))
    h.b.enqueue(answer('B.'))
    h.claude.enqueue({ kind: 'sse', body: anthropicWire.stream({ text: 'Both.', finish: 'stop', usage: { inputTokens: 100, outputTokens: 2 } }) })
    const result = await json(await h.fusion({ models: ['a', 'b'], judge: 'claude', messages: [{ role: 'system', content: 'Greet the user.' }] }))
    expect(result).toMatchObject({ status: 'complete', synthesis: 'Both.' })
  })
})

describe('with a file attached, the adapters are asked once it is text', () => {
  test('an Anthropic participant takes the extracted file; refused by every adapter, the run is a 400 and its document is not charged', async () => {
    h.claude.enqueue({ kind: 'sse', body: anthropicWire.stream({ text: 'Claude: noted.', finish: 'stop', usage: { inputTokens: 100, outputTokens: 20 } }) })
    h.a.enqueue(answer('A: noted.'))
    h.judge.enqueue(answer('Both noted.'))
    expect((await json(await h.fusion({ models: ['claude', 'a'], messages: FILE_MESSAGES }))).status).toBe('complete')
    expect(JSON.stringify(h.claude.onlyRequest().body.messages)).toContain('Quarterly notes.')
    const charged = await parseCharges(h.t, h.org.orgId)
    expect(charged.length).toBe(1)

    const refused = await h.fusion({ models: ['claude', 'claude-b'], messages: FILE_MESSAGES, temperature: 1.5 })
    expect(refused.status).toBe(400)
    expect((await json(refused)).error.message).toContain('temperature 1.5 is above 1')
    expect(h.claude.requests.length).toBe(1)
    expect(await parseCharges(h.t, h.org.orgId)).toEqual(charged)
    expect(held()).toBe(0n)
  })
})

describe('a route with a backend that takes the request', () => {
  test('refused by its Anthropic backend, the part goes to the next one: its answer counts', async () => {
    h.b.enqueue(answer('Mixed says 9.9.'))
    h.a.enqueue(answer('A says 9.9.'))
    h.judge.enqueue(answer('Both: 9.9.'))
    const result = await json(await h.fusion({ models: ['mixed', 'a'], messages: USER_MESSAGES, temperature: 1.5 }))
    expect(result.status).toBe('complete')
    expect(result.models[0].output).toBe('Mixed says 9.9.')
    expect(h.claude.requests.length).toBe(0)
    expect(h.b.onlyRequest().body.temperature).toBe(1.5)
  })

  test('refused by one adapter, then failing at the next backend: it reached a provider, so 200 failed, not the 400', async () => {
    h.b.enqueue({ kind: 'json', status: 500, body: openAIWire.errorBody(500, 'down') })
    h.claude.enqueue({ kind: 'json', status: 500, body: anthropicWire.errorBody(500, 'unused') })
    const response = await h.fusion({ models: ['mixed', 'claude'], messages: USER_MESSAGES, temperature: 1.5 })
    expect(response.status).toBe(200)
    const result = await json(response)
    expect(result.status).toBe('failed')
    expect(result.models.map((entry: any) => entry.error_code)).toEqual(['provider_error', 'invalid_request'])
    expect(h.b.requests.length).toBe(1)
    expect(h.claude.requests.length).toBe(0)
    expect(await spent()).toBe(0n)
  })
})
