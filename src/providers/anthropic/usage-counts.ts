import type { Usage } from '../../inference/canonical'
import { tokenCount } from '../token-count'

/** Anthropic's usage object; every field optional because message_delta repeats only some. */
export interface AnthropicUsage {
  input_tokens?: number | null
  output_tokens?: number | null
  cache_read_input_tokens?: number | null
  cache_creation_input_tokens?: number | null
  /** The writes by lifetime; `cache_creation_input_tokens` is their sum. */
  cache_creation?: { ephemeral_5m_input_tokens?: number | null; ephemeral_1h_input_tokens?: number | null } | null
}

const INPUT_KEYS = ['input_tokens', 'cache_read_input_tokens', 'cache_creation_input_tokens'] as const
const USAGE_KEYS = [...INPUT_KEYS, 'output_tokens'] as const

/**
 * The counts one Anthropic stream reported (message_start's, then message_delta's), as canonical
 * usage (AnthropicStreamTranslator explains the mapping).
 */
export class UsageCounts {
  private readonly counts: Record<(typeof USAGE_KEYS)[number], number> = {
    input_tokens: 0,
    output_tokens: 0,
    cache_read_input_tokens: 0,
    cache_creation_input_tokens: 0,
  }
  private cacheReadReported = false
  /** cache_creation.ephemeral_1h_input_tokens, when the upstream split its writes by lifetime. */
  private cacheWriteHour: number | undefined
  /** Whether the upstream reported any count yet (message_start's input, message_delta's usage). */
  private anyReported = false

  /** `unsplitWritesHour`: writes reported without their lifetime are read as 1-hour ones. */
  constructor(private readonly unsplitWritesHour: boolean) {}

  /**
   * message_start carries the input side; message_delta's counts are cumulative, so they replace,
   * except an input-side count below the one already known: cumulative counts never fall, and
   * relays write 0 there for "not repeated" (QA: a finished stream was then billed the gateway's
   * estimate, not the announced input). `output`: whether this usage's output_tokens is the
   * answer's count (message_delta's, not message_start's placeholder). A count that is not a
   * valid number is ignored.
   */
  add(usage: AnthropicUsage | undefined, output: boolean): void {
    if (typeof usage !== 'object' || usage === null) return
    for (const key of output ? USAGE_KEYS : INPUT_KEYS) {
      const value = tokenCount(usage[key])
      if (output && key !== 'output_tokens' && value !== undefined && value < (this.counts[key] ?? 0)) continue
      if (value !== undefined) {
        this.counts[key] = value
        this.anyReported = true
        if (key === 'cache_read_input_tokens') this.cacheReadReported = true
      }
    }
    const hour = typeof usage.cache_creation === 'object' && usage.cache_creation !== null ? tokenCount(usage.cache_creation.ephemeral_1h_input_tokens) : undefined
    if (hour !== undefined && !(output && hour < (this.cacheWriteHour ?? 0))) this.cacheWriteHour = hour
  }

  /**
   * The usage reported so far, for the error event of a stream cut before message_stop (the
   * provider's too, on a transport failure): message_start's input counts, and, once message_delta
   * came, its output count (0 before: the meter counts the output sent). Undefined when the
   * upstream reported none.
   */
  get reported(): Usage | undefined {
    return this.anyReported ? this.canonical() : undefined
  }

  canonical(): Usage {
    const { input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens } = this.counts
    const hour = Math.min(this.cacheWriteHour ?? (this.unsplitWritesHour ? cache_creation_input_tokens : 0), cache_creation_input_tokens)
    return {
      inputTokens: input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
      ...(this.cacheReadReported ? { cachedInputTokens: cache_read_input_tokens } : {}),
      ...(cache_creation_input_tokens > 0 ? { cacheWriteInputTokens: cache_creation_input_tokens } : {}),
      ...(hour > 0 ? { cacheWrite1hInputTokens: hour } : {}),
      outputTokens: output_tokens,
      webSearchRequests: 0,
      webFetchRequests: 0,
    }
  }
}
