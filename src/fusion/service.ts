import { PendingCharges } from '../billing/metering'
import type { ModelRoute } from '../catalog/types'
import type { Config } from '../config/config'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { ChatRequest, Message } from '../inference/canonical'
import { decodeChatCompletions } from '../inference/dialects/chat-completions/decode'
import { addHostedTool, HOSTED_TOOL_OPTIONS } from '../inference/dialects/hosted-tool-options'
import type { PipelineDeps } from '../inference/pipeline'
import { enrichDocuments, hasFileParts } from '../inference/enrich/documents'
import { Lifecycle } from '../observability/lifecycle'
import { fusionBillingKeys, parseIdempotencyKey, refuseReusedKey } from './billing-keys'
import { checkJudge, judgeChat, refuseParticipants } from './checks'
import { attestationBody, finishReasonOf, participantEntry } from './participant-entry'
import { heldBySiblings, refusedPart, runPart, timerDeadlines, type Deadlines, type PartOutcome } from './part'
import { resolveFusionRoutes, type RouteResolver } from './privacy'
import type { FusionParticipantBody, FusionRequest, FusionResultBody } from './schema'
import { buildSynthesisMessages } from './synthesis-prompt'

/** What the Fusion service needs; built once (app.ts), shared by the HTTP route and MCP. */
export interface FusionDeps {
  pipeline: PipelineDeps
  catalog: RouteResolver
  config: Config['fusion']
  /** Whether the organization's plan includes Fusion, read per request (a plan switch applies at once). */
  planOf(orgId: string): Promise<{ planId: string | undefined; fusion: boolean }>
  /** Whether the organization was charged under a billing key starting with `family` but not with `own` (billing/billed-keys.ts). */
  billedOutside(orgId: string, family: string, own: string): Promise<boolean>
  /** Per-part deadlines (tests expire them by hand). */
  deadlines?: Deadlines
}

/** Progress of a run, for `stream: true` (and MCP progress notifications). */
export type FusionProgress =
  | { type: 'participant.started'; index: number; model: string }
  | { type: 'participant.finished' | 'participant.failed'; index: number; model: string; participant: FusionParticipantBody }
  | { type: 'synthesis.started'; judge: string }

export interface FusionInput {
  principal: Principal
  /** The request body, already checked against FusionBody (the route's schema; MCP builds it). */
  request: FusionRequest
  /** The raw `Idempotency-Key` value, if any (a UUID, else 400). */
  idempotencyKey?: string | null
  requestId: string
  /** Aborts every part (the client left). */
  signal: AbortSignal
  /**
   * Hosted tools to turn on for each participant whose model supports them, on top of the
   * request's own flags (which apply to every participant and are refused where unsupported).
   * MCP's svc.chat_fusion has web search and fetch on by default: this is how a default reaches
   * only the models that can honour it. HTTP callers leave it unset.
   */
  hostedDefaults?: { webSearch: boolean; webFetch: boolean }
  onProgress?: (event: FusionProgress) => void
  /**
   * Sends each piece of the synthesis to the client as it arrives (`stream: true`); returns
   * whether it went out. Once one has, the synthesis is billed as a stream is: a judge that then
   * fails, or whose client leaves, is charged for the input and the output sent.
   */
  onSynthesisDelta?: (delta: string) => boolean
  /**
   * Undefined while the client keeps up with the synthesis; else a promise that settles once it
   * has read enough, or has left. The judge's upstream is read no faster (`stream: true`).
   */
  synthesisReady?: () => Promise<void> | undefined
  /**
   * A participant was admitted (funds and cap allowed it), just before its provider
   * is called. A run refused as a whole throws before any is: a stream can wait for this to
   * keep such a refusal's HTTP status.
   */
  onAdmitted?: () => void
}

/** A checked request, ready to run: everything deterministic has been refused already. */
export interface FusionPlan {
  readonly input: FusionInput
  readonly participants: readonly ModelRoute[]
  readonly judge: ModelRoute
  /** One decoded chat request per participant (each run mutates its own). */
  readonly chats: readonly ChatRequest[]
  /** Participants refused by their model's policy (capabilities, context), by index. */
  readonly refused: ReadonlyMap<number, ApiError>
  readonly conversation: readonly Message[]
  readonly billingKeys: ReturnType<typeof fusionBillingKeys> | undefined
  /** The attached documents were extracted: the run is in flight (a drain lets it run). */
  readonly extracted: boolean
  /** Their parse units, charged once a participant's output is (nothing if none is). */
  readonly pending: PendingCharges | undefined
}

/**
 * Runs one Fusion request (spec §4.5): checks access and the request, runs the participants
 * concurrently through the chat pipeline, then the judge's synthesis, and returns the result
 * object of spec §2.3. Throws ApiError for a request refused as a whole: no Fusion access
 * (403), bad input (400), no free inference slot for the run (429), or every participant
 * failing before any provider was called (validation, adapters, funds, spend cap: that error's own
 * status), or a caller that left
 * (`signal` aborted: nobody receives the result). Provider failures are per participant, in the
 * result.
 */
export async function runFusion(deps: FusionDeps, input: FusionInput): Promise<FusionResultBody> {
  return executeFusion(deps, await planFusion(deps, input))
}

/** The checks of runFusion that precede any work (routes run them before an SSE response starts). */
export async function planFusion(deps: FusionDeps, input: FusionInput): Promise<FusionPlan> {
  const { principal, request } = input
  let plan: { planId: string | undefined; fusion: boolean }
  try {
    plan = await deps.planOf(principal.orgId)
  } catch {
    throw new ApiError('unavailable', 'the plan of this organization could not be read; try again shortly')
  }
  if (!plan.fusion) {
    throw new ApiError(
      'forbidden',
      `Fusion requires a plan with Fusion access; this organization's plan${plan.planId ? ` "${plan.planId}"` : ''} does not include it (a prepaid balance alone does not unlock Fusion)`,
    )
  }
  const idempotencyKey = parseIdempotencyKey(input.idempotencyKey)
  const hosted = hostedOf(request)
  request.messages.forEach((message, index) => {
    if (message.role === 'tool' || (message.role === 'assistant' && (message.tool_calls?.length ?? 0) > 0)) {
      throw new ApiError('invalid_request', 'function tools are not supported in Fusion, so the conversation cannot carry tool calls or results', `messages.${index}`)
    }
  })
  const { participants, judge } = resolveFusionRoutes(deps.catalog, request.models, request.judge, deps.config.judge)

  const decode = (route: ModelRoute): ChatRequest => {
    const chat = decodeChatCompletions(
      { model: route.id, messages: request.messages, temperature: request.temperature, top_p: request.top_p, max_tokens: request.max_tokens, user: request.user, stream: false },
      route,
    )
    chat.hosted = { ...hosted }
    return chat
  }
  const chats = participants.map(route => {
    const chat = decode(route)
    chat.hosted = participantHosted(route, hosted, input.hostedDefaults)
    return chat
  })
  // The judge must accept the conversation itself (images, say): found now, not after billing
  // participants. It runs at the caller's output cap bounded by its own (judgeChat).
  const judged = judgeChat(judge, decode(judge).messages, request)
  const conversation = judged.messages
  // With files attached, the adapters are asked once they are text (extractOnce).
  const extracted = hasFileParts(judged)
  const adapters = extracted ? undefined : deps.pipeline.router
  const refused = new Map<number, ApiError>()
  refuseParticipants(chats, refused, adapters)
  checkJudge(judged, request, adapters)
  const billingKeys = idempotencyKey ? fusionBillingKeys(idempotencyKey, principal.orgId, request, hosted, judge.id, input.hostedDefaults) : undefined
  if (billingKeys) await refuseReusedKey(deps, principal.orgId, billingKeys)
  const pending = extracted ? new PendingCharges() : undefined
  if (pending) await extractOnce(deps.pipeline, input, judged, chats, refused, billingKeys?.documents, pending)
  return { input, participants, judge, chats, refused, conversation, billingKeys, extracted, pending }
}

/**
 * Attached documents, extracted (and billed, one document-parse unit per file) once for the
 * whole run instead of once by every participant and again by the judge (QA: one file in a
 * three-model Fusion was four units). The judge's conversation is enriched in place, and each
 * participant's file parts (the same files, in the same order) become the same text parts.
 * Every part is checked with the text before the units are charged: the judge must hold it, a
 * participant that cannot is refused alone, and when none can the units are released and the
 * request is a 400 (QA: it was charged for a document no participant could read).
 * Under an Idempotency-Key the parse units get a billing key too, so a repeat pays for them once.
 * The units are held in `pending` until the participants end (executeFusion), and charged only
 * when one of them was charged for output: a run refused as a whole (concurrency, funds, cap), or
 * whose every participant failed without output charged, pays nothing for its documents, as a
 * chat refused or failing before any output does.
 */
async function extractOnce(
  pipeline: PipelineDeps, input: FusionInput, judged: ChatRequest, chats: ChatRequest[], refused: Map<number, ApiError>, billingKey: string | undefined,
  pending: PendingCharges,
): Promise<void> {
  const files: Array<{ message: number; part: number }> = []
  judged.messages.forEach((message, index) => message.parts.forEach((part, at) => part.type === 'file' && files.push({ message: index, part: at })))
  await enrichDocuments(pipeline, { principal: input.principal, request: judged, requestId: input.requestId, signal: input.signal, billingKey, pending }, enriched => {
    checkJudge(enriched, input.request, pipeline.router)
    const texts = files.map(({ message, part }) => enriched.messages[message]!.parts[part]!)
    for (const chat of chats) {
      let next = 0
      for (const message of chat.messages) message.parts = message.parts.map(part => (part.type === 'file' ? texts[next++]! : part))
    }
    refuseParticipants(chats, refused, pipeline.router)
  })
}

/**
 * Runs a checked request under one org inference slot, held from before the first participant
 * until the judge has ended: the run counts against `org_inference_concurrency` as one request,
 * as a chat does (QA: each part took its own slot, so with one slot a lone two-model run always
 * lost a participant to 429 and with two a third model was always refused: a run refused its
 * own parts). No free slot: the run is refused as a whole (429 rate_limited, Retry-After), with
 * nothing reserved or called and its documents' units released.
 */
export async function executeFusion(deps: FusionDeps, plan: FusionPlan): Promise<FusionResultBody> {
  let freeSlot: () => void
  try {
    freeSlot = deps.pipeline.metering.holdInferenceSlot(plan.input.principal)
  } catch (error) {
    plan.pending?.releaseAll()
    throw error
  }
  try {
    return await runParts(deps, plan)
  } finally {
    freeSlot()
  }
}

/** The run itself: participants concurrently, then the judge; builds the result object. */
async function runParts(deps: FusionDeps, plan: FusionPlan): Promise<FusionResultBody> {
  const { input, participants, judge } = plan
  const { pipeline } = deps
  const deadlines = deps.deadlines ?? timerDeadlines
  // Once the client has left (a closed connection, an MCP cancel) nothing more is announced: its
  // parts' aborts are no provider failures, and no judge runs (QA: "judge: writing the synthesis").
  const announce = input.onProgress
  const progress = announce && ((event: FusionProgress) => void (input.signal.aborted || announce(event)))
  const started = pipeline.clock.now()
  const created = Math.floor(started / 1000)

  // Whether a participant was admitted: participants are admitted side by side, so a sibling
  // refused for held money was refused for what the admitted ones held.
  let admitted = false
  const outcomes = await Promise.all(
    participants.map(async (route, index): Promise<PartOutcome> => {
      const refusal = plan.refused.get(index)
      let outcome: PartOutcome
      // Every participant starts and ends (MCP's progress counts two steps each), a refused one too.
      progress?.({ type: 'participant.started', index, model: route.id })
      if (refusal) outcome = refusedPart(refusal)
      else {
        outcome = await runPart(pipeline, deadlines, {
          role: 'participant', principal: input.principal, chat: plan.chats[index]!, requestId: input.requestId, signal: input.signal,
          timeoutMs: deps.config.participantTimeoutMs, billingKey: plan.billingKeys?.participant(route.id), continuesRun: plan.extracted, ownHeld: plan.pending?.total,
          onAdmitted: () => {
            admitted = true
            input.onAdmitted?.()
          },
        })
        if (admitted && !outcome.reachedProvider) outcome = heldBySiblings(outcome)
      }
      progress?.({ type: outcome.error ? 'participant.failed' : 'participant.finished', index, model: route.id, participant: participantEntry(route, outcome) })
      return outcome
    }),
  )
  const answered = outcomes.filter(outcome => outcome.error === undefined)
  // Nothing reached a provider (funds, cap, ledger, a drain): the caller gets that error, as chat would.
  if (answered.length === 0 && outcomes.every(outcome => !outcome.reachedProvider)) {
    plan.pending?.releaseAll()
    throw outcomes.find((_outcome, index) => !plan.refused.has(index))!.error!
  }
  // The run's documents are charged only when a participant answered, as a chat's files are
  // charged only with its output; committed before the result. A `failed` run (no answer, even if
  // a part was billed for a refusal or an empty reply) charges nothing for them (QA, twice).
  if (answered.length > 0) await plan.pending?.settleAll()
  else plan.pending?.releaseAll()

  let synthesis: PartOutcome | undefined
  // Past the drain's deadline nothing starts (Lifecycle.cut), nor once the client has left: the
  // run ends partial without a judge call, and without announcing one.
  if (answered.length > 0 && pipeline.lifecycle.cut) synthesis = refusedPart(Lifecycle.refusal())
  else if (answered.length > 0 && input.signal.aborted) synthesis = refusedPart(new ApiError('unavailable', 'the run was cancelled: its client left'))
  else if (answered.length > 0) {
    progress?.({ type: 'synthesis.started', judge: judge.id })
    const answers = answered.map(outcome => ({ text: outcome.text, finishReason: outcome.finishReason }))
    const chat = judgeChat(judge, buildSynthesisMessages(plan.conversation, answers), input.request)
    const forward = input.onSynthesisDelta
    let sent = false
    synthesis = await runPart(pipeline, deadlines, {
      role: 'judge', principal: input.principal, chat, requestId: input.requestId, signal: input.signal, timeoutMs: deps.config.judgeTimeoutMs,
      billingKey: plan.billingKeys?.judge,
      onEvent: forward
        ? event => {
            // A refusal (Chat Completions' `refusal`) is no synthesis: it fails the judge
            // (part.ts, noAnswer), so it is never streamed as one.
            if (event.type !== 'text-delta' || event.refusal) return undefined
            if (forward(event.delta)) sent = true
            return input.synthesisReady?.()
          }
        : undefined,
      delivered: () => sent,
    })
  }

  const synthesized = synthesis !== undefined && synthesis.error === undefined
  const result: FusionResultBody = {
    object: 'fusion.completion',
    created,
    status: answered.length === 0 ? 'failed' : answered.length >= 2 && synthesized ? 'complete' : 'partial',
    judge: judge.id,
    models: participants.map((route, index) => participantEntry(route, outcomes[index]!)),
    synthesis: synthesized ? synthesis!.text : '',
    synthesis_prompt_tokens: synthesis?.usage?.inputTokens ?? 0,
    synthesis_tokens: synthesis?.usage?.outputTokens ?? 0,
  }
  // How the judge's answer ended, when it answered: a synthesis cut at its output limit is still one.
  if (synthesis !== undefined && synthesis.error === undefined) result.synthesis_finish_reason = finishReasonOf(synthesis.finishReason)
  if (synthesis?.error) {
    result.synthesis_error = synthesis.error.message
    result.synthesis_error_code = synthesis.error.code
  }
  if (synthesis?.attestation) result.judge_attestation = attestationBody(judge.id, synthesis.attestation)
  // One line per run; each part logged its own `chat` line (purpose fusion) with its charge (part.ts).
  pipeline.logger.info('fusion', {
    request_id: input.requestId, org_id: input.principal.orgId, key_id: input.principal.keyId, status: result.status,
    models: participants.map(route => route.id).join(','), judge: judge.id, answered: answered.length, synthesized,
    latency_ms: pipeline.clock.now() - started,
  })
  // The client left: the result reaches no one, so the request ends as a collected chat whose
  // client left does (its line `cancelled`, 499), not as a 200 with upstream failures. What
  // the parts delivered before is charged as it was.
  if (input.signal.aborted) throw new ApiError('unavailable', 'the client closed the request before the Fusion result')
  return result
}

/**
 * The hosted tools one participant runs: the request's flags (checked against the model's
 * capabilities by the policy, so an unsupported one refuses that participant), plus the
 * defaults where the model supports them.
 */
export function participantHosted(route: ModelRoute, hosted: ChatRequest['hosted'], defaults?: { webSearch: boolean; webFetch: boolean }): ChatRequest['hosted'] {
  const capabilities = route.capabilities
  return {
    ...hosted,
    webSearch: hosted.webSearch || (defaults?.webSearch === true && capabilities.supportsWebSearch),
    webFetch: hosted.webFetch || (defaults?.webFetch === true && capabilities.supportsWebFetch),
  }
}

/**
 * `web_search` / `web_fetch` flags and their tool-entry spellings, with Chat Completions' options
 * (max_uses, allowed_domains, blocked_domains) applied to every participant; function tools are a 400.
 */
function hostedOf(request: FusionRequest): ChatRequest['hosted'] {
  const hosted: ChatRequest['hosted'] = { webSearch: request.web_search === true, webFetch: request.web_fetch === true }
  request.tools?.forEach((tool, index) => {
    const type = typeof tool === 'object' && tool !== null ? (tool as { type?: unknown }).type : undefined
    if (type === 'web_search' || type === 'web_fetch') addHostedTool(hosted, type === 'web_fetch' ? 'fetch' : 'search', tool as Record<string, unknown>, `tools.${index}`, HOSTED_TOOL_OPTIONS)
    else if (type === 'function') throw new ApiError('invalid_request', 'function tools are not supported in Fusion', `tools.${index}`)
    else throw new ApiError('invalid_request', 'unsupported tool entry: Fusion accepts only web_search and web_fetch', `tools.${index}`)
  })
  return hosted
}
