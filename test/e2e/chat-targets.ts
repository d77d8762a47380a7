import { expect } from 'bun:test'
import type { WireScript } from '../providers/conformance'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import type { ReceivedRequest } from '../support/fake-upstream'
import { ceilDiv, MTOK, PRICE } from './upstream-fixtures'

// The HTTP provider types chat-upstreams.test.ts runs against, what each must show its upstream,
// and the charges the client's usage implies.

/** The catalog price of a usage as the client sees it: input, cached input, output and reasoning summed, rounded up once. */
export function priceOf(usage: { prompt_tokens: number; completion_tokens: number; prompt_tokens_details?: { cached_tokens?: number } | null; completion_tokens_details?: { reasoning_tokens?: number } | null } | undefined | null): bigint {
  if (!usage) throw new Error('no usage in the response')
  const input = BigInt(usage.prompt_tokens)
  const cached = BigInt(usage.prompt_tokens_details?.cached_tokens ?? 0)
  const output = BigInt(usage.completion_tokens)
  const reasoning = BigInt(usage.completion_tokens_details?.reasoning_tokens ?? 0)
  return ceilDiv((input - cached) * PRICE.input + cached * PRICE.cached + (output - reasoning) * PRICE.output + reasoning * PRICE.reasoning, MTOK)
}

/**
 * The counted fallback for a stream that ended without reported usage (cut, or left by the
 * client): the input the upstream announced at the start (Anthropic's message_start), else
 * estimated high (UTF-8 bytes ÷ 3, plus 4 per message), and the output the gateway sent
 * (bytes ÷ 4), each rounded up, priced at the input and output rates.
 */
export function fallbackCharge(prompt: string, sentText: string, announcedInput?: number): bigint {
  const input = BigInt(announcedInput ?? Math.ceil(Buffer.byteLength(prompt) / 3) + 4)
  const output = BigInt(Math.ceil(Buffer.byteLength(sentText) / 4))
  return ceilDiv(input * PRICE.input + output * PRICE.output, MTOK)
}


export interface Target {
  readonly type: 'openai-compatible' | 'anthropic'
  readonly wire: WireScript
  /** The path the adapter POSTs to under base_url `<upstream>/v1`. */
  readonly path: string
  /** What the upstream must see as the provider's credential. */
  expectProviderKey(received: ReceivedRequest, key: string): void
  /** Where a `user` would land on this wire, which must stay absent. */
  expectNoEndUser(received: ReceivedRequest): void
  /** The upstream is asked for a stream that reports usage. */
  expectStreamWithUsage(received: ReceivedRequest): void
  /** The upstream is asked for one JSON answer (a non-streamed client). */
  expectJsonAnswer(received: ReceivedRequest): void
  /** The input tokens a partial stream (wire.partial) reports before its text, if the wire reports them up front. */
  readonly announcedInput?: number
}

export const TARGETS: Target[] = [
  {
    type: 'openai-compatible',
    wire: openAIWire,
    path: '/v1/chat/completions',
    expectProviderKey(received, key) {
      expect(received.headers.authorization).toBe(`Bearer ${key}`)
      expect(received.headers['x-api-key']).toBeUndefined()
    },
    expectNoEndUser(received) {
      expect(received.body.user).toBeUndefined()
      expect(received.body.safety_identifier).toBeUndefined()
    },
    expectStreamWithUsage(received) {
      expect(received.body.stream).toBe(true)
      expect(received.body.stream_options).toEqual({ include_usage: true })
    },
    expectJsonAnswer(received) {
      expect(received.body.stream).toBe(false)
      expect(received.body.stream_options).toBeUndefined()
      expect(received.headers.accept).toBe('application/json')
    },
  },
  {
    type: 'anthropic',
    wire: anthropicWire,
    // message_start's usage.input_tokens in anthropicWire.partial.
    announcedInput: 5,
    path: '/v1/messages',
    expectProviderKey(received, key) {
      expect(received.headers['x-api-key']).toBe(key)
      expect(received.headers['anthropic-version']).toBe('2023-06-01')
      expect(received.headers.authorization).toBeUndefined()
    },
    expectNoEndUser(received) {
      expect(received.body.metadata).toBeUndefined()
    },
    expectStreamWithUsage(received) {
      // The Messages stream always reports usage (message_start and message_delta).
      expect(received.body.stream).toBe(true)
    },
    expectJsonAnswer(received) {
      expect(received.body.stream).toBe(false)
      expect(received.headers.accept).toBe('application/json')
    },
  },
]
