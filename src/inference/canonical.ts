// The canonical model every dialect decodes into and every provider encodes from
// (ARCHITECTURE.md §1.1, §6). Dialects never import providers and providers never import
// dialects: both meet here.

import type { ModelRoute } from '../catalog/types'

export type Role = 'system' | 'user' | 'assistant' | 'tool'

/** A prompt-cache lifetime: Anthropic's `ttl` (absent: the upstream's default, 5 minutes). */
export type CacheTtl = '5m' | '1h'

/**
 * A prompt-cache breakpoint the client set (Anthropic's `cache_control: {type: "ephemeral"}`):
 * the prompt up to and including what carries it may be cached. Only Messages clients send them
 * and only Anthropic backends are sent them, where the client put them; other backends ignore
 * them (they cache on their own, or not at all).
 */
export interface CacheHint {
  readonly ttl?: CacheTtl
}

/** One piece of a message. `file` parts are replaced by text (enrich) before a provider sees them. */
export type Part =
  /** `fromDocument`: a file part's extracted text (enrich), untrusted data rather than the user's own words. */
  | { type: 'text'; text: string; fromDocument?: true; cache?: CacheHint }
  // param: where the client sent it, for a refusal that names it (the model takes no images).
  | { type: 'image'; mediaType: string; data: Uint8Array | URL; param?: string; cache?: CacheHint }
  /**
   * `plainText`: the data is UTF-8 text by declaration (Messages' text source), read without format
   * detection. `cache` passes to the text part the documents step makes of it.
   */
  | { type: 'file'; mediaType: string; filename?: string; data: Uint8Array; context?: string; plainText?: true; cache?: CacheHint }
  | { type: 'reasoning'; text: string; signature?: string; redacted?: boolean }
  | { type: 'tool-call'; callId: string; name: string; arguments: string; cache?: CacheHint }
  | { type: 'tool-result'; callId: string; content: string; isError?: boolean; cache?: CacheHint }

/** A message; system and developer instructions are `system`. */
export interface Message {
  role: Role
  parts: Part[]
  /** A participant's name (Chat Completions' `name`), for backends whose wire carries one. */
  name?: string
}

/** A function the model may call; `parameters` is a JSON Schema object. */
export interface FunctionTool {
  name: string
  description?: string
  parameters: Record<string, unknown>
  strict?: boolean
  cache?: CacheHint
}

/**
 * A reasoning effort. `xhigh` and `max` go as written where the backend takes them (an Anthropic
 * binding with adaptive thinking); elsewhere they are the backend's top: the `high` budget, or
 * reasoning_effort `high` on an OpenAI-compatible wire.
 */
export type Effort = 'low' | 'medium' | 'high' | 'xhigh' | 'max'

export type ToolChoice = 'auto' | 'none' | 'required' | { name: string }

export type ResponseFormat =
  | { type: 'text' }
  | { type: 'json_object' }
  | { type: 'json_schema'; name: string; schema: Record<string, unknown>; strict?: boolean; description?: string }

/**
 * A client's limits on one hosted web tool: Anthropic's max_uses / allowed_domains /
 * blocked_domains / max_content_tokens, OpenAI's filters.allowed_domains, the gateway's own
 * extensions of the same names. Domains are normalised (lower case, no trailing dot) and cover
 * their subdomains (web/domain-list.ts).
 */
export interface HostedToolLimits {
  /** At most this many runs in the turn: pages fetched, searches run. */
  maxUses?: number
  allowedDomains?: string[]
  blockedDomains?: string[]
  /** web_fetch: each page's text is cut to about this many tokens. */
  maxContentTokens?: number
}

/** A chat request after decoding, bound to its catalog route. */
export interface ChatRequest {
  /** The model id as the client wrote it (with any level suffix). */
  model: string
  route: ModelRoute
  messages: Message[]
  tools: FunctionTool[]
  toolChoice?: ToolChoice
  parallelToolCalls?: boolean
  /**
   * `topK`: only Anthropic-style clients send it; providers pass it where their wire has a field.
   * `stop` holds no empty sequence: one stops nothing, so the dialects drop it (vLLM refuses it).
   */
  sampling: { temperature?: number; topP?: number; topK?: number; maxOutputTokens?: number; stop?: string[]; seed?: number }
  /**
   * Reasoning on: at an `effort`, within an explicit `budgetTokens`, or `adaptive` (the model
   * decides whether and how much to think; Anthropic's `thinking: {type: "adaptive"}`, which
   * `effort` may steer). Without an effort or budget (adaptive, or none of the three: a Responses
   * reasoning.summary alone) each backend reasons at its own default: an Anthropic backend gets
   * adaptive thinking itself (or, where its binding takes budgets, the budget of Anthropic's
   * default effort), an OpenAI-compatible one no reasoning_effort.
   * An Anthropic backend sends every one of the three in the form its binding's model takes
   * (providers/anthropic/thinking-budget.ts). `summarized`: the client asked for the reasoning text explicitly
   * (Anthropic's `display: "summarized"`; newer Claude models omit it by default).
   */
  reasoning?: { effort?: Effort; budgetTokens?: number; adaptive?: boolean; summarized?: boolean }
  responseFormat?: ResponseFormat
  /**
   * The hosted web tools asked for (spec §4.7), with the limits the client set on each (absent:
   * none). Every dialect decodes them; enrich/web.ts applies them.
   */
  hosted: { webSearch: boolean; webFetch: boolean; fetch?: HostedToolLimits; search?: HostedToolLimits }
  /** The client's end-user id: for the gateway's own abuse controls, never forwarded upstream. */
  user?: string
  /**
   * Automatic prompt caching (Messages' top-level `cache_control`): the backend places the
   * breakpoint on the last cacheable block itself. The breakpoints set on parts and tools are
   * their own `cache`.
   */
  cache?: CacheHint
  stream: boolean
}

export type FinishReason = 'stop' | 'length' | 'tool-calls' | 'content-filter' | 'error' | 'other'

/** What a finish says beyond its reason, for the client formats that have a field for it. */
export interface FinishDetail {
  /** Which of the request's stop sequences ended a `stop`, when the upstream says (Anthropic does). */
  stopSequence?: string
  /**
   * A `length` stop where the model's context window ran out, not the output limit (Anthropic's
   * `model_context_window_exceeded`): a larger max_tokens would not help. A format without a
   * field for it says `length`, as for any cut.
   */
  contextWindowExceeded?: true
}

/**
 * Token usage as the upstream reported it (or the meter's fallback count). Subsets are counted
 * inside their totals: `inputTokens` includes `cachedInputTokens` and `cacheWriteInputTokens`,
 * and `outputTokens` includes `reasoningTokens` (pricing relies on this).
 */
export interface Usage {
  inputTokens: number
  /** The part of inputTokens read from the upstream's prompt cache. */
  cachedInputTokens?: number
  /**
   * The part of inputTokens written to the upstream's prompt cache (Anthropic's
   * cache_creation_input_tokens): reported back to Messages clients, priced at the model's
   * 5-minute cache-write price, except the part written for an hour (`cacheWrite1hInputTokens`).
   */
  cacheWriteInputTokens?: number
  /** The part of cacheWriteInputTokens written with the 1-hour lifetime, priced at the 1-hour write price. */
  cacheWrite1hInputTokens?: number
  outputTokens: number
  /** The part of outputTokens spent on reasoning. */
  reasoningTokens?: number
  webSearchRequests: number
  webFetchRequests: number
}

/**
 * What a provider streams (noun-verb discriminated union). `block` is stable per content
 * block and increases in order of first appearance; usage arrives on `finish`.
 */
export type ChatEvent =
  /**
   * `inputTokens`: the prompt size when the upstream reports it up front (Anthropic's
   * message_start), in the canonical convention (cached tokens included), and the cached part of
   * it; `finish` still carries the authoritative usage.
   */
  | { type: 'response-start'; id: string; model: string; /** epoch milliseconds */ createdAt: number; inputTokens?: number; cachedInputTokens?: number; cacheWriteInputTokens?: number; cacheWrite1hInputTokens?: number }
  | { type: 'text-start'; block: number }
  /** `refusal`: the model declined (Chat Completions' `refusal`); other formats show it as text. */
  | { type: 'text-delta'; block: number; delta: string; refusal?: true }
  | { type: 'text-end'; block: number }
  | { type: 'reasoning-start'; block: number }
  | { type: 'reasoning-delta'; block: number; delta: string }
  /** `redacted`: the block's content is encrypted by the upstream and `signature` carries its data. */
  | { type: 'reasoning-end'; block: number; signature?: string; redacted?: boolean }
  /**
   * `jsonObject`: the upstream streams the arguments as a JSON object's text as it goes
   * (Anthropic's input_json_delta), which a client format that needs an object may forward as it
   * comes. Without it the text is whatever the model wrote (a Chat Completions backend's), known
   * to be an object only at the call's end.
   */
  | { type: 'tool-call-start'; block: number; callId: string; name: string; jsonObject?: true }
  | { type: 'tool-call-delta'; block: number; argumentsDelta: string }
  | { type: 'tool-call-end'; block: number }
  | ({ type: 'finish'; reason: FinishReason; usage: Usage } & FinishDetail)
  /**
   * `usage`: what the upstream had reported when it failed (Anthropic's message_start and
   * message_delta, a Chat Completions usage chunk before the cut), billed as a finish's usage is
   * (meter.ts). Its output count is set only when the report covers the whole output (after
   * Anthropic's content blocks, after a Chat Completions finish_reason), else 0 (unreported).
   */
  | { type: 'error'; error: import('../providers/types').UpstreamError; usage?: Usage }
  /**
   * The upstream's usage for the whole answer, reported before its stream's terminal event
   * (Anthropic's message_delta, before message_stop). Nothing is sent for it: the meter bills it
   * when the call ends without a finish (the client left), as it bills an error event's usage.
   */
  | { type: 'usage'; usage: Usage }
  | PassThroughEvent

/**
 * The client formats whose streams a provider may pass through (ARCHITECTURE.md §11): the client
 * speaks its upstream's format, so the upstream's frames are forwarded instead of canonical
 * events re-encoded (ProviderCall.passThrough).
 */
export type PassThroughFormat = 'chat-completions' | 'messages'

/**
 * Same-format pass-through events. Only a provider called with `passThrough` emits them, and
 * only the stream encoder of that format reads them. The byte counts are what the meter would
 * have counted from the equivalent text, reasoning and tool-argument deltas.
 *
 * - `chat-completions`: upstream Chat Completions chunks. `deltas` are the chunks' `delta`
 *   objects as JSON text, exactly as that encoder writes them (it adds the gateway's head: id,
 *   created, the client's model id); `toolBlocks` are the blocks of tool calls started in these
 *   chunks, in order (the encoder numbers them).
 * - `messages`: consecutive Anthropic `content_block_delta` frames of one content block, as the
 *   messages encoder writes them (their literals checked to be JSON.stringify's), carrying the
 *   upstream's content `index`; `block` is the canonical block and `kind` its kind; `count` the
 *   number of deltas. The encoder writes them as they are when its index for the block is the
 *   same, else with its own.
 */
export type PassThroughEvent =
  | { type: 'passthrough'; format: 'chat-completions'; deltas: string[]; textBytes: number; reasoningBytes: number; toolBytes: number; toolBlocks?: number[] }
  | {
      type: 'passthrough'
      format: 'messages'
      kind: 'text' | 'reasoning' | 'tool'
      block: number
      index: number
      frames: string
      count: number
      textBytes: number
      reasoningBytes: number
      toolBytes: number
    }
