import { describe, expect, test } from 'bun:test'
import { decryptChatResponse, decryptChatStream, generateClientKeys, type E2eeContext } from '../../../src/client/tee'
import { encryptField, responseAad, type Variant } from '../../../src/tee/cipher'
import { hexToBytes, type SigningAlgo } from '../../../src/tee/keys'

// The client library decrypts every field TEE-PROTOCOL.md A2 says a backend encrypts (B6): NEAR
// always `content` (or its parts' text), `reasoning_content`, `reasoning` and `audio.data`; with
// all-fields also `refusal`, tool-call and function_call names and arguments, and logprobs
// tokens and bytes. Phala encrypts `content` and `reasoning_content` only.

function context(variant: Variant, algo: SigningAlgo): E2eeContext {
  const client = generateClientKeys(algo)
  const phala2 = variant.family === 'phala' && variant.version === 2
  return {
    proofFormat: `dstack-tdx-nvgpu.addr-nonce.e2ee-${variant.family === 'nearai' ? 'nearai' : 'phala'}.v${variant.version}`,
    variant, algo, modelPublicKeyHex: '', providerModelId: 'sim/echo-1', client,
    ...(phala2 ? { nonce: 'n'.repeat(32), timestamp: 1_700_000_000 } : {}),
  }
}

/** What the backend sends for `text` in `field` of choice 0 of the object (id, model). */
function sealed(ctx: E2eeContext, text: string, field = 'content', where = { id: 'chatcmpl-1', model: 'sim/echo-1' }): string {
  const aad = ctx.variant.family === 'phala' && ctx.variant.version === 2 ? responseAad({ algo: ctx.algo, ...where, choice: 0, field, nonce: ctx.nonce!, timestamp: ctx.timestamp! }) : undefined
  return encryptField(text, ctx.variant, ctx.algo, hexToBytes(ctx.client.publicKeyHex), { aad })
}

describe('client library: every encrypted response field is decrypted', () => {
  for (const algo of ['ed25519', 'ecdsa'] as const) {
    test(`NEAR v2 ${algo}: reasoning, audio.data and content parts, always`, () => {
      const ctx = context({ family: 'nearai', version: 2 }, algo)
      const message = {
        role: 'assistant',
        content: [{ type: 'text', text: sealed(ctx, 'part one') }, { type: 'text', text: '' }],
        reasoning: sealed(ctx, 'thinking'),
        reasoning_content: sealed(ctx, 'thinking too'),
        audio: { id: 'audio_1', data: sealed(ctx, 'UklGRg=='), transcript: 'plain' },
      }
      const out = decryptChatResponse({ id: 'chatcmpl-1', model: 'sim/echo-1', choices: [{ index: 0, message, finish_reason: 'stop' }] }, ctx)
      expect(out.choices[0].message).toEqual({
        role: 'assistant',
        content: [{ type: 'text', text: 'part one' }, { type: 'text', text: '' }],
        reasoning: 'thinking',
        reasoning_content: 'thinking too',
        audio: { id: 'audio_1', data: 'UklGRg==', transcript: 'plain' },
      })
      // Fields the message does not carry are not added.
      expect(Object.keys(decryptChatResponse({ id: 'x', model: 'm', choices: [{ index: 0, message: { role: 'assistant', content: sealed(ctx, 'hi') } }] }, ctx).choices[0].message)).toEqual(['role', 'content'])
    })

    test(`NEAR v1 ${algo}: with all-fields, refusal, function_call and logprobs tokens and bytes`, () => {
      const ctx = context({ family: 'nearai', version: 1 }, algo)
      const entry = (token: string) => ({ token: sealed(ctx, token), bytes: sealed(ctx, JSON.stringify([...Buffer.from(token)])), logprob: -0.5 })
      const message = {
        role: 'assistant', content: null, refusal: sealed(ctx, 'I will not'),
        function_call: { name: sealed(ctx, 'lookup'), arguments: sealed(ctx, '{"q":1}') },
        tool_calls: [{ id: 'c1', type: 'function', function: { name: sealed(ctx, 'get'), arguments: sealed(ctx, '{}') } }],
      }
      const logprobs = { content: [{ ...entry('Hi'), top_logprobs: [entry('Hi'), entry('Yo')] }], refusal: [{ ...entry('No'), top_logprobs: [] }] }
      const out = decryptChatResponse({ id: 'chatcmpl-1', model: 'sim/echo-1', choices: [{ index: 0, message, logprobs, finish_reason: 'stop' }] }, ctx, { encryptAllFields: true })
      const choice = out.choices[0]
      expect(choice.message).toEqual({
        role: 'assistant', content: null, refusal: 'I will not',
        function_call: { name: 'lookup', arguments: '{"q":1}' },
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get', arguments: '{}' } }],
      })
      const plain = (token: string) => ({ token, bytes: [...Buffer.from(token)], logprob: -0.5 })
      expect(choice.logprobs).toEqual({ content: [{ ...plain('Hi'), top_logprobs: [plain('Hi'), plain('Yo')] }], refusal: [{ ...plain('No'), top_logprobs: [] }] })
    })

    test(`Phala v2 ${algo}: content and reasoning_content decrypted with their AAD; reasoning, which Phala does not encrypt, left as it is`, () => {
      const ctx = context({ family: 'phala', version: 2 }, algo)
      const message = { role: 'assistant', content: sealed(ctx, 'hello'), reasoning_content: sealed(ctx, 'why', 'reasoning_content'), reasoning: 'why' }
      const out = decryptChatResponse({ id: 'chatcmpl-1', model: 'sim/echo-1', choices: [{ index: 0, message }] }, ctx)
      expect(out.choices[0].message).toEqual({ role: 'assistant', content: 'hello', reasoning_content: 'why', reasoning: 'why' })
    })
  }

  test('streamed: each delta\'s reasoning and audio.data are decrypted too', async () => {
    const ctx = context({ family: 'nearai', version: 2 }, 'ecdsa')
    const event = (delta: Record<string, unknown>) => `data: ${JSON.stringify({ id: 'chatcmpl-1', model: 'sim/echo-1', choices: [{ index: 0, delta }] })}\n\n`
    const body = [event({ reasoning: sealed(ctx, 'step 1') }), event({ audio: { data: sealed(ctx, 'AAAA') } }), event({ content: sealed(ctx, 'done') }), 'data: [DONE]\n\n'].join('')
    const deltas: unknown[] = []
    for await (const chunk of decryptChatStream([new TextEncoder().encode(body)], ctx)) deltas.push(chunk.choices[0].delta)
    expect(deltas).toEqual([{ reasoning: 'step 1' }, { audio: { data: 'AAAA' } }, { content: 'done' }])
  })
})
