import type { ThinkingForm } from '../../catalog/types'
import type { ChatRequest, Effort } from '../../inference/canonical'

/** Anthropic's floor for `thinking.budget_tokens`. */
export const MIN_THINKING_BUDGET = 1024

/** The efforts every backend takes: `xhigh` and `max` lowered to `high` (see topEffort). */
export type BaseEffort = 'low' | 'medium' | 'high'

/** An effort on the scale every backend takes: `xhigh` and `max` become `high`, its top. */
export function topEffort(effort: Effort): BaseEffort {
  return effort === 'xhigh' || effort === 'max' ? 'high' : effort
}

/**
 * Effort → thinking budget. A budget is a ceiling the model rarely fills, and its tokens are
 * billed as output tokens, so the steps are modest. An effort budget is also capped at half of
 * `max_tokens`, so the visible answer keeps room: with `max_tokens` 8192, `high` thinks up to 4096.
 */
export const THINKING_BUDGET_BY_EFFORT = { low: 2048, medium: 8192, high: 24576 } as const

/**
 * Budget → effort, the same steps read the other way: the lowest effort whose budget covers it
 * (low ≤ 2048 < medium ≤ 8192 < high). For a wire or a model that takes an effort, not a budget.
 */
export function effortForBudget(budgetTokens: number): BaseEffort {
  return budgetTokens <= THINKING_BUDGET_BY_EFFORT.low ? 'low' : budgetTokens <= THINKING_BUDGET_BY_EFFORT.medium ? 'medium' : 'high'
}

/** Why thinking may have to stay off although the client asked for it. */
export interface ThinkingConstraints {
  /** tool_choice `any` or `tool`: Anthropic rejects forced tool use with thinking. */
  readonly forcedToolUse: boolean
  /** The continued assistant tool turn has no thinking block to replay (see to-upstream.ts). */
  readonly toolTurnWithoutThinking: boolean
}

/** The `thinking` parameter as sent. `display` only when the client asked for the text (see canonical.ts). */
export type AnthropicThinking = ({ type: 'enabled'; budget_tokens: number } | { type: 'adaptive' }) & { display?: 'summarized' }

/** What the request sends: `thinking`, and the `output_config.effort` that goes with it, if any. */
export interface ThinkingPlan {
  readonly thinking: AnthropicThinking
  readonly effort?: Effort
}

/**
 * The thinking to send, or undefined for none. On when the request asks for reasoning
 * (adaptive, an effort, an explicit budget, or none of them: the backend's default, as a
 * Responses summary alone asks) and the route advertises it, in the form the
 * backend's upstream model accepts (`form`, from the catalog binding): whichever form the client
 * wrote, because the router may hand one request to bindings of either form, and "this model
 * thinks this much" has a faithful reading in both.
 *
 * `adaptive` (Claude 4.6 and later; Opus 4.7 on refuses budgets with a 400):
 * - `thinking: {type: "adaptive"}`, with the client's effort as `output_config.effort`; an
 *   explicit budget without an effort becomes the lowest effort whose budget covers it
 *   (effortForBudget). `max_tokens` stays the hard ceiling, and no budget floor applies. `xhigh`
 *   and `max` go as written: the adaptive models take them.
 *
 * `budget` (Claude before 4.6, which refuses adaptive):
 * - An explicit `budgetTokens` is used as given, capped at `max_tokens − 1` (it must be lower);
 *   an effort the client wrote beside it goes as `output_config.effort`, as it asked (`xhigh`
 *   and `max` as `high`: models before 4.6 take no more).
 * - An effort maps through THINKING_BUDGET_BY_EFFORT (`xhigh` and `max` as `high`, the largest
 *   budget), capped at ⌊max_tokens / 2⌋. Adaptive, and reasoning at the default, are
 *   read the same way, at its effort or else Anthropic's default effort (high); that effort is
 *   spent on the budget and not sent (not every budget model takes `output_config.effort`).
 * - Either is raised to Anthropic's floor of 1024; if `max_tokens` ≤ 1024 there is no valid
 *   budget and thinking stays off.
 *
 * No form set (the binding does not say): the client's own form, so existing catalogs keep their
 * behaviour: adaptive as adaptive (with its effort), a budget as a budget, an effort alone (or
 * reasoning at the default) as a budget.
 *
 * Either form: forced tool use and a tool turn without replayable thinking keep it off: both
 * would be a 400 from Anthropic, and the client's tool contract matters more than hidden reasoning.
 */
export function thinkingConfig(request: ChatRequest, maxTokens: number, constraints: ThinkingConstraints, form: ThinkingForm | undefined): ThinkingPlan | undefined {
  const reasoning = request.reasoning
  if (reasoning === undefined || !request.route.capabilities.reasoning) return undefined
  if (constraints.forcedToolUse || constraints.toolTurnWithoutThinking) return undefined
  const display = reasoning.summarized === true ? { display: 'summarized' as const } : {}
  const { effort, budgetTokens } = reasoning
  if (form === 'adaptive' || (form === undefined && reasoning.adaptive === true)) {
    const steer = effort ?? (budgetTokens !== undefined ? effortForBudget(budgetTokens) : undefined)
    return { thinking: { type: 'adaptive', ...display }, ...(steer !== undefined ? { effort: steer } : {}) }
  }
  if (maxTokens <= MIN_THINKING_BUDGET) return undefined
  const budget = budgetTokens !== undefined ? Math.min(budgetTokens, maxTokens - 1) : Math.min(THINKING_BUDGET_BY_EFFORT[topEffort(effort ?? 'high')], Math.floor(maxTokens / 2))
  if (budget <= 0) return undefined
  const thinking: AnthropicThinking = { type: 'enabled', budget_tokens: Math.max(MIN_THINKING_BUDGET, Math.floor(budget)), ...display }
  if (budgetTokens === undefined || effort === undefined) return { thinking }
  return { thinking, effort: form === 'budget' ? topEffort(effort) : effort }
}
