import type Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll } from 'bun:test'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from '../support/gateway'

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

/**
 * A served gateway (started before the file's tests, closed after them) whose catalog has `oa`
 * on a fake Chat Completions backend and `an` on a fake Anthropic one, tools enabled: the tool
 * call suites' setup.
 */
export function toolCallGateway(): { readonly openai: FakeUpstream; readonly anthropic: FakeUpstream; readonly gateway: ServedGateway } {
  const model = (id: string) =>
    `  - { id: ${id}, backends: [{ provider: ${id}, model: upstream-${id} }], price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 4096, capabilities: { tools: true } }`
  const served = {} as { openai: FakeUpstream; anthropic: FakeUpstream; gateway: ServedGateway }
  beforeAll(async () => {
    served.openai = await FakeUpstream.start()
    served.anthropic = await FakeUpstream.start()
    served.gateway = await startServedGateway(
      paygConfig(
        [upstreamProvider('oa', 'openai-compatible', `${served.openai.url}/v1`, 'KEY'), upstreamProvider('an', 'anthropic', `${served.anthropic.url}/v1`, 'KEY')],
        [model('oa'), model('an')],
      ),
      { KEY: 'sk-upstream' },
      { credit: CREDIT },
    )
  })
  afterAll(async () => {
    await served.gateway.close()
    await served.openai.close()
    await served.anthropic.close()
  })
  return served
}
