// Canonical requests and routes for provider tests.

import type { Capabilities, ModelRoute } from '../../src/catalog/types'
import type { ProviderConfig } from '../../src/config/config'
import type { ChatRequest, FunctionTool } from '../../src/inference/canonical'
import type { ProviderCall } from '../../src/providers/types'

/** The end-user id every fixture request carries: it must never reach an upstream. */
export const END_USER_ID = 'end-user-7f3a9c'

/** A route that offers every capability (tests that need less override it). */
export function testRoute(overrides: { capabilities?: Partial<Capabilities>; maxOutputTokens?: number } = {}): ModelRoute {
  return {
    id: 'test-model',
    modelId: 'test-model',
    level: 'anonymous',
    backends: [{ provider: 'test', model: 'upstream-model', weight: 1, uncensored: false }],
    routing: 'ordered',
    price: { inputPerMillion: 1_000n, outputPerMillion: 2_000n },
    capabilities: { tools: true, reasoning: true, vision: true, supportsWebFetch: false, supportsWebSearch: false, fileInput: false, ...overrides.capabilities },
    contextLength: 128_000,
    maxOutputTokens: overrides.maxOutputTokens ?? 4_096,
  }
}

/** A one-turn request saying `text` (default "Hi"), with END_USER_ID as `user`. */
export function testRequest(overrides: Partial<ChatRequest> = {}, text = 'Hi'): ChatRequest {
  return {
    model: 'test-model',
    route: testRoute(),
    messages: [{ role: 'user', parts: [{ type: 'text', text }] }],
    tools: [],
    sampling: {},
    hosted: { webSearch: false, webFetch: false },
    user: END_USER_ID,
    stream: true,
    ...overrides,
  }
}

export const weatherTool: FunctionTool = {
  name: 'get_weather',
  description: 'Current weather for a city',
  parameters: {
    type: 'object',
    properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, days: { type: 'integer', minimum: 1 } },
    required: ['city', 'unit'],
  },
}

export const timeTool: FunctionTool = {
  name: 'get_time',
  description: 'Current time in a time zone',
  parameters: { type: 'object', properties: { zone: { type: 'string' } }, required: ['zone'] },
}

/** A ProviderCall for `request`, with a fresh signal unless one is given. */
export function providerCall(request: ChatRequest, upstreamModel: string, signal: AbortSignal = new AbortController().signal): ProviderCall {
  return { request, upstreamModel, signal, requestId: 'req_test_0001' }
}

/** A ProviderConfig with test-sized timeouts. */
export function providerConfig(overrides: Partial<ProviderConfig> & Pick<ProviderConfig, 'type'>): ProviderConfig {
  return {
    id: 'test',
    baseUrl: undefined,
    apiKey: undefined,
    retention: 'none',
    connectTimeoutMs: 5_000,
    idleTimeoutMs: 5_000,
    responseTimeoutMs: 5_000,
    ...overrides,
  }
}
