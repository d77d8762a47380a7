import { describe, expect, test } from 'bun:test'
import type { Usage } from '../../src/inference/canonical'
import { usageObject as chatUsage } from '../../src/inference/dialects/chat-completions/encode'
import { usageObject as messagesUsage } from '../../src/inference/dialects/messages/encode'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import { usageObject as responsesUsage } from '../../src/inference/dialects/responses/encode'
import { ResponsesStreamEncoder } from '../../src/inference/dialects/responses/encode-stream'

// `usage.server_tool_use` in each client format's usage (spec §4.7): present whenever the
// request enabled hosted web tools (zero counts included) or a count is non-zero, absent
// otherwise — the same rule for Chat Completions, Responses and Messages, plain and streamed.

const base: Usage = { inputTokens: 10, outputTokens: 5, webSearchRequests: 0, webFetchRequests: 0 }
const ran: Usage = { ...base, webSearchRequests: 1, webFetchRequests: 2 }
const meta = (serverToolUse: boolean) => ({ id: 'resp_x', model: 'm', createdAt: 0, includeUsage: true, estimatedInputTokens: 7, serverToolUse })

describe('server_tool_use in every format', () => {
  for (const [name, usageObject] of [['chat-completions', chatUsage], ['responses', responsesUsage], ['messages', messagesUsage]] as const) {
    test(name, () => {
      expect((usageObject(base, false) as Record<string, unknown>).server_tool_use).toBeUndefined()
      expect((usageObject(base, true) as Record<string, unknown>).server_tool_use).toEqual({ web_fetch_requests: 0, web_search_requests: 0 })
      expect((usageObject(ran, false) as Record<string, unknown>).server_tool_use).toEqual({ web_fetch_requests: 2, web_search_requests: 1 })
    })
  }

  test('streamed: response.completed and message_delta carry it', () => {
    const completed = new ResponsesStreamEncoder(meta(true), {}).finish('stop', base).join('')
    expect(completed).toContain('"server_tool_use":{"web_fetch_requests":0,"web_search_requests":0}')
    expect(new ResponsesStreamEncoder(meta(false), {}).finish('stop', base).join('')).not.toContain('server_tool_use')
    const delta = new MessagesStreamEncoder(meta(true)).finish('stop', ran).find(frame => frame.startsWith('event: message_delta'))!
    expect(JSON.parse(delta.split('data: ')[1]!).usage.server_tool_use).toEqual({ web_search_requests: 1, web_fetch_requests: 2 })
    expect(new MessagesStreamEncoder(meta(false)).finish('stop', base).join('')).not.toContain('server_tool_use')
  })
})
