import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { buildTestApp, json, type TestApp, type TestOrg } from '../support/harness'

// POST /api/v1/chat/fusion on the embedded default (demo models): the validation table, and the
// opt-in progress stream. Every refusal is a 400 naming the field, before anything is billed.

let t: TestApp
let org: TestOrg
beforeAll(async () => {
  t = await buildTestApp()
  org = await t.createOrg()
})
afterAll(async () => {
  await t.close()
})

const MESSAGES = [{ role: 'user', content: 'Name a prime number.' }]
const VALID = { models: ['demo-anonymous', 'demo-alt'], messages: MESSAGES }
const send = (body: unknown, headers: Record<string, string> = {}) => {
  // Keep the inference buckets full: this file sends many requests with one key.
  t.clock.advance(60_000)
  return t.request('POST', '/api/v1/chat/fusion', { key: org.adminKey, body, headers })
}
const fusionCharges = async () => {
  const result = await t.deps.database.client.execute("SELECT COUNT(*) AS n FROM ledger_entries WHERE purpose = 'fusion'")
  return Number(result.rows[0]!.n)
}

type Case = [name: string, body: Record<string, unknown>, param: string | undefined, message: RegExp]
const CASES: Case[] = [
  ['models missing', { messages: MESSAGES }, 'models', /models/],
  ['one model', { ...VALID, models: ['demo-anonymous'] }, 'models', /2 or 3 distinct/],
  ['four models', { ...VALID, models: ['demo-anonymous', 'demo-private', 'demo-alt', 'demo-anonymous'] }, 'models', /2 or 3 distinct/],
  ['duplicate models', { ...VALID, models: ['demo-alt', 'demo-alt'] }, 'models.1', /repeats models.0/],
  ['an unknown model', { ...VALID, models: ['demo-alt', 'gpt-nope'] }, 'models.1', /not in the catalog/],
  ['a level the model does not offer', { ...VALID, models: ['demo-alt', 'demo-private:confidential'] }, 'models.1', /not offered at level confidential/],
  ['an Encrypted id', { ...VALID, models: ['demo-alt', 'demo-private:encrypted'] }, 'models.1', /encrypted/],
  ['models as a string', { ...VALID, models: 'demo-alt' }, 'models', /models/],
  ['an empty model id', { ...VALID, models: ['demo-alt', ''] }, 'models.1', /./],
  ['messages missing', { models: VALID.models }, 'messages', /messages/],
  ['no messages', { ...VALID, messages: [] }, 'messages', /messages/],
  ['a function tool', { ...VALID, tools: [{ type: 'function', function: { name: 'lookup' } }] }, 'tools.0', /function tools are not supported/],
  ['another tool type', { ...VALID, tools: [{ type: 'code_interpreter' }] }, 'tools.0', /only web_search and web_fetch/],
  [
    'a tool call in the conversation',
    { ...VALID, messages: [...MESSAGES, { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }] },
    'messages.1',
    /tool calls/,
  ],
  ['a tool result in the conversation', { ...VALID, messages: [...MESSAGES, { role: 'tool', tool_call_id: 'c1', content: 'x' }] }, 'messages.1', /tool/],
  // Hosted tools reach every participant's canonical request; today the policy refuses them everywhere.
  ['web_search on every participant', { ...VALID, web_search: true }, 'models', /no participant can serve this request: demo-anonymous: .*web_search.*; demo-alt: .*web_search/],
  ['web_fetch on every participant', { ...VALID, web_fetch: true }, 'models', /no participant can serve.*web_fetch/],
  ['a web_fetch tool entry', { ...VALID, tools: [{ type: 'web_fetch' }] }, 'models', /web_fetch/],
  ['max_tokens above every model', { ...VALID, max_tokens: 5000 }, 'models', /exceeds model demo-anonymous's maximum output/],
  ['an unknown judge', { ...VALID, judge: 'nope' }, 'judge', /judge: model "nope" is not in the catalog/],
  ['an unknown field', { ...VALID, n: 2 }, 'n', /unknown field/],
  ['temperature out of range', { ...VALID, temperature: 3 }, 'temperature', /./],
  ['top_p out of range', { ...VALID, top_p: 1.5 }, 'top_p', /./],
  ['max_tokens zero', { ...VALID, max_tokens: 0 }, 'max_tokens', /./],
  ['stream not a boolean', { ...VALID, stream: 'yes' }, 'stream', /./],
  ['a user id too long', { ...VALID, user: 'u'.repeat(300) }, 'user', /./],
]

describe('validation', () => {
  test('the valid request the table varies is accepted', async () => {
    const response = await send(VALID)
    expect(response.status).toBe(200)
    expect((await json(response)).status).toBe('complete')
  })

  for (const [name, body, param, message] of CASES) {
    test(`${name} → 400${param ? ` (${param})` : ''}, nothing billed`, async () => {
      const before = await fusionCharges()
      for (const stream of 'stream' in body ? [undefined] : [undefined, true]) {
        const response = await send(stream ? { ...body, stream } : body)
        expect(response.status).toBe(400)
        expect(response.headers.get('content-type')).toContain('application/json')
        const error = (await json(response)).error
        expect(error.code).toBe('invalid_request')
        expect(error.param).toBe(param)
        expect(error.message).toMatch(message)
        expect(error.request_id).toBeTruthy()
      }
      expect(await fusionCharges()).toBe(before)
      expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    })
  }

  test('the body cap of other inference routes (4 MiB) applies', async () => {
    const response = await send({ ...VALID, messages: [{ role: 'user', content: 'x'.repeat(4 * 1024 * 1024) }] })
    expect(response.status).toBe(413)
  })
})

describe('stream: true', () => {
  test('progress events in order, synthesis deltas, then the same object as without stream', async () => {
    const plain = await json(await send({ ...VALID, models: ['demo-anonymous', 'demo-private', 'demo-alt'] }))
    const response = await send({ ...VALID, models: ['demo-anonymous', 'demo-private', 'demo-alt'], stream: true })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    const events = (await response.text())
      .split('\n\n')
      .filter(Boolean)
      .map(block => {
        const [eventLine, ...dataLines] = block.split('\n')
        return { event: eventLine!.replace('event: ', ''), data: JSON.parse(dataLines.map(line => line.replace(/^data: /, '')).join('\n')) }
      })
    const names = events.map(event => event.event)
    expect(names.slice(0, 3)).toEqual(['participant.started', 'participant.started', 'participant.started'])
    expect(events.slice(0, 3).map(event => event.data)).toEqual([
      { index: 0, model: 'demo-anonymous' }, { index: 1, model: 'demo-private' }, { index: 2, model: 'demo-alt' },
    ])
    expect(names.slice(3, 6)).toEqual(['participant.finished', 'participant.finished', 'participant.finished'])
    expect(names[6]).toBe('synthesis.started')
    expect(events[6]!.data).toEqual({ judge: 'demo-private' })
    const deltas = events.filter(event => event.event === 'synthesis.delta')
    expect(deltas.length).toBeGreaterThan(10)
    expect(names.at(-1)).toBe('fusion.completion')
    expect(names.slice(7, -1).every(name => name === 'synthesis.delta')).toBe(true)
    const final = events.at(-1)!.data
    expect(deltas.map(event => event.data.delta).join('')).toBe(final.synthesis)
    // The demo judge echoes its prompt, whose fence marker is drawn per run.
    const unmarked = (result: any) => ({ ...result, created: 0, synthesis: result.synthesis.replace(/candidate_answer_[0-9a-f]{12}/g, 'candidate_answer_MARKER') })
    expect(unmarked(final)).toEqual(unmarked(plain))
    for (const event of events.slice(3, 6)) expect(event.data.participant).toEqual(final.models[event.data.index])
  })

  test('refusals keep their status (403 without Fusion access), not an event', async () => {
    const config = (await import('../../src/config/load')).loadConfig({ SVC_CONFIG: 'x.yaml' }, () =>
      JSON.stringify({ providers: [{ id: 'demo', type: 'demo' }], models: [{ id: 'm1', backends: [{ provider: 'demo', model: 'demo' }], price: { input_per_mtok: '0', output_per_mtok: '0' }, context_length: 1000, max_output_tokens: 100 }, { id: 'm2', backends: [{ provider: 'demo', model: 'demo' }], price: { input_per_mtok: '0', output_per_mtok: '0' }, context_length: 1000, max_output_tokens: 100 }], plans: { payg: { monthly_allowance: '0', fusion: false } }, fusion: { judge: 'm1' } }),
    )
    const other = await buildTestApp({}, config)
    const payg = await other.createOrg()
    const response = await other.request('POST', '/api/v1/chat/fusion', { key: payg.adminKey, body: { models: ['m1', 'm2'], messages: MESSAGES, stream: true } })
    expect(response.status).toBe(403)
    expect((await json(response)).error.message).toContain('Fusion access')
    await other.close()
  })
})

describe('OpenAPI', () => {
  test('documents the Idempotency-Key header, the result object, the attestation field names and the refusals', async () => {
    const spec = await json(await t.request('GET', '/openapi.json'))
    const operation = spec.paths['/api/v1/chat/fusion'].post
    expect(operation.tags).toEqual(['Fusion'])
    expect(operation.parameters).toContainEqual(expect.objectContaining({ name: 'Idempotency-Key', in: 'header', required: false, schema: { type: 'string', format: 'uuid' } }))
    expect(Object.keys(operation.responses)).toEqual(expect.arrayContaining(['200', '400', '401', '403', '429']))
    const result = operation.responses['200'].content['application/json'].schema
    expect(result.required).toEqual(['object', 'created', 'status', 'judge', 'models', 'synthesis', 'synthesis_prompt_tokens', 'synthesis_tokens'])
    expect(result.properties.status.enum).toEqual(['complete', 'partial', 'failed'])
    const participant = result.properties.models.items
    expect(participant.required).toEqual(['id', 'model', 'output', 'finish_reason', 'latency_ms', 'prompt_tokens', 'tokens'])
    for (const attestation of [participant.properties.attestation, result.properties.judge_attestation]) {
      expect(Object.keys(attestation.properties)).toEqual(['model', 'nonce', 'signing_address', 'signing_algo', 'proof_format'])
    }
    expect(JSON.stringify(result)).not.toMatch(/cost/)
    expect(operation.description).toContain('stream: true')
  })
})
