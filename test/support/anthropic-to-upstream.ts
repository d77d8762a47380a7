import type { ChatRequest } from '../../src/inference/canonical'
import { claudeRoute as route } from '../providers/anthropic-wire'

// Canonical requests for the test/providers/anthropic-to-upstream*.test.ts suites.

/** A one-turn, non-streamed "Hi" on the Claude route, with `overrides` over it. */
export function chat(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    model: 'claude',
    route: route(),
    messages: [{ role: 'user', parts: [{ type: 'text', text: 'Hi' }] }],
    tools: [],
    sampling: {},
    hosted: { webSearch: false, webFetch: false },
    stream: false,
    ...overrides,
  }
}

export const weatherTool = {
  name: 'get_weather',
  description: 'Weather for a city',
  parameters: { type: 'object', properties: { location: { type: 'string' } }, required: ['location'] },
}

/** A thinking block's signature, as Anthropic returns them. */
export const SIGNATURE = 'EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds=='
