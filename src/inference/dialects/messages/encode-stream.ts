import { anthropicErrorBody, type ApiError } from '../../../http/errors'
import type { ChatEvent, FinishDetail, FinishReason, Usage } from '../../canonical'
import { parseToolInput } from '../../tool-input'
import type { ResponseMeta, StreamEncoder } from '../types'
import { stopReason, usageObject } from './encode'

const PING = 'event: ping\ndata: {"type":"ping"}\n\n'
const PING_BYTES = new TextEncoder().encode(PING)

const frame = (type: string, data: string) => `event: ${type}\ndata: ${data}\n\n`
const TEXT_BLOCK = '{"type":"text","text":""}'
const THINKING_BLOCK = '{"type":"thinking","thinking":"","signature":""}'

interface Block {
  /** The Anthropic content index, assigned when content_block_start is written. */
  index: number
  readonly kind: 'text' | 'reasoning' | 'tool'
  started: boolean
  stopped: boolean
  /**
   * A tool block's argument text, held for its end: undefined while the provider's deltas are
   * forwarded as they come (`jsonObject`, see the class comment).
   */
  held?: string
}

/**
 * Anthropic Messages SSE, as `@anthropic-ai/sdk`'s MessageStream accumulates it: message_start
 * (usage.input_tokens), a ping, then one content block at a time (content_block_start, its
 * deltas, content_block_stop) numbered 0, 1, 2… in order, then message_delta (stop_reason,
 * stop_sequence, usage with output_tokens and the final input counts) and message_stop. An
 * upstream failure is Anthropic's in-band `event: error`.
 *
 * - message_start waits for the upstream's first event (as Anthropic's own stream does) so it
 *   can carry the upstream's input count when reported up front (Anthropic); otherwise it
 *   carries the gateway's estimate, and message_delta carries the reported count, which the SDK
 *   writes over the estimate.
 * - A reasoning block's start is written at its first delta or its end: only then is it known
 *   whether it is a `thinking` block or a `redacted_thinking` one (whose data arrives at the end).
 *   Its signature goes out as one signature_delta just before content_block_stop.
 * - A new block stops the open one, so blocks never interleave (the SDK reports the last block
 *   started as the one a content_block_stop ends). An open tool block is the exception: it is
 *   stopped only by its tool-call-end, and the events of other blocks wait behind it (`waiting`),
 *   then are written in order. A Chat Completions backend may interleave the arguments of
 *   parallel calls (its deltas carry an index) and ends its calls only at the finish, so a
 *   block stopped when the next one starts could still get arguments after its stop. An
 *   Anthropic backend may open a tool block while a text or thinking block is open (Anthropic
 *   sends one at a time; a compatible server may not): the tool block's start stops that one,
 *   and its events that waited go into a new block with the next index (`block`), as a Chat
 *   Completions backend's text after a call does.
 * - A tool block's input must be a JSON object, and the text its deltas accumulate to must be
 *   the one the non-streamed reply gives (tool-input.ts): a Chat Completions backend's
 *   arguments may be anything (`{'city': 'Oslo'}` from small models, a bare array, JSON cut by
 *   a length stop), which the SDK's partial-JSON parser rejects or takes as a non-object. Only
 *   the whole text tells: a valid object prefix can still be cut, so streaming while the prefix
 *   is valid could not keep that promise. Such a block's arguments are held and written at its
 *   end as one input_json_delta of the normalised object (the block itself starts on time). An
 *   Anthropic backend's input_json_delta (`jsonObject`) is forwarded as it comes, as Anthropic
 *   streams it.
 */
export class MessagesStreamEncoder implements StreamEncoder {
  readonly ping = PING_BYTES
  private readonly blocks = new Map<number, Block>()
  private current: Block | undefined
  /** Events of other blocks that came while a tool block was open (current), in order. */
  private waiting: ChatEvent[] | undefined
  private nextIndex = 0
  private started = false

  constructor(private readonly meta: ResponseMeta) {}

  start(): string[] {
    return []
  }

  push(event: ChatEvent): string[] {
    // The usage an upstream reported before its end is for the meter only (canonical.ts).
    if (event.type === 'usage') return []
    const out: string[] = []
    if (event.type === 'response-start') {
      this.messageStart(out, event)
      return out
    }
    this.messageStart(out, undefined)
    this.handle(event, out)
    return out
  }

  private handle(event: ChatEvent, out: string[]): void {
    const current = this.current
    if (current !== undefined && current.kind === 'tool' && 'block' in event && this.blocks.get(event.block) !== current) {
      ;(this.waiting ??= []).push(event)
      return
    }
    switch (event.type) {
      case 'text-start':
        this.begin(out, this.block(event.block, 'text'), TEXT_BLOCK)
        break
      case 'text-delta': {
        if (event.delta === '') break
        const block = this.block(event.block, 'text')
        if (!block.started) this.begin(out, block, TEXT_BLOCK)
        out.push(this.delta(block, `{"type":"text_delta","text":${JSON.stringify(event.delta)}}`))
        break
      }
      case 'text-end': {
        const block = this.blocks.get(event.block)
        if (block !== undefined) this.stop(out, block)
        break
      }
      case 'tool-call-end': {
        const block = this.blocks.get(event.block)
        if (block === undefined) break
        this.stop(out, block)
        this.release(out)
        break
      }
      case 'reasoning-start':
        this.block(event.block, 'reasoning')
        break
      case 'reasoning-delta': {
        if (event.delta === '') break
        const block = this.block(event.block, 'reasoning')
        if (!block.started) this.begin(out, block, THINKING_BLOCK)
        out.push(this.delta(block, `{"type":"thinking_delta","thinking":${JSON.stringify(event.delta)}}`))
        break
      }
      case 'reasoning-end': {
        // A block a tool block's start stopped (see the class comment): an end with nothing to
        // write opens no new one.
        if (!event.signature && this.blocks.get(event.block)?.stopped) break
        const block = this.block(event.block, 'reasoning')
        if (event.redacted) {
          // Redacted blocks have no deltas: the whole block is its start.
          if (!block.started) this.begin(out, block, `{"type":"redacted_thinking","data":${JSON.stringify(event.signature ?? '')}}`)
        } else {
          if (!block.started) this.begin(out, block, THINKING_BLOCK)
          if (event.signature) out.push(this.delta(block, `{"type":"signature_delta","signature":${JSON.stringify(event.signature)}}`))
        }
        this.stop(out, block)
        break
      }
      case 'tool-call-start': {
        const block = this.block(event.block, 'tool')
        if (event.jsonObject !== true) block.held = ''
        this.begin(out, block, `{"type":"tool_use","id":${JSON.stringify(event.callId)},"name":${JSON.stringify(event.name)},"input":{}}`)
        break
      }
      case 'tool-call-delta': {
        const block = this.blocks.get(event.block)
        if (block === undefined || event.argumentsDelta === '') break
        if (block.held !== undefined) block.held += event.argumentsDelta
        else out.push(this.delta(block, `{"type":"input_json_delta","partial_json":${JSON.stringify(event.argumentsDelta)}}`))
        break
      }
      case 'passthrough': {
        // An Anthropic upstream's delta frames, already as this encoder writes them (the deltas
        // above, block by block); only the index may differ, when the upstream had blocks this
        // stream leaves out. `"type":"content_block_delta","index":N,` begins each frame's data
        // and cannot occur inside a literal (its quotes would be escaped).
        if (event.format !== 'messages') break
        const block = event.kind === 'tool' ? this.blocks.get(event.block) : this.block(event.block, event.kind)
        if (block === undefined) break
        if (!block.started && event.kind !== 'tool') this.begin(out, block, event.kind === 'text' ? TEXT_BLOCK : THINKING_BLOCK)
        out.push(
          block.index === event.index
            ? event.frames
            : event.frames.replaceAll(`"type":"content_block_delta","index":${event.index},`, `"type":"content_block_delta","index":${block.index},`),
        )
        break
      }
    }
  }

  /** After a tool block's stop: the events that waited behind it, in order (one may open the next tool block). */
  private release(out: string[]): void {
    const waiting = this.waiting
    if (waiting === undefined) return
    this.waiting = undefined
    for (const event of waiting) this.handle(event, out)
  }

  finish(reason: FinishReason, usage: Usage, detail: FinishDetail = {}): string[] {
    const out: string[] = []
    this.messageStart(out, undefined)
    // Blocks a provider left open stop here, a tool block's waiting events written after it.
    while (this.current !== undefined) {
      this.stop(out, this.current)
      this.release(out)
    }
    const sequence = reason === 'stop' && detail.stopSequence !== undefined ? JSON.stringify(detail.stopSequence) : 'null'
    out.push(
      frame(
        'message_delta',
        `{"type":"message_delta","delta":{"stop_reason":${JSON.stringify(stopReason(reason, detail))},"stop_sequence":${sequence}},"usage":${JSON.stringify(usageObject(usage, this.meta.serverToolUse))}}`,
      ),
    )
    out.push(frame('message_stop', '{"type":"message_stop"}'))
    return out
  }

  /** The events waiting behind a tool block, and the arguments of tool blocks not yet stopped (held for their stop). */
  unsent(): ChatEvent[] {
    const unsent: ChatEvent[] = []
    for (const [canonical, block] of this.blocks) {
      if (block.held !== undefined && block.held !== '' && !block.stopped) unsent.push({ type: 'tool-call-delta', block: canonical, argumentsDelta: block.held })
    }
    if (this.waiting !== undefined) for (const event of this.waiting) unsent.push(event)
    return unsent
  }

  /** A mid-stream failure: Anthropic's in-band error event; the SDK raises it as an APIError. */
  fail(error: ApiError): string[] {
    return [frame('error', JSON.stringify(anthropicErrorBody(error)))]
  }

  /**
   * The prompt's size when the upstream reported it up front, in Anthropic's convention (as
   * message_delta and the non-streamed reply write it: input_tokens excludes cache reads).
   */
  private messageStart(out: string[], { inputTokens, cachedInputTokens, cacheWriteInputTokens, cacheWrite1hInputTokens }: Partial<Extract<ChatEvent, { type: 'response-start' }>> = {}): void {
    if (this.started) return
    this.started = true
    const message = {
      id: this.meta.id,
      type: 'message',
      role: 'assistant',
      model: this.meta.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: inputTokens === undefined
        ? { input_tokens: this.meta.estimatedInputTokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 }
        : usageObject({ inputTokens, cachedInputTokens, cacheWriteInputTokens, cacheWrite1hInputTokens, outputTokens: 0, webSearchRequests: 0, webFetchRequests: 0 }),
    }
    out.push(frame('message_start', JSON.stringify({ type: 'message_start', message })), PING)
  }

  /** The block of a text or reasoning event: a new one after a stop (see the class comment). */
  private block(canonical: number, kind: Block['kind']): Block {
    let block = this.blocks.get(canonical)
    if (block === undefined || block.kind !== kind || block.stopped) {
      block = { index: -1, kind, started: false, stopped: false }
      this.blocks.set(canonical, block)
    }
    return block
  }

  private begin(out: string[], block: Block, contentBlock: string): void {
    if (block.started) return
    if (this.current !== undefined && this.current !== block) this.stop(out, this.current)
    block.started = true
    block.index = this.nextIndex++
    this.current = block
    out.push(frame('content_block_start', `{"type":"content_block_start","index":${block.index},"content_block":${contentBlock}}`))
  }

  private delta(block: Block, delta: string): string {
    return frame('content_block_delta', `{"type":"content_block_delta","index":${block.index},"delta":${delta}}`)
  }

  private stop(out: string[], block: Block): void {
    if (!block.started || block.stopped) return
    block.stopped = true
    // Held arguments, normalised as the non-streamed reply's input (no text: the start's {}).
    if (block.held !== undefined && block.held !== '') {
      out.push(this.delta(block, `{"type":"input_json_delta","partial_json":${JSON.stringify(JSON.stringify(parseToolInput(block.held)))}}`))
    }
    if (this.current === block) this.current = undefined
    out.push(frame('content_block_stop', `{"type":"content_block_stop","index":${block.index}}`))
  }
}
