import { t } from 'elysia'
import { JsonInteger, MaxCharacters } from '../http/openapi-schemas'
import { ChatMessage } from '../inference/dialects/chat-completions/schema'

// Wire schemas of POST /api/v1/chat/fusion (spec §2.3, §4.5). Unknown fields are rejected.

/** The request body (spec §4.5), plus the optional judge and the opt-in progress stream. */
export const FusionBody = t.Object(
  {
    models: t.Array(MaxCharacters(256, { minLength: 1 }), {
      minItems: 2,
      maxItems: 3,
      description: 'Two or three distinct logical model ids from the live catalog (GET /api/v1/models)',
      error: 'models must list 2 or 3 distinct model ids from the catalog',
    }),
    messages: t.Array(ChatMessage, {
      minItems: 1,
      description: 'The conversation, in the Chat Completions message format',
      error: 'messages must be a non-empty array of Chat Completions messages (role and content)',
    }),
    temperature: t.Optional(t.Number({ minimum: 0, maximum: 2, description: 'Applied to every participant (the judge keeps its default)' })),
    top_p: t.Optional(t.Number({ minimum: 0, maximum: 1, description: 'Applied to every participant (the judge keeps its default)' })),
    max_tokens: t.Optional(JsonInteger({ minimum: 1, description: "Output cap of every participant; the judge's is this bounded by its own maximum" })),
    user: t.Optional(MaxCharacters(256, { description: "The caller's end-user id, for the gateway's abuse controls; never forwarded upstream" })),
    web_search: t.Optional(t.Boolean({ description: 'Hosted web search on every participant (the model must support it)' })),
    web_fetch: t.Optional(t.Boolean({ description: 'Hosted web fetch on every participant (the model must support it)' })),
    judge: t.Optional(MaxCharacters(256, { minLength: 1, description: 'The model that writes the synthesis; default: the configured fusion.judge' })),
    stream: t.Optional(
      t.Boolean({
        description:
          'Off by default. true answers text/event-stream progress events: participant.started, participant.finished, participant.failed, ' +
          'synthesis.started, synthesis.delta, then fusion.completion carrying the result object (or error carrying the error envelope)',
      }),
    ),
    // Recognised only so that function tools get a clear 400 rather than "unknown field".
    tools: t.Optional(
      t.Array(t.Unknown(), {
        description: 'Function tools are not supported in Fusion (400); web_search / web_fetch entries equal the flags, with Chat Completions\' limits (max_uses, allowed_domains, blocked_domains) on every participant',
      }),
    ),
  },
  { additionalProperties: false },
)

export type FusionRequest = typeof FusionBody.static

/** Attestation of one Confidential call (issue 9 point 4): the evidence the call was bound to. */
export const FusionAttestation = t.Object(
  {
    model: t.String({ description: 'The model id attested (with its :confidential suffix)' }),
    nonce: t.String({ description: 'The 64-hex challenge of the evidence fetched before this call' }),
    signing_address: t.String({ description: "The backend's signing address, as observed" }),
    signing_algo: t.String({ description: 'As observed from the backend, e.g. ecdsa or ed25519' }),
    proof_format: t.String({ description: 'Identifier of the evidence layout (see GET /api/v1/attestation)' }),
  },
  { description: 'Present only when the participants are Confidential; fetch the full evidence with GET /api/v1/attestation' },
)

/** Usage is what a run used, not what it was charged: they differ under a repeated Idempotency-Key. */
const REPEAT_USAGE =
  'Usage, not the charge: a request repeated under the same Idempotency-Key runs again and reports its own usage, but a part already charged under its billing key is not charged again'

export const FusionParticipant = t.Object({
  id: t.String({ description: 'Participant model id' }),
  model: t.String({ description: 'Participant model id' }),
  output: t.String({ description: "The participant's answer (empty when its call failed)" }),
  finish_reason: t.String({ description: 'How its call ended: stop, length, content_filter, or error when the call failed' }),
  latency_ms: JsonInteger({ description: 'From the start of the participant call to its end, in milliseconds' }),
  prompt_tokens: JsonInteger({
    description:
      "Input usage of this run's call (0 when the call failed: such a participant is not billed; one that ended without answer text is billed for what it used). " +
      REPEAT_USAGE,
  }),
  tokens: JsonInteger({ description: 'Output usage, as prompt_tokens' }),
  error: t.Optional(
    t.String({
      description: 'Present when the participant failed: its call failed, or it ended without answer text (empty, or a refusal: error_code provider_error, finish_reason as it ended); a failed participant is not an answer',
    }),
  ),
  error_code: t.Optional(
    t.String({ description: 'Present when the participant failed: a code of the error table (provider_error, rate_limited, insufficient_quota, invalid_request, unavailable…)' }),
  ),
  attestation: t.Optional(FusionAttestation),
})

/** The result object (spec §2.3). There is no aggregate cost field. */
export const FusionResult = t.Object(
  {
    object: t.Literal('fusion.completion'),
    created: JsonInteger({ description: 'Unix time in seconds' }),
    status: t.Union([t.Literal('complete'), t.Literal('partial'), t.Literal('failed')], {
      description: 'complete: at least two participants and the synthesis succeeded; partial: only one participant succeeded, or the synthesis failed; failed: every participant failed',
    }),
    judge: t.String({ description: 'Model id that produced (or was to produce) the synthesis' }),
    models: t.Array(FusionParticipant, { description: 'One entry per participant, in request order' }),
    synthesis: t.String({ description: 'The synthesized answer (empty when the synthesis failed or did not run; a judge that answered no text, or refused at all, in a refusal field or with a content_filter stop, failed)' }),
    synthesis_prompt_tokens: JsonInteger({ description: `Synthesis input usage of this run's judge call (0 when it did not run, or failed without being billed). ${REPEAT_USAGE}` }),
    synthesis_tokens: JsonInteger({
      description:
        'Synthesis output usage, as synthesis_prompt_tokens. With stream: true a synthesis that failed after its deltas went out is billed like a cut stream, and reports that usage: the input and the output sent',
    }),
    synthesis_finish_reason: t.Optional(
      t.String({ description: "How the judge's call ended when it answered: stop, or length (the synthesis was cut at its output limit; a content_filter stop fails the synthesis)" }),
    ),
    synthesis_error: t.Optional(t.String({ description: 'Present when the synthesis ran and failed' })),
    synthesis_error_code: t.Optional(t.String({ description: 'Present when the synthesis ran and failed' })),
    judge_attestation: t.Optional(FusionAttestation),
  },
  { description: 'A fusion.completion object; with stream: true, text/event-stream progress events ending in this object' },
)

export type FusionResultBody = typeof FusionResult.static
export type FusionParticipantBody = typeof FusionParticipant.static
export type FusionAttestationBody = typeof FusionAttestation.static
