import { Elysia, t } from 'elysia'
import { authMacro } from '../http/auth'
import { authErrors, ErrorResponse, noStore } from '../http/openapi-schemas'
import type { KeyService } from '../keys/service'
import type { Limits } from '../limits/admission'
import type { AttestationService } from './service'

// Documented as OpenAPI parameters, validated in the service after authentication (so an
// unauthenticated caller gets 401, never a validation answer) and from the raw query string (so
// repeated and unknown parameters are refused rather than merged or dropped).
const PARAMETERS = [
  { name: 'model', required: true, description: 'Model id ending in :confidential, or :encrypted with trust_tier=encrypted' },
  { name: 'trust_tier', required: false, description: 'confidential (default) or encrypted', schema: { type: 'string' as const, enum: ['confidential', 'encrypted'] } },
  { name: 'nonce', required: false, description: '32 random bytes as 64 hex characters; generated when omitted; never stored', schema: { type: 'string' as const, pattern: '^[0-9a-fA-F]{64}$' } },
  { name: 'signing_address', required: false, description: 'Forwarded to the backend: only a backend with this signing address answers (else 404)' },
  { name: 'signing_algo', required: false, description: "ed25519 or ecdsa, forwarded to the backend; default: ecdsa for a 0x signing_address, ed25519 for another signing_address, else the backend's first", schema: { type: 'string' as const, enum: ['ed25519', 'ecdsa'] } },
].map(parameter => ({ in: 'query' as const, schema: { type: 'string' as const }, ...parameter }))

const Attestation = t.Object(
  {
    object: t.Literal('attestation'),
    model: t.String(),
    provider_model_id: t.String({ description: "The backend's model name: what the forwarded body (and the Phala v2 AAD) carries" }),
    privacy_tier: t.Union([t.Literal('confidential'), t.Literal('encrypted')]),
    attestation_available: t.Boolean(),
    attestation_subject: t.String(),
    verified: t.Boolean({ description: 'Always false: the gateway checks consistency (nonce, key and address binding), not the hardware quote chain' }),
    verifier_provenance: t.String({ description: 'Always empty' }),
    nonce: t.String({ description: '64 hex characters: the challenge bound into the evidence' }),
    proof_format: t.String({ examples: ['dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2'] }),
    signing_algo: t.String(),
    signing_address: t.String(),
    signing_key: t.String(),
    model_public_key: t.String({ description: 'Hex: ed25519 32 bytes; ecdsa 65 bytes uncompressed (04…)' }),
    evidence: t.Record(t.String(), t.Unknown(), { description: 'The backend report verbatim: intel_quote, nvidia_payload, event_log, info, request_nonce…' }),
  },
  { description: 'Request-local attestation evidence (spec 2.4)' },
)

/** GET /api/v1/attestation (spec §4.9). */
export function attestationRoutes(keys: KeyService, limits: Limits, service: AttestationService) {
  return new Elysia({ tags: ['Attestation'] })
    .use(authMacro(keys, limits))
    .get(
      '/api/v1/attestation',
      async ({ request, set }) => {
        // Parsed from the raw query so repeated and unknown parameters are refused, not merged.
        const result = await service.attest(new URL(request.url).searchParams, request.signal)
        set.headers['cache-control'] = 'no-store'
        return result
      },
      {
        auth: 'inference',
        detail: {
          parameters: PARAMETERS,
          summary: 'Get attestation evidence for a Confidential or Encrypted model',
          description:
            'Fetches fresh evidence from an attested backend of the model, bound to `nonce` (yours, else generated), and checks it: ' +
            'the nonce echoed in the report, the GPU evidence and the quote report data, the signing key hashing to the signing address, ' +
            'and the address bound in the quote as `proof_format` says. The gateway does not verify the hardware quote chain ' +
            '(`verified: false`). Unknown query parameters, unknown or non-attested models: 400 before any backend call. ' +
            'Empty or contradicting evidence, or no reachable backend: 503 `unavailable`. An unserved `signing_address`: 404. ' +
            '`Cache-Control: no-store`; nothing is persisted.',
        },
        response: { 200: noStore(Attestation), 400: ErrorResponse, ...authErrors(ErrorResponse), 404: ErrorResponse },
      },
    )
}
