import { describe, expect, test } from 'bun:test'
import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { PHALA_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'

// Confidential chat through all three client formats (issue 8 point 4), with the official SDKs
// against `:confidential` models on the simulated TEE backend: plain and streamed, every call
// preceded by its own evidence fetch with a fresh nonce; evidence faults give 503 in each
// format's own error envelope, with no chat at the backend and nothing billed.

let t: TeeGateway
let openai: OpenAI
let anthropic: Anthropic
let orgId: string
teeGatewayForFile([{ id: 'tee-phala', proofFormat: PHALA_V2, sim: { ecdsaAddressCase: 'checksum' } }], {}, session => ({ t, orgId, openai, anthropic } = session))

const sim = () => t.sims['tee-phala']!
const MODEL = 'sim:confidential'

/** One SDK call in one format, plain or streamed: the text the client read. */
type Call = (prompt: string, stream: boolean) => Promise<string>

const FORMATS: Record<string, Call> = {
  'chat.completions': async (prompt, stream) => {
    if (!stream) return (await openai.chat.completions.create({ model: MODEL, messages: [{ role: 'user', content: prompt }] })).choices[0]!.message.content ?? ''
    let text = ''
    for await (const chunk of await openai.chat.completions.create({ model: MODEL, stream: true, messages: [{ role: 'user', content: prompt }] })) text += chunk.choices[0]?.delta.content ?? ''
    return text
  },
  responses: async (prompt, stream) => {
    if (!stream) return (await openai.responses.create({ model: MODEL, input: prompt })).output_text
    let text = ''
    for await (const event of await openai.responses.create({ model: MODEL, input: prompt, stream: true })) if (event.type === 'response.output_text.delta') text += event.delta
    return text
  },
  messages: async (prompt, stream) => {
    const params = { model: MODEL, max_tokens: 256, messages: [{ role: 'user' as const, content: prompt }] }
    if (!stream) {
      const message = await anthropic.messages.create(params)
      return message.content.map(block => (block.type === 'text' ? block.text : '')).join('')
    }
    return (await anthropic.messages.stream(params).finalMessage()).content.map(block => (block.type === 'text' ? block.text : '')).join('')
  },
}

describe('Confidential through every client format', () => {
  for (const [format, call] of Object.entries(FORMATS)) {
    for (const stream of [false, true]) {
      test(`${format} ${stream ? 'streamed' : 'plain'}: attested with a fresh nonce, answered, billed`, async () => {
        const attested = sim().state.attestations.length
        const seen = sim().state.seen.length
        const before = (await t.deps.balance(orgId)).availableNanos
        const prompt = `${format} ${stream} hello`
        expect(await call(prompt, stream)).toBe(`echo: ${prompt}`)
        // Exactly one challenge, before exactly one chat, which was the plain (non-E2EE) request.
        expect(sim().state.attestations.length).toBe(attested + 1)
        expect(sim().state.seen.length).toBe(seen + 1)
        expect(sim().state.seen.at(-1)!.encrypted).toBe(false)
        expect(JSON.stringify(sim().state.seen.at(-1)!.plain.messages)).toContain(prompt)
        expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
        // Another call of the same format challenges again, with another nonce.
        await call(prompt, stream)
        const nonces = sim().state.attestations.slice(attested).map(query => query.get('nonce'))
        expect(nonces.length).toBe(2)
        expect(nonces[0]).toMatch(/^[0-9a-f]{64}$/)
        expect(nonces[1]).not.toBe(nonces[0])
      })
    }
  }
})

/** The status and the error body each SDK surfaced, in its own envelope. */
async function failure(format: string, stream: boolean): Promise<{ status: number; body: any }> {
  const error = await FORMATS[format]!('fault', stream).then(
    () => { throw new Error('the call should have failed') },
    error => error,
  )
  if (format === 'messages') {
    expect(error).toBeInstanceOf(Anthropic.APIError)
    return { status: error.status, body: error.error }
  }
  expect(error).toBeInstanceOf(OpenAI.APIError)
  return { status: error.status, body: error.error }
}

describe('evidence faults: 503 in each format, no chat, nothing billed', () => {
  const faults = ['echoWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'keyAddressMismatch', 'status500'] as const
  for (const format of Object.keys(FORMATS)) {
    for (const stream of [false, true]) {
      for (const fault of faults) {
        test(`${format} ${stream ? 'streamed' : 'plain'}, ${fault}`, async () => {
          const seen = sim().state.seen.length
          const before = (await t.deps.balance(orgId)).availableNanos
          sim().state.faults = { [fault]: true }
          let result
          try {
            result = await failure(format, stream)
          } finally {
            sim().state.faults = {}
          }
          expect(result.status).toBe(503)
          if (format === 'messages') {
            // Anthropic's envelope: {type: "error", error: {type, message}}.
            expect(result.body.type).toBe('error')
            expect(result.body.error.type).toBe('overloaded_error')
            expect(result.body.error.message).toMatch(/attestation|evidence/)
          } else {
            // The OpenAI SDK hands over the `error` object of {error: {message, type, code}}.
            expect(result.body.code).toBe('unavailable')
            expect(result.body.type).toBe('server_error')
          }
          expect(sim().state.seen.length).toBe(seen)
          expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
        })
      }
    }
  }
})
