import { HeldRefusal } from '../billing/ledger-rules'
import { ApiError } from '../http/errors'
import type { Principal } from '../keys/principal'
import type { Nanos } from '../lib/money'
import type { ChatEvent, ChatRequest, FinishReason, Usage } from '../inference/canonical'
import type { ChatResult } from '../inference/collect'
import { collectChat, DeliveredFailure, type CallAttestation, type PipelineDeps } from '../inference/pipeline'
import { AdapterRefusal, toApiError } from '../inference/upstream-errors'

/** A cancellable deadline. */
export interface Deadline {
  readonly signal: AbortSignal
  clear(): void
}

/** Starts deadlines: the real one uses timers; tests pass one they expire by hand. */
export interface Deadlines {
  start(ms: number): Deadline
}

export const timerDeadlines: Deadlines = {
  start(ms) {
    const controller = new AbortController()
    const timer = setTimeout(() => controller.abort(new DOMException('deadline passed', 'TimeoutError')), ms)
    return { signal: controller.signal, clear: () => clearTimeout(timer) }
  },
}

/** How one part (a participant or the judge) ended. */
export interface PartOutcome {
  readonly text: string
  readonly finishReason: FinishReason
  /**
   * The usage charged; absent when nothing was. A failed part is charged only when its output
   * had already been streamed to the client (the synthesis of `stream: true`), or when its call
   * ended with no answer text (noAnswer): the provider did the work.
   */
  readonly usage: Usage | undefined
  readonly latencyMs: number
  /** Set when the part failed: its call failed, or ended without an answer (noAnswer). */
  readonly error: ApiError | undefined
  /**
   * Whether the part got past its own admission (validation, funds, cap, a drain) and
   * called a provider. A request whose every participant failed before that gets the HTTP error
   * itself instead of a 200 with per-participant errors.
   */
  readonly reachedProvider: boolean
  readonly attestation: CallAttestation | undefined
}

export interface PartInput {
  /** What the part is, for its log line. */
  role: 'participant' | 'judge'
  principal: Principal
  chat: ChatRequest
  requestId: string
  /** The whole request's signal (client gone). */
  signal: AbortSignal
  timeoutMs: number
  billingKey: string | undefined
  /** Sees each event as it arrives; a promise it returns holds the part's next upstream read. */
  onEvent?: (event: ChatEvent) => void | Promise<void>
  /** Whether onEvent has sent output on to the client (then a failure charges what was sent). */
  delivered?: () => boolean
  /** The run's documents were already read (held for charging): a drain that began since lets this part run. */
  continuesRun?: boolean
  /** The part was admitted (its reservation held), just before its provider is called. */
  onAdmitted?: () => void
  /** What the run holds already (its documents' units): a refusal they cause is not "retry shortly". */
  ownHeld?: Nanos
}

/**
 * Runs one part through the chat pipeline (so every backend, format, level and billing rule of
 * chat applies), non-streamed, under its own deadline. Never throws: a failure is an outcome.
 * Each part is its own reservation, settled or released exactly once by the pipeline; it takes
 * no inference slot: the run's caller holds one for every part.
 */
export async function runPart(pipeline: PipelineDeps, deadlines: Deadlines, input: PartInput): Promise<PartOutcome> {
  const deadline = deadlines.start(input.timeoutMs)
  const signal = AbortSignal.any([input.signal, deadline.signal])
  const started = pipeline.clock.now()
  let reachedProvider = false
  let outcome: PartOutcome
  let charged = 0n
  // The client left before the part ended: cut (or never started) by that, not by its provider.
  let cancelled = false
  try {
    const collected = await collectChat(
      pipeline,
      {
        principal: input.principal, request: input.chat, requestId: input.requestId, signal, purpose: 'fusion', billingKey: input.billingKey, ownHeld: input.ownHeld,
        // The run holds the org's inference slot for all its parts (executeFusion).
        slotHeld: true,
        onAdmitted: () => {
          reachedProvider = true
          input.onAdmitted?.()
        },
        // A drain refuses new requests; the judge belongs to a run already in flight, and so do
        // participants of a run whose documents were already extracted.
        continuesRequest: input.role === 'judge' || input.continuesRun === true,
      },
      input.onEvent,
      input.delivered,
    )
    charged = collected.charged
    outcome = {
      text: collected.result.text, finishReason: collected.result.finishReason, usage: collected.usage, latencyMs: pipeline.clock.now() - started,
      error: noAnswer(input.chat.model, collected.result, input.role), reachedProvider, attestation: collected.attestation,
    }
  } catch (thrown) {
    cancelled = input.signal.aborted
    let error = toApiError(thrown)
    // Admitted, then refused by every backend's adapter: no provider was called after all, so a
    // run whose every participant ends so is refused as a whole (checks.ts finds most beforehand).
    if (error instanceof AdapterRefusal) reachedProvider = false
    if (deadline.signal.aborted && !input.signal.aborted) {
      error = new ApiError('provider_error', `${input.chat.model} did not finish within ${input.timeoutMs} ms`)
    }
    // Output already streamed to the client was charged, as a cut stream's is: the usage says how much.
    const delivered = thrown instanceof DeliveredFailure ? thrown : undefined
    if (delivered) charged = delivered.charged
    outcome = { text: '', finishReason: 'error', usage: delivered?.usage, latencyMs: pipeline.clock.now() - started, error, reachedProvider, attestation: delivered?.attestation }
  } finally {
    deadline.clear()
  }
  logPart(pipeline, input, outcome, charged, cancelled)
  return outcome
}

/**
 * The part's own log line (ARCHITECTURE.md §8 step 9: every billed call logs its usage and
 * charge). A part has no HTTP request whose line would carry them, so it writes a `chat` line of
 * purpose fusion; the run's `fusion` line sums up. A part its client's leaving ended is
 * `cancelled`, as a chat the client left is, never an upstream failure. Never content.
 */
function logPart(pipeline: PipelineDeps, input: PartInput, outcome: PartOutcome, charged: bigint, cancelled: boolean): void {
  const failure = cancelled ? undefined : outcome.error
  pipeline.logger.info('chat', {
    request_id: input.requestId, org_id: input.principal.orgId, key_id: input.principal.keyId, purpose: 'fusion', role: input.role, model: input.chat.model,
    outcome: cancelled ? 'cancelled' : failure ? 'failed' : 'ok', ...(failure ? { error_code: failure.code } : {}),
    input_tokens: outcome.usage?.inputTokens ?? 0, output_tokens: outcome.usage?.outputTokens ?? 0, charged_nanos: String(charged), latency_ms: outcome.latencyMs,
  })
}

/**
 * Why a call that ended normally gave no answer, if it did not: no text (a refusal such as
 * Anthropic's `refusal` stop, which sends none, an empty reply, an output limit spent before any
 * text) or only a refusal's text (Chat Completions' `refusal`). Such a participant is no answer
 * for the judge nor toward `complete`, and such a judge wrote no synthesis (QA: both counted as
 * successes). A judge that refused at all wrote none either: its refusal's text is never streamed
 * as synthesis (executeFusion), so the synthesis would not be what the client was sent. A
 * content-filter stop is a judge's refusal too, after text or not (Anthropic's `refusal` stop
 * cuts an answer it already streamed: "Both answers agree that"); the text streamed before it is
 * not taken back, as with a Chat Completions refusal after content. The call stays charged, as the
 * same chat's would be: the provider did the work.
 */
function noAnswer(model: string, result: ChatResult, role: PartInput['role']): ApiError | undefined {
  const text = result.text.trim()
  const refused = role === 'judge' ? result.refusal.trim() !== '' || result.finishReason === 'content-filter' : text === result.refusal.trim()
  if (text !== '' && !refused) return undefined
  if (text !== '' || result.finishReason === 'content-filter') return new ApiError('provider_error', `${model} refused to answer`)
  if (result.finishReason === 'length') return new ApiError('provider_error', `${model} reached its output limit before writing any answer text`)
  return new ApiError('provider_error', `${model} returned an empty answer`)
}

/** A part refused by validation before anything ran. */
export function refusedPart(error: ApiError): PartOutcome {
  return { text: '', finishReason: 'error', usage: undefined, latencyMs: 0, error, reachedProvider: false, attestation: undefined }
}

/**
 * A participant refused for money only held (funds or the key's cap) while other participants
 * of its run held theirs: the run's own parts hold it, so the ledger's "retry shortly" would send
 * the client back to be refused again (QA). Each part is reserved and capped on its own (spec
 * §4.5), so the run goes on without it; its error says what would fit instead.
 */
export function heldBySiblings(outcome: PartOutcome): PartOutcome {
  const error = outcome.error
  if (!(error instanceof HeldRefusal) || error.why !== 'held') return outcome
  const message = `${error.refused} while the other participants of this run hold theirs: a run needs room for its participants' worst-case costs at once, so the same run would be refused again; ask for fewer output tokens (max_tokens) or fewer models`
  return { ...outcome, error: new ApiError('insufficient_quota', message) }
}
