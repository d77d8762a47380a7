import type { ApiError } from '../../../http/errors'
import type { FinishReason, Usage } from '../../canonical'
import type { ChatResult } from '../../collect'
import { isCutShort } from '../../tool-input'
import type { ResponseMeta } from '../types'
import { REDACTED_PREFIX } from './decode'
import type { ResponsesRequest } from './schema'

// The `response` object of the OpenAI Responses API, shared by the JSON reply and the stream's
// lifecycle events. Shapes follow the openai SDK's types (resources/responses/responses.ts).

export type ResponseStatus = 'completed' | 'incomplete' | 'failed' | 'in_progress'

/** What the response object repeats of the request (the real API echoes these settings). */
export type Echo = Record<string, unknown>

export function echoOf(body: ResponsesRequest): Echo {
  const tools = (body.tools ?? []).map(tool => {
    if (tool.type !== 'function') return tool
    const fn = tool as unknown as { name: string; description?: string | null; parameters?: Record<string, unknown> | null; strict?: boolean | null }
    return { type: 'function', name: fn.name, description: fn.description ?? null, parameters: fn.parameters ?? null, strict: fn.strict ?? null }
  })
  return {
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    max_tool_calls: null,
    metadata: body.metadata ?? {},
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: null,
    reasoning: { effort: body.reasoning?.effort ?? null, summary: body.reasoning?.summary ?? body.reasoning?.generate_summary ?? null },
    service_tier: 'default',
    store: false,
    temperature: body.temperature ?? null,
    text: { format: body.text?.format ?? { type: 'text' }, verbosity: 'medium' },
    tool_choice: body.tool_choice ?? 'auto',
    tools,
    top_p: body.top_p ?? null,
    truncation: 'disabled',
  }
}

/**
 * Responses usage, with the detail fields its SDK types. OpenAI's Responses usage has no field
 * for hosted tool runs (its own web_search reports `web_search_call` output items, which a
 * client would have to send back), so the gateway adds the same `server_tool_use` object it
 * reports on Chat Completions (spec §4.7): `{web_fetch_requests, web_search_requests}`, present
 * whenever the request enabled hosted web tools (`serverToolUse`), zero counts included.
 */
export function usageObject(usage: Usage, serverToolUse = false) {
  return {
    input_tokens: usage.inputTokens,
    input_tokens_details: { cached_tokens: usage.cachedInputTokens ?? 0 },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: usage.reasoningTokens ?? 0 },
    total_tokens: usage.inputTokens + usage.outputTokens,
    ...(serverToolUse || usage.webFetchRequests || usage.webSearchRequests
      ? { server_tool_use: { web_fetch_requests: usage.webFetchRequests, web_search_requests: usage.webSearchRequests } }
      : {}),
  }
}

/** How a finish reason ends a response: `incomplete` (with its reason) for truncation and filtering. */
export function statusOf(reason: FinishReason): { status: ResponseStatus; incomplete: { reason: string } | null } {
  if (reason === 'length') return { status: 'incomplete', incomplete: { reason: 'max_output_tokens' } }
  if (reason === 'content-filter') return { status: 'incomplete', incomplete: { reason: 'content_filter' } }
  return { status: 'completed', incomplete: null }
}

/**
 * The in-band error of a failed response. ResponseError's code is a closed set: a request the
 * upstream refused as invalid is `invalid_prompt` (a client retrying on `server_error` would retry
 * it forever), a rate limit `rate_limit_exceeded`, anything else `server_error`.
 */
export function errorObject(error: ApiError) {
  const code = error.code === 'rate_limited' ? 'rate_limit_exceeded' : error.code === 'invalid_request' ? 'invalid_prompt' : 'server_error'
  return { code, message: error.message }
}

export function responseObject(
  meta: ResponseMeta,
  echo: Echo,
  state: { status: ResponseStatus; output: unknown[]; usage: Usage | null; error?: ApiError; incomplete?: { reason: string } | null },
) {
  return {
    id: meta.id,
    object: 'response',
    created_at: meta.createdAt,
    status: state.status,
    background: false,
    // Required by the SDK's Response type; null is the API's value for no Cyber access program
    // (the Standard fallback), and the gateway takes none (a request's access_programs is a 400).
    access_programs: null,
    error: state.error ? errorObject(state.error) : null,
    incomplete_details: state.incomplete ?? null,
    model: meta.model,
    output: state.output,
    usage: state.usage ? usageObject(state.usage, meta.serverToolUse) : null,
    ...echo,
  }
}

/** Output item ids: a kind prefix as the real API uses (msg_, rs_, fc_), unique per response. */
export function itemId(meta: ResponseMeta, prefix: 'msg' | 'rs' | 'fc', outputIndex: number): string {
  return `${prefix}_${meta.id.slice(meta.id.indexOf('_') + 1)}${outputIndex}`
}

/** An assistant message: its text as output_text, or (`refusal`) as the refusal part the API uses when the model declines. */
export function messageItem(id: string, text: string, status: ResponseStatus, refusal = false) {
  return { id, type: 'message', status, content: [refusal ? refusalPart(text) : outputText(text)], role: 'assistant' }
}

export function refusalPart(refusal: string) {
  return { type: 'refusal', refusal }
}

export function outputText(text: string) {
  return { type: 'output_text', annotations: [], logprobs: [], text }
}

/**
 * A reasoning item: the upstream's reasoning text as its summary, and its signature (or, for
 * redacted reasoning, the opaque data behind REDACTED_PREFIX) as encrypted_content, so that the
 * item sent back in the next turn's input restores the exact reasoning block. Its status is the
 * other items' (ResponseReasoningItem's optional status): `incomplete` when max_output_tokens cut it.
 */
export function reasoningItem(id: string, text: string, signature: string | undefined, redacted: boolean | undefined, status: ResponseStatus) {
  const encrypted = signature === undefined || signature === '' ? undefined : redacted ? `${REDACTED_PREFIX}${signature}` : signature
  return {
    id,
    type: 'reasoning',
    summary: text === '' ? [] : [{ type: 'summary_text', text }],
    ...(encrypted !== undefined ? { encrypted_content: encrypted } : {}),
    status,
  }
}

export function functionCallItem(id: string, call: { callId: string; name: string; arguments: string }, status: ResponseStatus) {
  return { id, type: 'function_call', status, arguments: call.arguments, call_id: call.callId, name: call.name }
}

/** One block of a collected answer, in the canonical part shapes. */
type Block =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string; signature?: string; redacted?: boolean }
  | { type: 'tool-call'; callId: string; name: string; arguments: string }

/**
 * The answer's blocks in order. A collector that keeps blocks apart (`blocks`: each reasoning
 * block with its own signature, in its place between tool calls) is read as is; one that only
 * has flat views (one reasoning text and the last signature) is read as reasoning, text, calls.
 */
function blocksOf(result: ChatResult): Block[] {
  const kept = (result as { blocks?: Block[] }).blocks
  if (kept !== undefined) return kept
  const flat = result as unknown as { text: string; reasoning: string; reasoningSignature?: string; toolCalls: Array<{ callId: string; name: string; arguments: string }> }
  const blocks: Block[] = []
  if (flat.reasoning !== '' || flat.reasoningSignature !== undefined) blocks.push({ type: 'reasoning', text: flat.reasoning, signature: flat.reasoningSignature })
  if (flat.text !== '') blocks.push({ type: 'text', text: flat.text })
  for (const call of flat.toolCalls) blocks.push({ type: 'tool-call', ...call })
  return blocks
}

/**
 * The items a truncated answer leaves incomplete, given each item's call arguments (undefined for
 * other items): the last item, unless the answer ends with calls, which a backend may interleave
 * (so the one max_tokens cut need not be last): then those of them cut short of whole JSON, or
 * the last when none was. A call cut short before other output was not cut by max_tokens.
 */
export function truncatedItems(callArguments: ReadonlyArray<string | undefined>): Set<number> {
  const cut = new Set<number>()
  for (let index = callArguments.length - 1; index >= 0; index--) {
    const text = callArguments[index]
    if (text === undefined) break
    if (isCutShort(text)) cut.add(index)
  }
  if (cut.size === 0 && callArguments.length > 0) cut.add(callArguments.length - 1)
  return cut
}

/**
 * A non-streamed `response`: one output item per block of the answer, as the stream sends them
 * (reasoning → reasoning item, text → message, tool call → function_call). A truncated answer
 * marks incomplete the items truncatedItems names. An empty text block (Claude writes one before a tool_use at
 * times) is no item: OpenAI sends no empty message, and the stream, which opens a message at its
 * first text, never shows one either.
 */
export function encodeResponse(result: ChatResult, usage: Usage, meta: ResponseMeta, echo: Echo) {
  const { status, incomplete } = statusOf(result.finishReason)
  const blocks = blocksOf(result).filter(block => block.type !== 'text' || block.text !== '')
  // An answer that is all refusal (OpenAI never mixes the two) is written as refusal parts.
  const refused = result.refusal !== undefined && result.refusal !== '' && result.refusal === result.text
  const cut = status === 'incomplete' ? truncatedItems(blocks.map(block => (block.type === 'tool-call' ? block.arguments : undefined))) : undefined
  const output = blocks.map((block, index) => {
    const itemStatus = cut?.has(index) === true ? 'incomplete' : 'completed'
    switch (block.type) {
      case 'reasoning':
        return reasoningItem(itemId(meta, 'rs', index), block.text, block.signature, block.redacted, itemStatus)
      case 'text':
        return messageItem(itemId(meta, 'msg', index), block.text, itemStatus, refused)
      case 'tool-call':
        return functionCallItem(itemId(meta, 'fc', index), block, itemStatus)
    }
  })
  return responseObject(meta, echo, { status, output, usage, incomplete })
}
