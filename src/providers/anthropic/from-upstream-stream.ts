import type { ChatEvent } from '../../inference/canonical'
import type { SseEvent } from '../../http/sse'
import type { UpstreamError } from '../types'
import { errorFromStreamEvent, protocolError, type ErrorContext } from './errors'
import { mapFinishReason } from './map-finish-reason'
import { UsageCounts, type AnthropicUsage } from './usage-counts'

/**
 * A `reasoning-end` for an Anthropic `redacted_thinking` block: the opaque, encrypted `data`
 * travels in `signature`, and `redacted` tells a dialect to replay it as a reasoning part with
 * `redacted: true`. It is a subtype of the canonical event (which has no `redacted` flag yet),
 * so consumers that do not know the flag see a signed, empty reasoning block.
 */
export type RedactedReasoningEnd = Extract<ChatEvent, { type: 'reasoning-end' }> & { readonly redacted: true }

/** The `message` of message_start: a Message with empty content. */
interface MessageStart {
  id?: unknown
  model?: unknown
  usage?: AnthropicUsage
}

type OpenBlock =
  | { readonly kind: 'text'; readonly block: number }
  | { readonly kind: 'reasoning'; readonly block: number; signature: string }
  | { readonly kind: 'redacted'; readonly block: number; readonly data: string }
  /** `input`: whether any argument text was emitted (or forwarded) for the call. */
  | { readonly kind: 'tool'; readonly block: number; input: boolean }

/**
 * Anthropic SSE events → canonical ChatEvents, one decoded SSE event at a time. Pure: no I/O,
 * no timers. Protocol (https://docs.anthropic.com/en/api/messages-streaming): message_start,
 * then content blocks (content_block_start, deltas, content_block_stop) keyed by `index`, then
 * message_delta (stop_reason, cumulative usage) and message_stop; `ping` anywhere; an `error`
 * event may replace the rest. Unknown events and block types are ignored, as Anthropic's
 * versioning policy asks.
 *
 * Usage: Anthropic's `input_tokens` excludes cache reads and cache writes. Canonical
 * `inputTokens` counts every prompt token, so it is input + cache_read + cache_creation, and
 * `cachedInputTokens` is cache_read (priced at the cached-input rate), `cacheWriteInputTokens`
 * cache_creation (told back to Messages clients), priced at the model's cache-write price for
 * its lifetime: `cacheWrite1hInputTokens` is cache_creation.ephemeral_1h_input_tokens. An
 * upstream that reports writes without that split (a compatible server, an older API) has them
 * read at the dearer of the lifetimes the request's hints allow (`unsplitWritesHour`): 1-hour
 * ones only when it set a 1-hour hint and the 1-hour write price is not the cheaper, so the
 * gateway never charges less than the upstream may. Thinking tokens are part of `output_tokens`; Anthropic does not report them
 * apart, so `reasoningTokens` stays undefined.
 *
 * Output: only message_delta's `output_tokens` is the answer's count. message_start carries a
 * placeholder (`output_tokens: 1`, before anything was generated), so it is not read: an answer
 * whose message_delta has no valid count reports 0 output tokens, which the meter reads as
 * unreported and replaces with its count of the output sent (QA: a long answer whose
 * message_delta had no usage was billed 1 output token). message_delta comes after the last
 * content block, so its count covers the whole answer: a stream cut after it carries it on its
 * error event (UsageCounts.reported), and is billed it.
 */
export class AnthropicStreamTranslator {
  /** True after message_stop or an error event: nothing more will be emitted. */
  done = false
  private readonly blocks = new Map<number, OpenBlock>()
  private nextBlock = 0
  private started = false
  private stopReason: string | null | undefined
  private stopSequence: string | undefined
  private readonly usage: UsageCounts
  /** The ids of this answer's tool calls: a client pairs results by id, so no two calls share one. */
  private readonly callIds = new Set<string>()

  constructor(
    private readonly context: ErrorContext,
    private readonly now: () => number,
    /** Makes up the ids a compatible upstream omits or repeats. */
    private readonly requestId: string,
    /**
     * Writes reported without their lifetime are read as 1-hour ones: the request set a 1-hour
     * hint and the model's 1-hour write price is not below its 5-minute one (cache-ttl.ts).
     */
    unsplitWritesHour = false,
  ) {
    this.usage = new UsageCounts(unsplitWritesHour)
  }

  /** The events for one SSE event (often none or one). */
  push(sse: SseEvent): ChatEvent[] {
    if (this.done) return []
    let payload: Record<string, unknown> | null
    try {
      payload = JSON.parse(sse.data) as Record<string, unknown> | null
    } catch {
      payload = null
    }
    if (typeof payload !== 'object' || payload === null) {
      return this.fail(protocolError(`Anthropic sent an event that is not a JSON object (${sse.event ?? 'message'})`, this.context))
    }
    // The data's `type` is authoritative; the SSE event name repeats it.
    const type = typeof payload.type === 'string' ? payload.type : sse.event
    if (type === 'message_start') return this.messageStart(payload.message as MessageStart | undefined)
    if (type === 'error') return this.fail(errorFromStreamEvent(sse.data, this.context))
    if (type === 'ping') return []
    const events = this.dispatch(type, payload)
    if (this.started || events.length === 0) return events
    // A compatible server that skipped message_start still yields a well-formed canonical stream.
    return [...this.messageStart(undefined), ...events]
  }

  /**
   * A whole Messages answer (`stream: false`, the JSON text) as the events its stream would
   * have produced: the same blocks in order, usage, stop reason and stop sequence. A tool call's
   * input comes as one compact JSON text (a stream sends JSON in pieces). An `error` object
   * gives the error event a stream's `error` event would.
   */
  message(text: string): ChatEvent[] {
    if (this.done) return []
    let message: Record<string, unknown> | null
    try {
      message = JSON.parse(text) as Record<string, unknown> | null
    } catch {
      message = null
    }
    if (typeof message !== 'object' || message === null) return this.fail(protocolError('Anthropic answered 2xx with malformed JSON', this.context))
    if (message.type === 'error') return this.fail(errorFromStreamEvent(text, this.context))
    if (!Array.isArray(message.content)) return this.fail(protocolError('Anthropic answered 2xx without content', this.context))
    const events = this.messageStart(message as MessageStart)
    message.content.forEach((block: unknown, index: number) => {
      if (typeof block !== 'object' || block === null) return
      events.push(...this.blockStart(index, block as Record<string, unknown>), ...this.blockStop(index))
    })
    this.dispatch('message_delta', { delta: { stop_reason: message.stop_reason, stop_sequence: message.stop_sequence }, usage: message.usage })
    events.push(...this.finish())
    return events
  }

  private dispatch(type: string | undefined, payload: Record<string, unknown>): ChatEvent[] {
    // Content after the message_delta that stopped the answer (a broken upstream) is not output:
    // that delta's count is what is billed, as a Chat Completions delta after its finish_reason.
    if (this.stopReason !== undefined && type !== undefined && type.startsWith('content_block_')) return []
    switch (type) {
      case 'content_block_start':
        return this.blockStart(payload.index as number, payload.content_block as Record<string, unknown> | undefined)
      case 'content_block_delta':
        return this.blockDelta(payload.index as number, payload.delta as Record<string, unknown> | undefined)
      case 'content_block_stop':
        return this.blockStop(payload.index as number)
      case 'message_delta': {
        const delta = payload.delta as { stop_reason?: string | null; stop_sequence?: string | null } | undefined
        if (delta?.stop_reason !== undefined && delta.stop_reason !== null) this.stopReason = delta.stop_reason
        if (typeof delta?.stop_sequence === 'string') this.stopSequence = delta.stop_sequence
        this.usage.add(payload.usage as AnthropicUsage | undefined, true)
        // Its counts cover the whole answer: told to the meter now, so a call that ends before
        // message_stop (the client left) is billed them, as a cut one is (errorEvent).
        const usage = this.usage.reported
        return usage === undefined ? [] : [{ type: 'usage', usage }]
      }
      case 'message_stop':
        return this.finish()
      default:
        return [] // event types added after this adapter was written
    }
  }

  /**
   * The canonical block and kind of the content block open at an upstream `index` (a redacted
   * thinking block is `redacted`), or undefined. The pass-through forwards a delta only into a
   * block of the kind the delta would have produced events for.
   */
  openBlock(index: number): { readonly kind: OpenBlock['kind']; readonly block: number } | undefined {
    return this.done || this.stopReason !== undefined ? undefined : this.blocks.get(index)
  }

  /**
   * The pass-through forwarded argument text of the tool call open at `index` (the translator did
   * not see it). Never whitespace alone: that comes through blockDelta, which knows it is no input.
   */
  inputForwarded(index: number): void {
    const open = this.blocks.get(index)
    if (open?.kind === 'tool') open.input = true
  }

  /** The stream's bytes ended: anything short of message_stop is a truncated answer. */
  end(): ChatEvent[] {
    if (this.done) return []
    return this.fail(protocolError('The Anthropic stream ended before message_stop', this.context))
  }

  private messageStart(message: MessageStart | undefined): ChatEvent[] {
    if (this.started) return []
    this.started = true
    // Its output_tokens is a placeholder (see the class comment): the input side only.
    this.usage.add(message?.usage, false)
    const start: ChatEvent = { type: 'response-start', id: String(message?.id ?? ''), model: String(message?.model ?? this.context.model), createdAt: this.now() }
    // message_start reports the prompt size up front; dialects that announce it early use it.
    if (typeof message?.usage?.input_tokens === 'number') {
      const usage = this.usage.canonical()
      start.inputTokens = usage.inputTokens
      if (usage.cachedInputTokens) start.cachedInputTokens = usage.cachedInputTokens
      if (usage.cacheWriteInputTokens) start.cacheWriteInputTokens = usage.cacheWriteInputTokens
      if (usage.cacheWrite1hInputTokens) start.cacheWrite1hInputTokens = usage.cacheWrite1hInputTokens
    }
    return [start]
  }

  private blockStart(index: number, content: Record<string, unknown> | undefined): ChatEvent[] {
    if (typeof index !== 'number' || content === undefined || this.blocks.has(index)) return []
    const events: ChatEvent[] = []
    switch (content.type) {
      case 'text': {
        const block = this.open(index, { kind: 'text', block: this.nextBlock })
        events.push({ type: 'text-start', block })
        if (typeof content.text === 'string' && content.text !== '') events.push({ type: 'text-delta', block, delta: content.text })
        break
      }
      case 'thinking': {
        const signature = typeof content.signature === 'string' ? content.signature : ''
        const block = this.open(index, { kind: 'reasoning', block: this.nextBlock, signature })
        events.push({ type: 'reasoning-start', block })
        if (typeof content.thinking === 'string' && content.thinking !== '') events.push({ type: 'reasoning-delta', block, delta: content.thinking })
        break
      }
      case 'redacted_thinking': {
        const data = typeof content.data === 'string' ? content.data : ''
        events.push({ type: 'reasoning-start', block: this.open(index, { kind: 'redacted', block: this.nextBlock, data }) })
        break
      }
      case 'tool_use': {
        const open: OpenBlock = { kind: 'tool', block: this.nextBlock, input: false }
        const block = this.open(index, open)
        events.push({ type: 'tool-call-start', block, callId: this.callId(content.id, block), name: String(content.name ?? ''), jsonObject: true })
        // Streams start tool_use with `input: {}` and send the JSON as deltas; a non-empty
        // start input (never seen, but allowed by the block shape) is passed on whole.
        const input = content.input
        if (typeof input === 'object' && input !== null && Object.keys(input).length > 0) {
          events.push({ type: 'tool-call-delta', block, argumentsDelta: JSON.stringify(input) })
          open.input = true
        }
        break
      }
      default:
        break // server tool blocks and future types: not ours to surface
    }
    return events
  }

  /**
   * A tool call's id: the upstream's, unless it gave none or another call of this answer has it
   * (Anthropic never does; a compatible server may): then one made up, stable for the request.
   */
  private callId(id: unknown, block: number): string {
    let callId = typeof id === 'string' && id !== '' ? id : undefined
    for (let suffix = block; callId === undefined || this.callIds.has(callId); suffix += 1) callId = `toolu_${this.requestId}_${suffix}`
    this.callIds.add(callId)
    return callId
  }

  private blockDelta(index: number, delta: Record<string, unknown> | undefined): ChatEvent[] {
    const open = this.blocks.get(index)
    if (open === undefined || delta === undefined) return []
    switch (delta.type) {
      case 'text_delta':
        return open.kind === 'text' && typeof delta.text === 'string' && delta.text !== '' ? [{ type: 'text-delta', block: open.block, delta: delta.text }] : []
      case 'thinking_delta':
        return open.kind === 'reasoning' && typeof delta.thinking === 'string' && delta.thinking !== ''
          ? [{ type: 'reasoning-delta', block: open.block, delta: delta.thinking }]
          : []
      case 'signature_delta':
        // Sent once, just before content_block_stop; it rides on reasoning-end.
        if (open.kind === 'reasoning' && typeof delta.signature === 'string') open.signature += delta.signature
        return []
      case 'input_json_delta':
        if (open.kind !== 'tool' || typeof delta.partial_json !== 'string' || delta.partial_json === '') return []
        // JSON whitespace alone is no input yet: the block's end still adds "{}". Only JSON's four
        // (as the pass-through's BLANK): a form feed or U+00A0 is input, invalid as it is.
        if (/[^ \t\n\r]/.test(delta.partial_json)) open.input = true
        return [{ type: 'tool-call-delta', block: open.block, argumentsDelta: delta.partial_json }]
      default:
        return [] // citations_delta and future delta types
    }
  }

  private blockStop(index: number): ChatEvent[] {
    const open = this.blocks.get(index)
    if (open === undefined) return []
    this.blocks.delete(index)
    return this.endEvents(open)
  }

  /**
   * A block's end. A tool call that got no argument text (or only whitespace) had the input {} (Anthropic's
   * tool_use.input is always an object): its arguments are "{}", never the empty text a Chat
   * Completions or Responses client cannot JSON.parse.
   */
  private endEvents(open: OpenBlock): ChatEvent[] {
    if (open.kind !== 'tool' || open.input) return [this.endEvent(open)]
    return [{ type: 'tool-call-delta', block: open.block, argumentsDelta: '{}' }, this.endEvent(open)]
  }

  private endEvent(open: OpenBlock): ChatEvent {
    switch (open.kind) {
      case 'text':
        return { type: 'text-end', block: open.block }
      case 'reasoning':
        return open.signature === '' ? { type: 'reasoning-end', block: open.block } : { type: 'reasoning-end', block: open.block, signature: open.signature }
      case 'redacted': {
        const event: RedactedReasoningEnd = { type: 'reasoning-end', block: open.block, signature: open.data, redacted: true }
        return event
      }
      case 'tool':
        return { type: 'tool-call-end', block: open.block }
    }
  }

  private finish(): ChatEvent[] {
    this.done = true
    // Blocks are always stopped before message_stop; close any left open so consumers see pairs.
    const events: ChatEvent[] = [...this.blocks.values()].sort((a, b) => a.block - b.block).flatMap(open => this.endEvents(open))
    this.blocks.clear()
    const finish: ChatEvent = { type: 'finish', reason: mapFinishReason(this.stopReason), usage: this.usage.canonical() }
    if (this.stopReason === 'stop_sequence' && this.stopSequence !== undefined) finish.stopSequence = this.stopSequence
    if (this.stopReason === 'model_context_window_exceeded') finish.contextWindowExceeded = true
    events.push(finish)
    return events
  }

  private fail(error: UpstreamError): ChatEvent[] {
    this.done = true
    return [this.errorEvent(error)]
  }

  /** The error event of a stream that failed here, with the usage reported before it (see UsageCounts.reported). */
  errorEvent(error: UpstreamError): ChatEvent {
    const failed: ChatEvent = { type: 'error', error }
    const usage = this.usage.reported
    if (usage !== undefined) failed.usage = usage
    return failed
  }

  private open(index: number, block: OpenBlock): number {
    this.blocks.set(index, block)
    this.nextBlock += 1
    return block.block
  }
}
