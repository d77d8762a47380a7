import { type ApiError, openAIErrorBody } from '../../../http/errors'
import type { ChatEvent, FinishReason, Usage } from '../../canonical'
import { isWholeJson } from '../../tool-input'
import type { ResponseMeta, StreamEncoder } from '../types'
import { finishReason, usageObject } from './encode'

/**
 * A tool call written to the client: its argument text (undefined when its deltas went out as
 * pass-through frames, unread: it is then finished only by its end) and whether it ended.
 */
interface OpenCall {
  block: number
  text: string | undefined
  ended: boolean
}

/**
 * Chat Completions SSE chunks, as the official SDK parses them: a first chunk with the role,
 * content / reasoning_content / tool_calls deltas (tool calls numbered by `index` in order of
 * appearance), a chunk with finish_reason, a usage chunk with empty choices when
 * stream_options.include_usage is set, then `data: [DONE]`. With include_usage, every other
 * chunk carries `"usage":null`, as OpenAI documents and sends.
 *
 * Each tool call's deltas are contiguous, calls in index order, as OpenAI streams them: the
 * SDK's stream helper takes a delta of another index as the end of the call before it (its
 * `tool_calls.function.arguments.done`, which parses strict arguments). A Chat Completions
 * backend may interleave the arguments of parallel calls (index 0, 1, 0, 1…) and ends its calls
 * only at the finish. So a call that starts while the open one is unfinished (neither ended nor
 * whole JSON, isWholeJson) waits, with every event after it (`waiting`), until the open call is
 * finished; they are then written in order. A stream that does not interleave never waits (a
 * call's text is whole when the next starts), so its bytes are the same; one whose arguments are
 * never whole (a Python-style dict) gets the same bytes later, at the finish.
 */
export class ChatCompletionsStreamEncoder implements StreamEncoder {
  private readonly prefix: string
  /** What closes a chunk after its choices: `"usage":null` only when a usage chunk will follow. */
  private readonly suffix: string
  /** A chunk's text before and after its delta, built once per stream. */
  private readonly deltaHead: string
  private readonly deltaTail: string
  private readonly toolIndex = new Map<number, number>()
  /** The tool call written last. */
  private open: OpenCall | undefined
  /** Events held behind the open call, in order (the first is the start of a later call). */
  private waiting: ChatEvent[] | undefined

  constructor(private readonly meta: ResponseMeta) {
    // Every chunk shares id, object, created and model: serialise that part once.
    this.prefix = `{"id":${JSON.stringify(meta.id)},"object":"chat.completion.chunk","created":${meta.createdAt},"model":${JSON.stringify(meta.model)},"system_fingerprint":null,`
    this.suffix = meta.includeUsage ? ',"usage":null}\n\n' : '}\n\n'
    this.deltaHead = `data: ${this.prefix}"choices":[{"index":0,"delta":`
    this.deltaTail = `,"logprobs":null,"finish_reason":null}]${this.suffix}`
  }

  start(): string[] {
    return [this.chunk({ role: 'assistant', content: '' })]
  }

  push(event: ChatEvent): string[] {
    // The usage an upstream reported before its end is for the meter only (canonical.ts).
    if (event.type === 'usage') return []
    const waiting = this.waiting
    if (waiting !== undefined && !('block' in event && event.block === this.open!.block)) {
      waiting.push(event)
      return []
    }
    switch (event.type) {
      case 'text-delta':
        if (event.delta === '') return []
        return [this.chunk(event.refusal ? { refusal: event.delta } : { content: event.delta })]
      case 'reasoning-delta':
        return event.delta === '' ? [] : [this.chunk({ reasoning_content: event.delta })]
      case 'tool-call-start': {
        if (this.open !== undefined && !this.finished(this.open)) {
          this.waiting = [event]
          return []
        }
        const index = this.toolIndex.size
        this.toolIndex.set(event.block, index)
        this.open = { block: event.block, text: '', ended: false }
        return [this.chunk({ tool_calls: [{ index, id: event.callId, type: 'function', function: { name: event.name, arguments: '' } }] })]
      }
      case 'tool-call-delta': {
        const index = this.toolIndex.get(event.block)
        if (index === undefined || event.argumentsDelta === '') return []
        const frame = this.chunk({ tool_calls: [{ index, function: { arguments: event.argumentsDelta } }] })
        const open = this.open!
        if (open.block !== event.block || open.text === undefined) return [frame]
        open.text += event.argumentsDelta
        return waiting !== undefined && isWholeJson(open.text) ? [frame, ...this.release()] : [frame]
      }
      case 'tool-call-end': {
        if (this.open?.block !== event.block) return []
        this.open.ended = true
        return waiting !== undefined ? this.release() : []
      }
      case 'passthrough': {
        // Chunks passed through from a Chat Completions upstream: a frame per delta, which the
        // caller writes in one piece (one join, where concatenating them here built a rope first).
        // The pass-through never forwards a call while the one before it is unfinished
        // (pass-through.ts); its calls' text is not read here.
        if (event.format !== 'chat-completions') return []
        if (event.toolBlocks !== undefined) {
          for (const block of event.toolBlocks) this.toolIndex.set(block, this.toolIndex.size)
          this.open = { block: event.toolBlocks.at(-1)!, text: undefined, ended: false }
        }
        return event.deltas.map(delta => this.frame(delta))
      }
      default:
        return []
    }
  }

  finish(reason: FinishReason, usage: Usage): string[] {
    // Calls a provider left open end here, those that waited written after them.
    const frames: string[] = []
    while (this.waiting !== undefined) {
      this.open!.ended = true
      frames.push(...this.release())
    }
    frames.push(`data: ${this.prefix}"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":${JSON.stringify(finishReason(reason))}}]${this.suffix}`)
    if (this.meta.includeUsage) frames.push(`data: ${this.prefix}"choices":[],"usage":${JSON.stringify(usageObject(usage, this.meta.serverToolUse))}}\n\n`)
    frames.push('data: [DONE]\n\n')
    return frames
  }

  /** The open call is finished: the events that waited behind it, in order (one may open the next wait). */
  private release(): string[] {
    const waiting = this.waiting!
    this.waiting = undefined
    const frames: string[] = []
    for (const event of waiting) frames.push(...this.push(event))
    return frames
  }

  private finished(open: OpenCall): boolean {
    return open.ended || (open.text !== undefined && isWholeJson(open.text))
  }

  /** The events waiting behind the open call: a stream that ends before the finish never writes them. */
  unsent(): ChatEvent[] {
    return this.waiting ?? []
  }

  /**
   * A mid-stream failure: OpenAI's in-band error object (the same envelope, type included, as
   * the HTTP error of that code), then the terminator.
   */
  fail(error: ApiError): string[] {
    return [`data: ${JSON.stringify(openAIErrorBody(error))}\n\n`, 'data: [DONE]\n\n']
  }

  private chunk(delta: Record<string, unknown>): string {
    return this.frame(JSON.stringify(delta))
  }

  /** One chunk around a delta's JSON text. */
  private frame(delta: string): string {
    return this.deltaHead + delta + this.deltaTail
  }
}
