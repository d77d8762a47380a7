import type Anthropic from '@anthropic-ai/sdk'

// What the e2e upstream suites (chat-, messages-, responses-upstreams) share: one credit, one
// catalog price whose rates do not divide evenly (so every charge's ceil matters), one tool.

export const CREDIT = 10_000_000_000n
export const MTOK = 1_000_000n
/** Nanos per million tokens, as PRICE_YAML configures them. */
export const PRICE = { input: 1_234_567_891n, output: 3_000_000_007n, cached: 300_000_000n, reasoning: 7_500_000_000n }
export const PRICE_YAML = '{ input_per_mtok: "1.234567891", output_per_mtok: "3.000000007", cached_input_per_mtok: "0.3", reasoning_per_mtok: "7.5" }'
export const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

/** The tool the Messages suites offer (an Anthropic tool definition). */
export const weatherTool: Anthropic.Tool = {
  name: 'get_weather',
  description: 'Current weather',
  input_schema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
}
