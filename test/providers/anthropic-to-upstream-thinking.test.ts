import { describe, expect, test } from 'bun:test'
import type { ChatRequest, Message } from '../../src/inference/canonical'
import { THINKING_BUDGET_BY_EFFORT } from '../../src/providers/anthropic/thinking-budget'
import { toUpstream } from '../../src/providers/anthropic/to-upstream'
import { chat, SIGNATURE, weatherTool } from '../support/anthropic-to-upstream'
import { CLAUDE_MODEL as MODEL, claudeRoute as route } from './anthropic-wire'

// The Anthropic thinking budget and form from the request's reasoning and the binding's form.

describe('anthropic toUpstream: thinking budget', () => {
  const budget = (overrides: Partial<ChatRequest>) => {
    const thinking = toUpstream(chat(overrides), MODEL).thinking
    return thinking?.type === 'enabled' ? thinking.budget_tokens : undefined
  }

  test('effort table, capped at half of max_tokens', () => {
    expect(budget({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.low)
    expect(budget({ reasoning: { effort: 'medium' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.medium)
    expect(budget({ reasoning: { effort: 'high' }, sampling: { maxOutputTokens: 64_000 } })).toBe(THINKING_BUDGET_BY_EFFORT.high)
    expect(budget({ reasoning: { effort: 'high' } })).toBe(4096) // route max 8192
    expect(budget({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 1500 } })).toBe(1024) // raised to the floor
  })

  test('explicit budget wins over effort, capped below max_tokens', () => {
    expect(budget({ reasoning: { effort: 'low', budgetTokens: 5000 } })).toBe(5000)
    expect(budget({ reasoning: { budgetTokens: 50_000 } })).toBe(8191)
    expect(budget({ reasoning: { budgetTokens: 10 } })).toBe(1024)
  })

  test('no form on the binding: the client\'s own form, an effort alone as a budget (what the gateway sent before the setting)', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config } = toUpstream(chat(overrides), MODEL)
      return { thinking, output_config }
    }
    expect(body({ reasoning: { adaptive: true, effort: 'low', summarized: true } })).toEqual({ thinking: { type: 'adaptive', display: 'summarized' }, output_config: { effort: 'low' } })
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual({ thinking: { type: 'adaptive' }, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'high' } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'high' } })
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.low }, output_config: undefined })
  })

  test('adaptive on a budget binding is a budget at its effort, else high; only an explicit budget\'s effort goes in output_config', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config } = toUpstream(chat(overrides), MODEL, 'budget')
      return { thinking, output_config }
    }
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.high }, output_config: undefined })
    expect(body({ reasoning: { adaptive: true, effort: 'low', summarized: true } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2048, display: 'summarized' }, output_config: undefined })
    // No budget fits under max_tokens 500: off, as for an effort.
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual({ thinking: undefined, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'high' } })).toEqual({ thinking: { type: 'enabled', budget_tokens: 2000 }, output_config: { effort: 'high' } })
    // An effort alone is a budget, as for Chat Completions clients; forced tool use keeps thinking (and its effort) off.
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 64_000 } })).toEqual({ thinking: { type: 'enabled', budget_tokens: THINKING_BUDGET_BY_EFFORT.low }, output_config: undefined })
    expect(body({ reasoning: { budgetTokens: 2000, effort: 'low' }, tools: [weatherTool], toolChoice: 'required' })).toEqual({ thinking: undefined, output_config: undefined })
  })

  test('an adaptive binding: adaptive with the effort (an explicit budget read as the lowest effort covering it), no max_tokens floor', () => {
    const body = (overrides: Partial<ChatRequest>) => {
      const { thinking, output_config, temperature } = toUpstream(chat(overrides), MODEL, 'adaptive')
      return { thinking, output_config, temperature }
    }
    const adaptive = (effort?: 'low' | 'medium' | 'high') => ({ thinking: { type: 'adaptive' as const }, output_config: effort ? { effort } : undefined, temperature: undefined })
    expect(body({ reasoning: { effort: 'medium' }, sampling: { temperature: 0.5 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { adaptive: true }, sampling: { maxOutputTokens: 500 } })).toEqual(adaptive())
    expect(body({ reasoning: { effort: 'low' }, sampling: { maxOutputTokens: 500 } })).toEqual(adaptive('low'))
    expect(body({ reasoning: { budgetTokens: 1024 } })).toEqual(adaptive('low'))
    expect(body({ reasoning: { budgetTokens: 2049 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { budgetTokens: 8192 } })).toEqual(adaptive('medium'))
    expect(body({ reasoning: { budgetTokens: 8193 } })).toEqual(adaptive('high'))
    // The client's own effort wins over the one its budget reads as.
    expect(body({ reasoning: { budgetTokens: 30_000, effort: 'low', summarized: true } })).toEqual({ ...adaptive('low'), thinking: { type: 'adaptive', display: 'summarized' } })
    expect(body({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: 'required', sampling: { temperature: 0.5 } })).toEqual({ thinking: undefined, output_config: undefined, temperature: 0.5 })
    expect(body({})).toEqual({ thinking: undefined, output_config: undefined, temperature: undefined })
    expect(body({ reasoning: { effort: 'high' }, route: route({ capabilities: { ...route().capabilities, reasoning: false } }) }).thinking).toBeUndefined()
  })

  test('off: no request, budget 0, max_tokens ≤ 1024, route without reasoning, forced tool use', () => {
    expect(budget({})).toBeUndefined()
    expect(budget({ reasoning: { budgetTokens: 0 } })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, sampling: { maxOutputTokens: 1024 } })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, route: route({ capabilities: { ...route().capabilities, reasoning: false } }) })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: 'required' })).toBeUndefined()
    expect(budget({ reasoning: { effort: 'high' }, tools: [weatherTool], toolChoice: { name: 'get_weather' } })).toBeUndefined()
  })

  test('off when the continued tool turn has no thinking to replay (history from another provider)', () => {
    const messages: Message[] = [
      { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
      { role: 'assistant', parts: [{ type: 'reasoning', text: 'unsigned' }, { type: 'tool-call', callId: 'c', name: 'get_weather', arguments: '{}' }] },
      { role: 'tool', parts: [{ type: 'tool-result', callId: 'c', content: 'ok' }] },
    ]
    const body = toUpstream(chat({ messages, tools: [weatherTool], reasoning: { effort: 'low' }, sampling: { temperature: 0.3 } }), MODEL)
    expect(body.thinking).toBeUndefined()
    expect(body.temperature).toBe(0.3) // sampling is back once thinking is off
  })

  test('with thinking off, a final prefill assistant turn loses its thinking blocks', () => {
    const body = toUpstream(
      chat({
        messages: [
          { role: 'user', parts: [{ type: 'text', text: 'Q' }] },
          { role: 'assistant', parts: [{ type: 'reasoning', text: 'r', signature: SIGNATURE }, { type: 'text', text: 'The answer is' }] },
        ],
      }),
      MODEL,
    )
    expect(body.messages[1]).toEqual({ role: 'assistant', content: [{ type: 'text', text: 'The answer is' }] })
  })
})
