import type { ModelRoute } from '../catalog/types'
import type { FinishReason } from '../inference/canonical'
import type { CallAttestation } from '../inference/pipeline'
import type { PartOutcome } from './part'
import type { FusionAttestationBody, FusionParticipantBody } from './schema'

// The result object's entries (spec §2.3): one per participant, and the attestation fields of a
// Confidential part.

const FINISH: Record<FinishReason, string> = {
  stop: 'stop', length: 'length', 'tool-calls': 'tool_calls', 'content-filter': 'content_filter', error: 'error', other: 'stop',
}

/** A part's finish reason as the result spells it (Chat Completions' words). */
export function finishReasonOf(reason: FinishReason): string {
  return FINISH[reason]
}

/** A participant's entry in `models`: its answer, usage and latency, and its error when it failed. */
export function participantEntry(route: ModelRoute, outcome: PartOutcome): FusionParticipantBody {
  const entry: FusionParticipantBody = {
    id: route.id, model: route.id, output: outcome.text, finish_reason: finishReasonOf(outcome.finishReason), latency_ms: outcome.latencyMs,
    prompt_tokens: outcome.usage?.inputTokens ?? 0, tokens: outcome.usage?.outputTokens ?? 0,
  }
  if (outcome.error) {
    entry.error = outcome.error.message
    entry.error_code = outcome.error.code
  }
  if (outcome.attestation) entry.attestation = attestationBody(route.id, outcome.attestation)
  return entry
}

/** What a Confidential part attested with: the nonce of its evidence and the key it bound. */
export function attestationBody(model: string, attestation: CallAttestation): FusionAttestationBody {
  return { model, nonce: attestation.nonce, signing_address: attestation.signingAddress, signing_algo: attestation.signingAlgo, proof_format: attestation.proofFormat }
}
