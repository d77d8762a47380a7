// GET /api/v1/attestation (spec §4.9, 2.4; TEE-PROTOCOL.md B2, B3): request-local evidence
// for Confidential and Encrypted models. Every refusal that needs no backend happens before any
// backend call; nothing is stored, and the nonce is never logged.

import type { Backend, ModelRoute } from '../catalog/types'
import { ApiError } from '../http/errors'
import { checkQueryNames } from '../http/query'
import type { Evidence } from '../providers/attested/evidence'
import { AttestedProvider, type AttestRequest } from '../providers/attested/provider'
import type { BackendHealth } from '../providers/router'
import type { Provider } from '../providers/types'
import { UpstreamError } from '../providers/types'
import { bytesToHex, randomBytes, type SigningAlgo } from '../tee/keys'

const QUERY_KEYS = new Set(['model', 'trust_tier', 'nonce', 'signing_address', 'signing_algo'])
const ACCEPTED = 'model, trust_tier, nonce, signing_address and signing_algo are accepted'

/** A checked attestation request. */
export interface AttestationPlan {
  readonly route: ModelRoute
  readonly tier: 'confidential' | 'encrypted'
  /** 64 lowercase hex: the caller's or a generated one. */
  readonly nonce: string
  readonly algo?: SigningAlgo
  readonly signingAddress?: string
}

/** The spec 2.4 object. */
export interface AttestationObject {
  object: 'attestation'
  model: string
  provider_model_id: string
  privacy_tier: 'confidential' | 'encrypted'
  attestation_available: true
  attestation_subject: string
  verified: false
  verifier_provenance: ''
  nonce: string
  proof_format: string
  signing_algo: string
  signing_address: string
  signing_key: string
  model_public_key: string
  evidence: Record<string, unknown>
}

/** One attested backend of a route, with its provider. */
export interface AttestedBackend {
  readonly backend: Backend
  readonly provider: AttestedProvider
}

export class AttestationService {
  constructor(
    private readonly catalog: { resolve(id: string): ModelRoute },
    private readonly providers: ReadonlyMap<string, Provider>,
    /** The router's cool-down (shared with Confidential chat): absent, backends keep config order. */
    private readonly health?: BackendHealth,
  ) {}

  /** Validates the query (B3 rows 1–4); throws 400 invalid_request. */
  plan(query: URLSearchParams): AttestationPlan {
    checkQueryNames(query, ACCEPTED, name => QUERY_KEYS.has(name))
    const model = query.get('model')
    if (!model) throw new ApiError('invalid_request', 'model is required (a model id ending in :confidential or :encrypted)', 'model')
    const tierText = query.get('trust_tier') ?? 'confidential'
    if (tierText !== 'confidential' && tierText !== 'encrypted') throw new ApiError('invalid_request', 'trust_tier must be confidential or encrypted', 'trust_tier')
    const nonceText = query.get('nonce')
    if (nonceText !== null && !/^[0-9a-fA-F]{64}$/.test(nonceText)) throw new ApiError('invalid_request', 'nonce must be exactly 32 bytes as 64 hexadecimal characters', 'nonce')
    const algoText = query.get('signing_algo')
    if (algoText !== null && algoText !== 'ed25519' && algoText !== 'ecdsa') throw new ApiError('invalid_request', 'signing_algo must be ed25519 or ecdsa', 'signing_algo')
    const signingAddress = query.get('signing_address') ?? undefined
    if (signingAddress !== undefined && !/^(0x)?[0-9a-fA-F]{1,128}$/.test(signingAddress)) throw new ApiError('invalid_request', 'signing_address must be hex (0x-prefixed for ecdsa)', 'signing_address')

    const route = this.catalog.resolve(model)
    if (route.level !== 'confidential' && route.level !== 'encrypted') {
      throw new ApiError('invalid_request', `model ${route.id} is at the ${route.level} level: attestation exists only for :confidential and :encrypted ids`, 'model')
    }
    if (route.level === 'encrypted' && tierText !== 'encrypted') throw new ApiError('invalid_request', `model ${route.id} needs trust_tier=encrypted`, 'trust_tier')
    if (tierText === 'encrypted' && route.level !== 'encrypted') throw new ApiError('invalid_request', 'trust_tier=encrypted needs a model id ending in :encrypted', 'trust_tier')
    // A 0x address is an ecdsa signer's (an Ethereum-style address); any other is an ed25519
    // signer's public key. Asked for without signing_algo, it is looked for under that algorithm,
    // not the backend's first (QA: 404 for an address the backend serves, either way round).
    const algo = algoText ?? (signingAddress === undefined ? undefined : signingAddress.startsWith('0x') ? 'ecdsa' : 'ed25519')
    const plan: AttestationPlan = { route, tier: tierText, nonce: (nonceText ?? bytesToHex(randomBytes(32))).toLowerCase(), algo, signingAddress }
    this.backends(route, plan.algo) // refuses an algorithm no backend serves, before any call
    return plan
  }

  /**
   * The route's attested backends that serve `algo` (all of them without one), in config order
   * with those cooling down last; 400 when none, naming `param`: the attestation route's query
   * parameter, or the header an Encrypted chat sends the algorithm in.
   */
  backends(route: ModelRoute, algo?: SigningAlgo, param: 'signing_algo' | 'svc-encrypted-signing-algo' = 'signing_algo'): AttestedBackend[] {
    const out: AttestedBackend[] = []
    for (const backend of route.backends) {
      const provider = this.providers.get(backend.provider)
      // Config binds only attested providers to these levels; anything else is never attested.
      if (!(provider instanceof AttestedProvider)) continue
      if (algo !== undefined && !provider.signingAlgos.includes(algo)) continue
      out.push({ backend, provider })
    }
    if (out.length === 0) throw new ApiError('invalid_request', `no backend of model ${route.id} serves ${param} ${algo ?? '(any)'}`, param)
    return this.health && out.length > 1 ? this.health.readyFirst(out, target => target.backend) : out
  }

  /**
   * One evidence fetch from one backend, feeding the cool-down: a retryable failure (connection,
   * timeout, 5xx, 429) cools the backend down, an answer ends its cool-down. Evidence that
   * contradicts the challenge is not a health signal: it is 503 for this request, whatever the order.
   */
  async attestAt(target: AttestedBackend, request: Omit<AttestRequest, 'upstreamModel'>): Promise<Evidence> {
    try {
      const evidence = await target.provider.attest({ ...request, upstreamModel: target.backend.model })
      this.health?.recovered(target.backend)
      return evidence
    } catch (error) {
      this.failed(target, error)
      throw error
    }
  }

  /** A call to `target` failed: cools it down when the failure is one another backend might not have. */
  failed(target: AttestedBackend, error: unknown): void {
    if (error instanceof UpstreamError && error.retryable) this.health?.coolDown(target.backend)
  }

  /**
   * Fresh evidence from the first backend that answers, in config order (cooling ones last). Contradicting or empty
   * evidence is 503 at once (never papered over by another backend); unreachable backends are
   * passed over, then 503; a signing_address no backend serves is 404.
   */
  async fetch(plan: AttestationPlan, signal?: AbortSignal): Promise<{ target: AttestedBackend; evidence: Evidence; algo: SigningAlgo }> {
    let notFound = 0
    const targets = this.backends(plan.route, plan.algo)
    for (const target of targets) {
      const algo = plan.algo ?? target.provider.signingAlgos[0]!
      try {
        const evidence = await this.attestAt(target, { nonce: plan.nonce, algo, signingAddress: plan.signingAddress, signal })
        return { target, evidence, algo }
      } catch (error) {
        if (!(error instanceof UpstreamError)) throw error
        if (error.kind === 'not-found' && plan.signingAddress !== undefined) notFound += 1
        if (error.kind === 'aborted') throw new ApiError('unavailable', 'the request was cancelled')
      }
    }
    if (notFound === targets.length) throw new ApiError('not_found', `no backend of model ${plan.route.id} serves signing_address ${plan.signingAddress}`, 'signing_address')
    throw new ApiError('unavailable', `no attested backend of model ${plan.route.id} could produce evidence`)
  }

  async attest(query: URLSearchParams, signal?: AbortSignal): Promise<AttestationObject> {
    const plan = this.plan(query)
    const { target, evidence } = await this.fetch(plan, signal)
    return {
      object: 'attestation',
      model: plan.route.id,
      provider_model_id: target.backend.model,
      privacy_tier: plan.tier,
      attestation_available: true,
      attestation_subject: evidence.subject,
      verified: false,
      verifier_provenance: '',
      nonce: plan.nonce,
      proof_format: target.provider.proofFormat.name,
      signing_algo: evidence.signingAlgo,
      signing_address: evidence.signingAddress,
      signing_key: evidence.signingKey,
      model_public_key: evidence.modelPublicKey,
      evidence: evidence.report,
    }
  }
}
