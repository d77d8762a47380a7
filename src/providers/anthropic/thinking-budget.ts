import type { ChatRequest } from '../../inference/canonical'

/** Anthropic's floor for `thinking.budget_tokens`. */
export const MIN_THINKING_BUDGET = 1024

/**
 * Effort → thinking budget. A budget is a ceiling the model rarely fills, and its tokens are
 * billed as output tokens, so the steps are modest. An effort budget is also capped at half of
 * `max_tokens`, so the visible answer keeps room: with `max_tokens` 8192, `high` thinks up to 4096.
 */
export const THINKING_BUDGET_BY_EFFORT = { low: 2048, medium: 8192, high: 24576 } as const

/** Why thinking may have to stay off although the client asked for it. */
export interface ThinkingConstraints {
  /** tool_choice `any` or `tool`: Anthropic rejects forced tool use with thinking. */
  readonly forcedToolUse: boolean
  /** The continued assistant tool turn has no thinking block to replay (see to-upstream.ts). */
  readonly toolTurnWithoutThinking: boolean
}

/** The `thinking` parameter as sent. `display` only when the client asked for the text (see canonical.ts). */
export type AnthropicThinking = ({ type: 'enabled'; budget_tokens: number } | { type: 'adaptive' }) & { display?: 'summarized' }

/**
 * The `thinking` parameter, or undefined for none. On when the request asks for reasoning
 * (adaptive, an effort or an explicit budget) and the route advertises it.
 *
 * - Adaptive is sent as adaptive: the model sizes its own thinking, with no budget to fit under
 *   `max_tokens`. (Claude models before 4.6 refuse it; the client asked for it by name.)
 * - An explicit `budgetTokens` is used as given, capped at `max_tokens − 1` (it must be lower).
 * - An effort maps through THINKING_BUDGET_BY_EFFORT, capped at ⌊max_tokens / 2⌋.
 * - Either is raised to Anthropic's floor of 1024; if `max_tokens` ≤ 1024 there is no valid
 *   budget and thinking stays off.
 * - Forced tool use and a tool turn without replayable thinking keep it off: both would be a
 *   400 from Anthropic, and the client's tool contract matters more than hidden reasoning.
 */
export function thinkingConfig(request: ChatRequest, maxTokens: number, constraints: ThinkingConstraints): AnthropicThinking | undefined {
  const reasoning = request.reasoning
  if (reasoning === undefined || !request.route.capabilities.reasoning) return undefined
  if (constraints.forcedToolUse || constraints.toolTurnWithoutThinking) return undefined
  const display = reasoning.summarized === true ? { display: 'summarized' as const } : {}
  if (reasoning.adaptive === true) return { type: 'adaptive', ...display }
  if (maxTokens <= MIN_THINKING_BUDGET) return undefined
  let budget: number
  if (reasoning.budgetTokens !== undefined) budget = Math.min(reasoning.budgetTokens, maxTokens - 1)
  else if (reasoning.effort !== undefined) budget = Math.min(THINKING_BUDGET_BY_EFFORT[reasoning.effort], Math.floor(maxTokens / 2))
  else return undefined
  if (budget <= 0) return undefined
  return { type: 'enabled', budget_tokens: Math.max(MIN_THINKING_BUDGET, Math.floor(budget)), ...display }
}
