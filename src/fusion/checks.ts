import type { ModelRoute } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { ChatRequest, Message } from '../inference/canonical'
import type { ChatRouter } from '../inference/pipeline'
import { checkPolicy } from '../inference/policy'
import { toApiError } from '../inference/upstream-errors'
import { UpstreamError } from '../providers/types'
import type { FusionRequest } from './schema'
import { buildSynthesisMessages } from './synthesis-prompt'

// What refuses a Fusion run's parts before anything is reserved or called: each model's policy
// (capabilities, context) and its backends' adapters (what their wire cannot carry), both known
// without a call. QA: an adapter's refusal came only from the call, once the part was admitted,
// so a run whose every participant an adapter refused (temperature 1.5 on Anthropic backends, an
// empty user message) answered 200 `failed` where a chat answers 400.
//
// `adapters`: the router whose adapters to ask, once the conversation is final. Attached files
// are text only after extraction, and no adapter takes a file part: until then, policy alone.

/**
 * Refuses each participant its model's policy or its backends' adapters refuse, by index; when
 * none is left, the whole request is the caller's error (nothing run, nothing billed).
 */
export function refuseParticipants(chats: readonly ChatRequest[], refused: Map<number, ApiError>, adapters: ChatRouter | undefined): void {
  chats.forEach((chat, index) => {
    if (refused.has(index)) return
    try {
      checkPolicy(chat)
      if (adapters) checkAdapters(adapters, chat)
    } catch (error) {
      if (!(error instanceof ApiError)) throw error
      refused.set(index, new ApiError(error.code, `${chat.model}: ${error.message}`, `models.${index}`))
    }
  })
  if (refused.size === chats.length) {
    const first = refused.get(0)!
    throw new ApiError(first.code, `no participant can serve this request: ${[...refused.values()].map(error => error.message).join('; ')}`, 'models')
  }
}

/** A sample candidate: the judge's adapters are asked about the synthesis request as it will be sent. */
const SAMPLE_ANSWER = [{ text: 'answer', finishReason: 'stop' as const }]

/**
 * Refuses the run when its judge would refuse the conversation: its policy (images, say), and its
 * backends' adapters, asked about the synthesis request itself (instructions, the conversation,
 * candidates). QA: an Anthropic judge refused an empty user message only after both
 * participants were billed (200 partial).
 */
export function checkJudge(judged: ChatRequest, request: FusionRequest, adapters: ChatRouter | undefined): void {
  try {
    checkPolicy(judged)
    if (adapters) checkAdapters(adapters, judgeChat(judged.route, buildSynthesisMessages(judged.messages, SAMPLE_ANSWER), request))
  } catch (error) {
    if (error instanceof ApiError) throw new ApiError(error.code, `judge ${judged.model}: ${error.message}`, 'judge')
    throw error
  }
}

/** The judge's chat request: its own default sampling, the caller's output cap bounded by its own. */
export function judgeChat(judge: ModelRoute, messages: Message[], request: FusionRequest): ChatRequest {
  const cap = request.max_tokens === undefined ? undefined : Math.min(request.max_tokens, judge.maxOutputTokens)
  return {
    model: judge.id, route: judge, messages, tools: [], sampling: { maxOutputTokens: cap }, hosted: { webSearch: false, webFetch: false },
    user: request.user, stream: false,
  }
}

/** The refusal, as the call would answer it, of a request none of the route's backends would send. */
function checkAdapters(router: ChatRouter, chat: ChatRequest): void {
  try {
    router.checkRequest?.(chat.route, chat)
  } catch (error) {
    throw error instanceof UpstreamError ? toApiError(error) : error
  }
}
