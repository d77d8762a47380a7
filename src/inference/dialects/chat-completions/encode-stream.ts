import { type ApiError, openAIErrorBody } from '../../../http/errors'
import type { ChatEvent, FinishReason, Usage } from '../../canonical'
import type { ResponseMeta, StreamEncoder } from '../types'
import { finishReason, usageObject } from './encode'

/**
 * Chat Completions SSE chunks, as the official SDK parses them: a first chunk with the role,
 * content / reasoning_content / tool_calls deltas (tool calls numbered by `index` in order of
 * appearance), a chunk with finish_reason, a usage chunk with empty choices when
 * stream_options.include_usage is set, then `data: [DONE]`. With include_usage, every other
 * chunk carries `"usage":null`, as OpenAI documents and sends.
 */
export class ChatCompletionsStreamEncoder implements StreamEncoder {
  private readonly prefix: string
  /** What closes a chunk after its choices: `"usage":null` only when a usage chunk will follow. */
  private readonly suffix: string
  /** A chunk's text before and after its delta, built once per stream. */
  private readonly deltaHead: string
  private readonly deltaTail: string
  private readonly toolIndex = new Map<number, number>()

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
    switch (event.type) {
      case 'text-delta':
        if (event.delta === '') return []
        return [this.chunk(event.refusal ? { refusal: event.delta } : { content: event.delta })]
      case 'reasoning-delta':
        return event.delta === '' ? [] : [this.chunk({ reasoning_content: event.delta })]
      case 'tool-call-start': {
        const index = this.toolIndex.size
        this.toolIndex.set(event.block, index)
        return [this.chunk({ tool_calls: [{ index, id: event.callId, type: 'function', function: { name: event.name, arguments: '' } }] })]
      }
      case 'tool-call-delta': {
        const index = this.toolIndex.get(event.block)
        if (index === undefined || event.argumentsDelta === '') return []
        return [this.chunk({ tool_calls: [{ index, function: { arguments: event.argumentsDelta } }] })]
      }
      case 'passthrough': {
        // Chunks passed through from a Chat Completions upstream: a frame per delta, which the
        // caller writes in one piece (one join, where concatenating them here built a rope first).
        if (event.format !== 'chat-completions') return []
        if (event.toolBlocks !== undefined) for (const block of event.toolBlocks) this.toolIndex.set(block, this.toolIndex.size)
        return event.deltas.map(delta => this.frame(delta))
      }
      default:
        return []
    }
  }

  finish(reason: FinishReason, usage: Usage): string[] {
    const frames = [`data: ${this.prefix}"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":${JSON.stringify(finishReason(reason))}}]${this.suffix}`]
    if (this.meta.includeUsage) frames.push(`data: ${this.prefix}"choices":[],"usage":${JSON.stringify(usageObject(usage, this.meta.serverToolUse))}}\n\n`)
    frames.push('data: [DONE]\n\n')
    return frames
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
