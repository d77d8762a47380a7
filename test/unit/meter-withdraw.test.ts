import { describe, expect, test } from 'bun:test'
import type { ChatEvent } from '../../src/inference/canonical'
import { Meter } from '../../src/inference/meter'

// Meter.withdraw takes back output the meter counted on arrival but the client never received
// (what a stream encoder still held when the stream was cut). Only the counted fallback changes:
// an output count the upstream reported is billed as it was.

const bound = { maxInputTokens: 8192, maxOutputTokens: 4096 }
const tools = { webSearchRequests: 0, webFetchRequests: 0 }
const sent = 'x'.repeat(40) // 10 tokens counted

describe('Meter.withdraw', () => {
  test('text, reasoning, tool calls and pass-through bytes are taken out of the counted output', () => {
    const meter = new Meter(100, bound)
    meter.observe({ type: 'text-delta', block: 0, delta: sent })
    const held: ChatEvent[] = [
      { type: 'reasoning-delta', block: 1, delta: 'r'.repeat(400) },
      { type: 'tool-call-start', block: 2, callId: 'call_b', name: 'lookup' },
      { type: 'tool-call-delta', block: 2, argumentsDelta: 'a'.repeat(16_000) },
      { type: 'passthrough', format: 'chat-completions', deltas: [], textBytes: 80, reasoningBytes: 40, toolBytes: 20 },
    ]
    for (const event of held) meter.observe(event)
    meter.withdraw(held)
    expect(meter.usage()).toMatchObject({ inputTokens: 100, outputTokens: 10, reasoningTokens: undefined })
    expect(meter.producedOutput).toBe(true)
  })

  test('an output count the upstream reported before the cut is billed, whatever was held', () => {
    const meter = new Meter(100, bound)
    const held: ChatEvent = { type: 'tool-call-delta', block: 1, argumentsDelta: 'a'.repeat(16_000) }
    meter.observe({ type: 'text-delta', block: 0, delta: sent })
    meter.observe(held)
    meter.observe({ type: 'usage', usage: { inputTokens: 90, outputTokens: 50, ...tools } })
    meter.withdraw([held])
    expect(meter.usage()).toMatchObject({ inputTokens: 90, outputTokens: 50 })
  })
})
