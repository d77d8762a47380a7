import { describe, expect, test } from 'bun:test'
import { EnvelopeMeter } from '../../src/inference/encrypted-usage'
import { boundedUsage, Meter, priceUsage } from '../../src/inference/meter'
import { parseProofFormat } from '../../src/tee/proof-format'

// An upstream's usage report is held to what the call could have used: the model's context and
// the max_tokens the upstream was sent (SECURITY-NOTES.md §3: nothing from upstream is trusted).

const bound = { maxInputTokens: 8192, maxOutputTokens: 16 }
const tools = { webSearchRequests: 0, webFetchRequests: 0 }

describe('boundedUsage', () => {
  test('a usage within the bound is returned as it is', () => {
    const usage = { inputTokens: 100, outputTokens: 16, ...tools }
    expect(boundedUsage(usage, bound)).toBe(usage)
  })

  test('counts beyond it are held to it; cached and reasoning stay within what they are part of', () => {
    expect(boundedUsage({ inputTokens: 10 ** 9, cachedInputTokens: 10 ** 9, outputTokens: 10 ** 8, reasoningTokens: 10 ** 8, ...tools }, bound)).toEqual({
      inputTokens: 8192, cachedInputTokens: 8192, outputTokens: 16, reasoningTokens: 16, ...tools,
    })
    expect(boundedUsage({ inputTokens: 5, cachedInputTokens: 2, outputTokens: 40, ...tools }, bound)).toEqual({ inputTokens: 5, cachedInputTokens: 2, outputTokens: 16, ...tools })
  })

  test('within the bound, subsets larger than their whole are held to it: the reply reports what is billed', () => {
    expect(boundedUsage({ inputTokens: 10, cachedInputTokens: 50, outputTokens: 12, reasoningTokens: 500, ...tools }, bound)).toEqual({
      inputTokens: 10, cachedInputTokens: 10, outputTokens: 12, reasoningTokens: 12, ...tools,
    })
    expect(boundedUsage({ inputTokens: 10, cachedInputTokens: 4, cacheWriteInputTokens: 9, outputTokens: 1, ...tools }, bound)).toEqual({
      inputTokens: 10, cachedInputTokens: 4, cacheWriteInputTokens: 6, outputTokens: 1, ...tools,
    })
  })
})

describe('the meters bill within the bound', () => {
  test('Meter: a reported usage and a counted fallback alike', () => {
    const reported = new Meter(5, bound)
    reported.observe({ type: 'finish', reason: 'stop', usage: { inputTokens: 5, outputTokens: 10 ** 8, ...tools } })
    expect(reported.usage()).toMatchObject({ inputTokens: 5, outputTokens: 16 })
    const counted = new Meter(5, bound)
    counted.observe({ type: 'text-delta', block: 0, delta: 'x'.repeat(400) })
    expect(counted.usage()).toMatchObject({ inputTokens: 5, outputTokens: 16 })
  })

  test('after the finish the usage is computed once: the terminal frames and the settlement read the same', () => {
    const meter = new Meter(5, bound)
    meter.observe({ type: 'text-delta', block: 0, delta: 'hello' })
    expect(meter.usage()).not.toBe(meter.usage()) // still streaming: each read counts what arrived
    meter.observe({ type: 'finish', reason: 'stop', usage: { inputTokens: 5, outputTokens: 2, ...tools } })
    expect(meter.usage()).toBe(meter.usage())
  })

  test('EnvelopeMeter (Encrypted): the backend’s reported usage', () => {
    const meter = new EnvelopeMeter(5, bound, parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, 'ecdsa')
    meter.observeCompletion({ usage: { prompt_tokens: 10 ** 9, completion_tokens: 10 ** 8 } })
    expect(meter.usage()).toMatchObject({ inputTokens: 8192, outputTokens: 16 })
  })

  test('EnvelopeMeter: without a reported usage, `reasoning` ciphertext is output; sent beside reasoning_content (the same text), it counts once', () => {
    const format = parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!
    // An ecdsa blob of 40 plaintext bytes: 93 bytes of overhead (TEE-PROTOCOL.md A2) plus 40.
    const blob = '04' + 'ab'.repeat(93 + 40 - 1)
    const reasoning = new EnvelopeMeter(5, { maxInputTokens: 8192, maxOutputTokens: 4096 }, format, 'ecdsa')
    reasoning.observeCompletion({ choices: [{ index: 0, delta: { reasoning: blob } }] })
    expect(reasoning.usage()).toMatchObject({ inputTokens: 5, outputTokens: 10 })
    const both = new EnvelopeMeter(5, { maxInputTokens: 8192, maxOutputTokens: 4096 }, format, 'ecdsa')
    both.observeCompletion({ choices: [{ index: 0, message: { content: '', reasoning_content: blob, reasoning: blob } }] })
    expect(both.usage()).toMatchObject({ inputTokens: 5, outputTokens: 10 })
  })

  test('EnvelopeMeter: fractional counts are floored and negative subsets dropped, so the usage can be priced', () => {
    const meter = new EnvelopeMeter(5, bound, parseProofFormat('dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2')!, 'ecdsa')
    meter.observeCompletion({ usage: { prompt_tokens: 10.5, completion_tokens: 3.7, prompt_tokens_details: { cached_tokens: -4 }, completion_tokens_details: { reasoning_tokens: 1.5 } } })
    const usage = meter.usage()
    expect(usage).toEqual({ inputTokens: 10, outputTokens: 3, reasoningTokens: 1, ...tools })
    expect(priceUsage({ inputPerMillion: 1_000_000n, outputPerMillion: 1_000_000n }, usage)).toBe(13n)
  })
})
