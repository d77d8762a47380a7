// The demo provider: a deterministic offline model, the embedded default (ARCHITECTURE.md §3.2),
// so a new user's first request works with no key and no network. It also gives the pipeline,
// the dialects and the billing tests a provider with exact, predictable events and usage.

import type { ProviderConfig } from '../../config/config'
import type { ChatEvent, ChatRequest, FinishReason } from '../../inference/canonical'
import { UpstreamError, type Provider, type ProviderCall } from '../types'
import { countInputTokens } from './count-input-tokens'
import { planReply, type DemoPlan } from './plan-reply'

/** Demo-only knobs. */
export interface DemoOptions {
  /** Pause between tokens, for demos of streaming (default 0: as fast as the consumer pulls). */
  readonly tokenDelayMs?: number
}

/** How many characters of tool-call arguments make one streamed token. */
const ARGUMENT_CHARACTERS_PER_TOKEN = 4

/**
 * Streams the reply planned by planReply token by token: a word (with its leading space) is one
 * token, a tool call's name is one token and every 4 characters of its arguments one more.
 * Honours `maxOutputTokens` (or the route's cap): the stream stops where the budget runs out and
 * finishes `length`, mid-word-list or mid-arguments as a real model would. A stop sequence cuts
 * the visible text before its first occurrence and finishes `stop`. Usage is exact: input as
 * countInputTokens, output = tokens emitted, reasoningTokens = the reasoning share of them.
 */
export class DemoProvider implements Provider {
  readonly id: string
  private readonly tokenDelayMs: number

  constructor(config: ProviderConfig, options: DemoOptions = {}) {
    this.id = `demo:${config.id}`
    this.tokenDelayMs = Math.max(0, options.tokenDelayMs ?? 0)
  }

  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    if (call.signal.aborted) throw new UpstreamError('aborted', 'the call was aborted', this.id, call.upstreamModel)
    return this.events(call, planReply(call.request))
  }

  private async *events(call: ProviderCall, plan: DemoPlan): AsyncGenerator<ChatEvent> {
    const { request, signal } = call
    const budget = outputBudget(request)
    let spent = 0
    let block = 0
    let reasoningTokens: number | undefined
    const state = { truncated: false }
    const delay = this.tokenDelayMs
    /** Takes one token from the budget; false when it is exhausted (the turn then finishes `length`). */
    const take = async (): Promise<boolean> => {
      if (spent >= budget) {
        state.truncated = true
        return false
      }
      if (delay > 0) await Bun.sleep(delay)
      spent += 1
      return true
    }

    if (signal.aborted) return
    yield { type: 'response-start', id: `demo-${call.requestId}`, model: call.upstreamModel, createdAt: Date.now() }

    // A block starts only once its first token fits the budget, so no block is ever empty.
    if (plan.reasoning !== undefined) {
      const current = block
      let emitted = ''
      for (const token of words(plan.reasoning)) {
        if (!(await take())) break
        if (signal.aborted) return
        if (emitted === '') {
          block += 1
          yield { type: 'reasoning-start', block: current }
        }
        emitted += token
        yield { type: 'reasoning-delta', block: current, delta: token }
      }
      if (emitted !== '') {
        reasoningTokens = spent
        yield { type: 'reasoning-end', block: current, signature: signatureOf(emitted) }
      }
    }

    // The stop sequence that cut the text, reported with a `stop` finish as Anthropic does.
    let stopSequence: string | undefined
    if (plan.text !== undefined && !state.truncated) {
      const current = block
      let started = false
      const cut = cutAtStop(plan.text, request.sampling.stop)
      stopSequence = cut.sequence
      for (const token of words(cut.text)) {
        if (!(await take())) break
        if (signal.aborted) return
        if (!started) {
          started = true
          block += 1
          yield { type: 'text-start', block: current }
        }
        yield { type: 'text-delta', block: current, delta: token }
      }
      if (started) yield { type: 'text-end', block: current }
    }

    for (const toolCall of plan.toolCalls) {
      if (state.truncated || !(await take())) break
      if (signal.aborted) return
      const current = block++
      yield { type: 'tool-call-start', block: current, callId: toolCall.callId, name: toolCall.name }
      for (let offset = 0; offset < toolCall.arguments.length; offset += ARGUMENT_CHARACTERS_PER_TOKEN) {
        if (!(await take())) break
        if (signal.aborted) return
        yield { type: 'tool-call-delta', block: current, argumentsDelta: toolCall.arguments.slice(offset, offset + ARGUMENT_CHARACTERS_PER_TOKEN) }
      }
      yield { type: 'tool-call-end', block: current }
    }

    if (signal.aborted) return
    const reason: FinishReason = state.truncated ? 'length' : plan.toolCalls.length > 0 ? 'tool-calls' : 'stop'
    yield {
      type: 'finish',
      reason,
      ...(reason === 'stop' && stopSequence !== undefined ? { stopSequence } : {}),
      usage: {
        inputTokens: countInputTokens(request),
        outputTokens: spent,
        ...(reasoningTokens !== undefined ? { reasoningTokens } : {}),
        webSearchRequests: 0,
        webFetchRequests: 0,
      },
    }
  }
}

/** The request's output cap, else the route's (a route without one is unbounded). */
function outputBudget(request: ChatRequest): number {
  const requested = request.sampling.maxOutputTokens
  if (requested !== undefined) return Math.max(0, requested)
  return request.route.maxOutputTokens > 0 ? request.route.maxOutputTokens : Number.POSITIVE_INFINITY
}

/** Words as tokens, each with the whitespace before it, so the deltas concatenate to the text. */
function words(text: string): string[] {
  // A trailing run of whitespace is a token too: a stop sequence cuts after it, and an echo keeps it.
  return text.match(/\s*\S+|\s+$/g) ?? []
}

/** `text` up to the first occurrence of any stop sequence (empty sequences are ignored), and the sequence that cut it. */
function cutAtStop(text: string, stop: readonly string[] | undefined): { text: string; sequence: string | undefined } {
  let end = text.length
  let matched: string | undefined
  for (const sequence of stop ?? []) {
    if (sequence === '') continue
    const at = text.indexOf(sequence)
    if (at >= 0 && at < end) {
      end = at
      matched = sequence
    }
  }
  return { text: text.slice(0, end), sequence: matched }
}

/** A deterministic stand-in for a provider's reasoning signature: a hash of the reasoning shown. */
function signatureOf(reasoning: string): string {
  return `demo.${new Bun.CryptoHasher('sha256').update(reasoning).digest('base64url')}`
}
