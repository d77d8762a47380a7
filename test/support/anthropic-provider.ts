import type { ProviderConfig } from '../../src/config/config'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { AnthropicProvider } from '../../src/providers/anthropic/provider'
import type { ProviderCall } from '../../src/providers/types'
import { CLAUDE_MODEL as MODEL, claudeRoute } from '../providers/anthropic-wire'
import { FakeClock } from './fake-clock'
import type { FakeUpstream } from './fake-upstream'

// The Anthropic provider alone against a fake upstream, for the
// test/providers/anthropic-provider*.test.ts suites.

export const API_KEY = 'sk-ant-test-0123456789'
export const fixture = (name: string) => Bun.file(new URL(`../fixtures/upstream/anthropic/${name}`, import.meta.url)).text()

/** Providers on `upstream()` (read at call time: a test gets a fresh one), on a fake clock. */
export function anthropicProviders(upstream: () => FakeUpstream) {
  const clock = new FakeClock()
  const providerConfig = (overrides: Partial<ProviderConfig> = {}): ProviderConfig => ({
    id: 'claude',
    type: 'anthropic',
    baseUrl: `${upstream().url}/v1`,
    apiKey: API_KEY,
    retention: 'unknown',
    connectTimeoutMs: 5_000,
    idleTimeoutMs: 5_000,
    responseTimeoutMs: 5_000,
    ...overrides,
  })
  const provider = (overrides: Partial<ProviderConfig> = {}) => new AnthropicProvider(providerConfig(overrides), { clock })
  return { clock, providerConfig, provider }
}

const route = claudeRoute()

/** A streamed call for "Hi" from end user `end-user-7`, with `request` over it. */
export function call(request: Partial<ChatRequest> = {}, signal: AbortSignal = new AbortController().signal): ProviderCall {
  return {
    request: {
      model: 'claude',
      route,
      messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi' }] }],
      tools: [],
      sampling: {},
      hosted: { webSearch: false, webFetch: false },
      user: 'end-user-7',
      stream: true,
      ...request,
    },
    upstreamModel: MODEL,
    signal,
    requestId: 'req_test',
  }
}

/** The error of the final event, which must be an error event. */
export const lastError = (events: ChatEvent[]) => {
  const last = events.at(-1)
  if (last?.type !== 'error') throw new Error(`expected a final error event, got ${JSON.stringify(last)}`)
  return last.error
}
