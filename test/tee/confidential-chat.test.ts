import { describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { NEAR_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'

// Confidential chat: every call is preceded by a fresh evidence fetch whose checks must pass.

let t: TeeGateway
let client: OpenAI
let orgId: string
teeGatewayForFile([{ id: 'tee-near', proofFormat: NEAR_V2, sim: { reasoning: true } }], {}, session => ({ t, orgId, openai: client } = session))

const sim = () => t.sims['tee-near']!

describe('Confidential chat', () => {
  test('non-streamed: attests with a fresh nonce before the call, then answers and bills', async () => {
    const attestations = sim().state.attestations.length
    const before = (await t.deps.balance(orgId)).availableNanos
    const reply = await client.chat.completions.create({ model: 'sim:confidential', messages: [{ role: 'user', content: 'hello tee' }] })
    expect(reply.model).toBe('sim:confidential')
    expect(reply.choices[0]!.message.content).toBe('echo: hello tee')
    expect(sim().state.attestations.length).toBe(attestations + 1)
    const nonce = sim().state.attestations.at(-1)!.get('nonce')!
    expect(nonce).toMatch(/^[0-9a-f]{64}$/)
    expect(sim().state.seen.at(-1)!.encrypted).toBe(false)
    // A collected Confidential call still streams from the backend (its protocol is built on streams).
    expect(JSON.parse(sim().state.seen.at(-1)!.rawBody).stream).toBe(true)
    expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
    // A second call challenges again, with another nonce.
    await client.chat.completions.create({ model: 'sim:confidential', messages: [{ role: 'user', content: 'again' }] })
    expect(sim().state.attestations.length).toBe(attestations + 2)
    expect(sim().state.attestations.at(-1)!.get('nonce')).not.toBe(nonce)
  })

  test('streamed, with reasoning and tools', async () => {
    const stream = await client.chat.completions.create({
      model: 'sim:confidential', stream: true, stream_options: { include_usage: true },
      messages: [{ role: 'user', content: 'stream me' }],
    })
    let text = ''
    let reasoning = ''
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      reasoning += (chunk.choices[0]?.delta as { reasoning_content?: string } | undefined)?.reasoning_content ?? ''
    }
    expect(text).toBe('echo: stream me')
    expect(reasoning).toBe('thinking about: stream me')
    const tools = await client.chat.completions.create({
      model: 'sim:confidential',
      messages: [{ role: 'user', content: 'weather?' }],
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object', properties: { q: { type: 'string' } } } } }],
    })
    expect(tools.choices[0]!.message.tool_calls?.[0]).toMatchObject({ type: 'function', function: { name: 'lookup', arguments: '{"q":"weather?"}' } })
  })

  const faults = ['echoWrongNonce', 'gpuWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'emptyGpuEvidence', 'wrongAlgoEcho', 'keyAddressMismatch', 'status500'] as const
  for (const fault of faults) {
    test(`${fault}: the call does not go ahead (503 unavailable), nothing billed`, async () => {
      const seen = sim().state.seen.length
      const before = (await t.deps.balance(orgId)).availableNanos
      sim().state.faults = { [fault]: true }
      try {
        const error = await client.chat.completions.create({ model: 'sim:confidential', messages: [{ role: 'user', content: 'x' }], stream: fault === 'status500' }).catch(e => e)
        expect(error).toBeInstanceOf(OpenAI.APIError)
        expect(error.status).toBe(503)
        expect(error.code).toBe('unavailable')
      } finally {
        sim().state.faults = {}
      }
      expect(sim().state.seen.length).toBe(seen)
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
    })
  }
})
