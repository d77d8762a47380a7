import type { Nanos } from '../lib/money'

/** Privacy levels (spec §1): selected by an id suffix (`:confidential`, `:encrypted`); the unsuffixed id is anonymous or private. */
export type PrivacyLevel = 'anonymous' | 'private' | 'confidential' | 'encrypted'

/** Per-million-token prices in integer nanos (config writes them as exact USD decimal strings). */
export interface Price {
  readonly inputPerMillion: Nanos
  readonly outputPerMillion: Nanos
  /** Defaults to the input price when absent. */
  readonly cachedInputPerMillion?: Nanos
  /**
   * Prompt-cache writes with the 5-minute lifetime (Anthropic's cache_creation). Defaults to
   * 1.25× the input price when absent, and the 1-hour ones to 2×, what Anthropic bills for them
   * (billing/pricing.ts cacheWritePrices).
   */
  readonly cacheWriteInputPerMillion?: Nanos
  readonly cacheWrite1hInputPerMillion?: Nanos
  /** Defaults to the output price when absent (reasoning tokens are output tokens). */
  readonly reasoningPerMillion?: Nanos
}

export interface Capabilities {
  readonly tools: boolean
  readonly reasoning: boolean
  readonly vision: boolean
  readonly supportsWebFetch: boolean
  readonly supportsWebSearch: boolean
  readonly fileInput: boolean
}

/**
 * The thinking form an Anthropic upstream model takes: `budget` (`thinking: {type: "enabled",
 * budget_tokens}`: Claude before 4.6) or `adaptive` (`thinking: {type: "adaptive"}` with
 * `output_config.effort`: Claude 4.6 and later; the only form from Opus 4.7 on).
 */
export type ThinkingForm = 'budget' | 'adaptive'

/** One upstream binding of a model level: which provider, and the model name it knows. */
export interface Backend {
  /** The provider id from config. */
  readonly provider: string
  /** The upstream's own model name. */
  readonly model: string
  /** Relative share for round-robin spread (default 1). */
  readonly weight: number
  /** The binding serves `uncensored: true` requests. */
  readonly uncensored: boolean
  /**
   * The thinking form the upstream model accepts (Anthropic backends). Unset: the client's own
   * form is sent (adaptive as adaptive, a budget as a budget, an effort alone as a budget).
   */
  readonly thinking?: ThinkingForm
}

/** A resolved, callable model at one privacy level. */
export interface ModelRoute {
  /** The id as addressed, with its level suffix when it has one (`llama-3.3-70b:confidential`). */
  readonly id: string
  /** The logical model id without suffix. */
  readonly modelId: string
  readonly level: PrivacyLevel
  readonly backends: readonly Backend[]
  readonly routing: 'ordered' | 'round-robin'
  readonly price: Price
  readonly capabilities: Capabilities
  readonly contextLength: number
  readonly maxOutputTokens: number
}
