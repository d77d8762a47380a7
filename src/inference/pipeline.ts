import type { MeteredCall, Metering } from '../billing/metering'
import type { Backend } from '../catalog/types'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Clock } from '../lib/clock'
import type { Logger } from '../observability/logger'
import type { Provider } from '../providers/types'
import type { ChatEvent, ChatRequest, Usage } from './canonical'
import { collect } from './collect'
import type { DialectEncoder, ResponseMeta } from './dialects/types'
import { checkPolicy } from './policy'
import { estimateCharge, highInputTokens, Meter, priceUsage, typicalInputTokens } from './meter'
import { streamResponse } from './stream-response'
import { toApiError } from './upstream-errors'

/** What the pipeline needs of the provider router. */
export interface ChatRouter {
  open(
    route: ChatRequest['route'],
    request: ChatRequest,
    options: { signal: AbortSignal; requestId: string; uncensored?: boolean },
  ): Promise<{ events: AsyncIterable<ChatEvent>; backend: Backend; provider: Provider }>
  /** Exact input tokens from a backend that counts (Messages count_tokens); undefined when none does. */
  countTokens?(route: ChatRequest['route'], request: ChatRequest, options: { signal: AbortSignal; requestId: string }): Promise<number | undefined>
}

export interface PipelineDeps {
  metering: Metering
  router: ChatRouter
  logger: Logger
  clock: Clock
}

export interface ChatInput {
  principal: Principal
  request: ChatRequest
  requestId: string
  encoder: DialectEncoder
  includeUsage: boolean
  uncensored?: boolean
  /** The client's request: its signal ends the upstream call when the client leaves. */
  httpRequest: Request
  /** Lifts Bun's idle timeout for this response (long generations, slow streams). */
  disableIdleTimeout?: () => void
}

/**
 * One chat request from admission to settlement (ARCHITECTURE.md §8 steps 3–9): policy checks,
 * reserve an upper-bound estimate, call the upstream through the router, stream or collect, and
 * settle exactly once, before the final frame or the JSON body.
 */
export async function runChat(deps: PipelineDeps, input: ChatInput): Promise<Response | Record<string, unknown>> {
  const { request, requestId } = input
  const route = request.route
  checkPolicy(request)
  // Bound every upstream's output (some, like Ollama, are unbounded by default) by what was
  // reserved for: the model's cap, within the context left.
  const typicalInput = typicalInputTokens(request)
  if (request.sampling.maxOutputTokens === undefined) {
    request.sampling.maxOutputTokens = Math.max(1, Math.min(route.maxOutputTokens, route.contextLength - typicalInput))
  }
  const call = await deps.metering.begin({ principal: input.principal, purpose: 'chat', estimate: estimateCharge(request, route), inference: true, requestId })
  // The client's own signal ends the upstream call when the client leaves (Bun aborts it when
  // the connection closes); a streamed reply the client cancels also closes the provider's
  // events. No controller or listener of our own: they were ~2.4% of a request's CPU.
  const clientSignal = input.httpRequest.signal
  const started = deps.clock.now()
  const meta: ResponseMeta = {
    id: `${input.encoder.idPrefix}${Bun.randomUUIDv7('base64url')}`,
    model: request.model,
    createdAt: Math.floor(started / 1000),
    includeUsage: input.includeUsage,
    estimatedInputTokens: typicalInput,
  }
  const meter = new Meter(highInputTokens(request))

  // A long generation (streamed or collected), or a slow upstream's headers, must not be cut
  // by Bun's idle timeout.
  input.disableIdleTimeout?.()
  let opened: Awaited<ReturnType<ChatRouter['open']>>
  try {
    opened = await deps.router.open(route, request, { signal: clientSignal, requestId, uncensored: input.uncensored })
  } catch (error) {
    call.release()
    throw toApiError(error)
  }

  const log = (outcome: string, usage: Usage | undefined, charged: bigint | undefined) =>
    deps.logger.info('chat', {
      request_id: requestId, org_id: input.principal.orgId, key_id: input.principal.keyId, model: request.model,
      backend: `${opened.provider.id}/${opened.backend.model}`, outcome, stream: request.stream,
      input_tokens: usage?.inputTokens, output_tokens: usage?.outputTokens, charged_nanos: charged, latency_ms: deps.clock.now() - started,
    })
  const settle = async (call: MeteredCall): Promise<{ usage: Usage; charged: bigint }> => {
    const usage = meter.usage()
    const charged = priceUsage(route.price, usage)
    await call.settle(charged)
    return { usage, charged }
  }

  if (!request.stream) {
    try {
      const result = await collect(opened.events, event => meter.observe(event))
      if (result.error) {
        // The client receives nothing of a failed non-streamed answer, so nothing is charged.
        call.release()
        log('upstream-error', undefined, undefined)
        throw toApiError(result.error)
      }
      const { usage, charged } = await settle(call)
      log('ok', usage, charged)
      return input.encoder.encode(result, usage, meta) as Record<string, unknown>
    } catch (error) {
      // Client gone or an exception while collecting: nothing was delivered.
      if (!call.done) call.release()
      throw toApiError(error)
    }
  }

  return streamResponse({
    events: opened.events,
    encoder: input.encoder.streamEncoder(meta),
    observe: event => meter.observe(event),
    // Terminal frames are written only after this resolves (settlement before the final frame).
    async complete(outcome) {
      // A stream that failed or was left before any output charges nothing; once output was
      // sent, the reported usage or the counted fallback is charged.
      if (outcome !== 'finished' && !meter.producedOutput) {
        call.release()
        log(outcome, undefined, 0n)
        return undefined
      }
      try {
        const { usage, charged } = await settle(call)
        log(outcome, usage, charged)
        return undefined
      } catch (error) {
        log('settlement-failed', undefined, undefined)
        return error instanceof ApiError ? error : new ApiError('unavailable', 'the ledger could not record this charge')
      }
    },
  })
}
