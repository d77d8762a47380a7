import type { ApiError } from '../../http/errors'
import type { ChatEvent, FinishDetail, FinishReason, PassThroughFormat, Usage } from '../canonical'
import type { ChatResult } from '../collect'

/** What every response of one request shares. */
export interface ResponseMeta {
  id: string
  /** The model id as the client asked for it. */
  model: string
  createdAt: number
  /** Chat Completions' stream_options.include_usage. */
  includeUsage: boolean
  /** The gateway's own estimate of the prompt, for formats that announce it before the upstream reports it (Messages' message_start). */
  estimatedInputTokens: number
  /** Hosted web tools were enabled: usage reports server_tool_use even when they ran nothing. */
  serverToolUse?: boolean
}

/**
 * A dialect's stream encoder: pure, one per response, golden-tested. Returns whole SSE frames.
 * `finish` and `fail` produce the terminal frames, which the pipeline writes only after the
 * settlement committed.
 */
export interface StreamEncoder {
  start(): string[]
  push(event: ChatEvent): string[]
  finish(reason: FinishReason, usage: Usage, detail?: FinishDetail): string[]
  fail(error: ApiError): string[]
  /**
   * The output it holds back and has not written (a tool call waiting behind an unfinished one,
   * arguments kept for their block's end), as events: a stream that fails or is left drops it,
   * so it is not charged as sent (Meter.withdraw). Read only then; absent: nothing is held.
   */
  unsent?(): Iterable<ChatEvent>
  /** The keep-alive frame for long gaps, when the format has one of its own (default: an SSE comment). */
  readonly ping?: Uint8Array
}

/** The response side of a client format. */
export interface DialectEncoder {
  /** How response ids start (`chatcmpl-`, `msg_`); the rest is a fresh UUIDv7. */
  idPrefix: string
  encode(result: ChatResult, usage: Usage, meta: ResponseMeta): unknown
  streamEncoder(meta: ResponseMeta): StreamEncoder
  /** The stream encoder reads `passthrough` events of this format: streamed calls ask providers for them. */
  passThrough?: PassThroughFormat
}
