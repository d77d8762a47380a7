import type { FinishReason, Usage } from '../../canonical'
import type { ChatResult } from '../../collect'
import type { ResponseMeta } from '../types'

const FINISH: Record<FinishReason, string> = {
  stop: 'stop',
  length: 'length',
  'tool-calls': 'tool_calls',
  'content-filter': 'content_filter',
  error: 'stop',
  other: 'stop',
}

export function finishReason(reason: FinishReason): string {
  return FINISH[reason]
}

/**
 * OpenAI's usage object, with the detail fields its SDK types, plus `server_tool_use`
 * (spec §4.7) whenever hosted tools were enabled or ran (`serverToolUse`), zero counts included.
 */
export function usageObject(usage: Usage, serverToolUse = false) {
  const object: {
    prompt_tokens: number
    completion_tokens: number
    total_tokens: number
    prompt_tokens_details: { cached_tokens: number }
    completion_tokens_details: { reasoning_tokens: number }
    server_tool_use?: { web_fetch_requests: number | undefined; web_search_requests: number | undefined }
  } = {
    prompt_tokens: usage.inputTokens,
    completion_tokens: usage.outputTokens,
    total_tokens: usage.inputTokens + usage.outputTokens,
    prompt_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
  }
  if (serverToolUse || usage.webFetchRequests || usage.webSearchRequests) {
    object.server_tool_use = { web_fetch_requests: usage.webFetchRequests, web_search_requests: usage.webSearchRequests }
  }
  return object
}

/** A non-streamed `chat.completion` object. */
export function encodeChatCompletion(result: ChatResult, usage: Usage, meta: ResponseMeta) {
  // A refusal goes in its own field, content null, as OpenAI answers it (the SDK's parse() reads it
  // there); an answer that also had content (never seen) keeps its whole text as content.
  const refused = result.refusal !== '' && result.refusal === result.text
  const content = refused || (result.text === '' && result.toolCalls.length > 0) ? null : result.text
  const message: Record<string, unknown> = { role: 'assistant', content, refusal: result.refusal === '' ? null : result.refusal }
  // Reasoning goes back the way vLLM and DeepSeek send it, so clients can replay it: every
  // visible reasoning block, joined in order. This wire has no field for signatures or redacted
  // blocks, so those do not survive a Chat Completions client (state it, never fake it).
  if (result.reasoning !== '') message.reasoning_content = result.reasoning
  if (result.toolCalls.length > 0) {
    message.tool_calls = result.toolCalls.map(call => ({ id: call.callId, type: 'function', function: { name: call.name, arguments: call.arguments } }))
  }
  return {
    id: meta.id,
    object: 'chat.completion',
    created: meta.createdAt,
    model: meta.model,
    choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason(result.finishReason) }],
    usage: usageObject(usage, meta.serverToolUse),
    system_fingerprint: null,
  }
}
