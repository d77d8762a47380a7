// The attested provider (ARCHITECTURE.md §6; TEE-PROTOCOL.md B2–B4): a TEE backend that speaks
// Chat Completions behind an attestation report API. Confidential calls attest with a fresh
// challenge before every call and then go through the ordinary Chat Completions adapter;
// Encrypted calls are relayed as opaque bytes (relay.ts).

import type { ProviderConfig } from '../../config/config'
import type { ChatEvent } from '../../inference/canonical'
import type { GatewayMetrics } from '../../observability/gateway-metrics'
import { bytesToHex, randomBytes, type SigningAlgo } from '../../tee/keys'
import type { ProofFormat } from '../../tee/proof-format'
import { OpenAICompatibleProvider } from '../openai-compatible/provider'
import { classifyStatus, connectionError, type ErrorOrigin } from '../openai-compatible/errors'
import { openUpstreamStream, type UpstreamStream } from '../openai-compatible/open-upstream-stream'
import { UpstreamError, type AdapterCall, type CallAttestation, type Provider, type ProviderCall } from '../types'
import { checkEvidence, type Evidence } from './evidence'

/** One evidence fetch: which backend model, the challenge (64 lowercase hex), the algorithm. */
export interface AttestRequest {
  readonly upstreamModel: string
  readonly nonce: string
  readonly algo: SigningAlgo
  readonly signingAddress?: string
  /** The model key an Encrypted caller encrypted to (EvidenceRequest.modelKey). */
  readonly modelKey?: string
  readonly signal?: AbortSignal
}

/** An encrypted chat relayed as bytes: the body (model already rewritten) and the backend headers. */
export interface RelayCall {
  readonly upstreamModel: string
  readonly body: string
  readonly headers: Record<string, string>
  readonly signal: AbortSignal
  /** The body asks for one JSON answer (`stream: false`): its headers come once it is generated. */
  readonly collect?: boolean
}

/** What GET /v1/signature/{id} answers. */
export interface SignatureRecord {
  readonly text: string
  readonly signature: string
  readonly signing_address: string
  readonly signing_algo: string
}

/** Largest attestation or signature JSON accepted (reports carry quotes and event logs: a few hundred KB). */
const MAX_JSON_BYTES = 8 * 1024 * 1024

export class AttestedProvider implements Provider {
  readonly id: string
  readonly proofFormat: ProofFormat
  readonly signingAlgos: readonly SigningAlgo[]
  private readonly base: string
  private readonly chat: OpenAICompatibleProvider
  /** Set once by createDeps: evidence fetch latency and failures. */
  metrics: GatewayMetrics | undefined

  constructor(private readonly config: ProviderConfig) {
    if (config.baseUrl === undefined || config.attested === undefined) throw new Error(`provider ${config.id}: an attested provider needs base_url and proof_format`)
    this.id = `attested:${config.id}`
    this.base = config.baseUrl.replace(/\/+$/, '')
    this.proofFormat = config.attested.proofFormat
    this.signingAlgos = config.attested.signingAlgos
    // vLLM (behind the TEE proxy) takes reasoning history back as reasoning_content.
    // Its failures are this provider's (metrics and logs label them `attested:…`, as its calls).
    this.chat = new OpenAICompatibleProvider(config, { reasoningHistory: 'reasoning_content' }, this.id)
  }

  /**
   * Fetches the report for a fresh challenge and checks it (evidence.ts). Rejects with an
   * UpstreamError marked `attestation` when the backend cannot be asked (retryable kinds let the
   * router try another backend), or ApiError 503 when the evidence is empty or contradicts.
   */
  async attest(request: AttestRequest): Promise<Evidence> {
    const metrics = this.metrics
    if (metrics === undefined) return this.fetchEvidence(request)
    // Once per fetch, whoever asked (Confidential chat, Encrypted key pinning, GET /api/v1/attestation).
    const started = performance.now()
    try {
      const evidence = await this.fetchEvidence(request)
      metrics.attestationSeconds.observe((performance.now() - started) / 1000, this.id)
      return evidence
    } catch (error) {
      // A fetch the caller abandoned is neither a backend failure nor a measured fetch.
      if (!(error instanceof UpstreamError && error.kind === 'aborted')) {
        metrics.attestationSeconds.observe((performance.now() - started) / 1000, this.id)
        metrics.attestationFailures.inc(1, this.id, error instanceof UpstreamError ? error.kind : 'evidence-rejected')
      }
      throw error
    }
  }

  private async fetchEvidence(request: AttestRequest): Promise<Evidence> {
    const query = new URLSearchParams({ signing_algo: request.algo, nonce: request.nonce })
    if (request.signingAddress !== undefined) query.set('signing_address', request.signingAddress)
    if (this.proofFormat.binding === 'tlsfp') query.set('include_tls_fingerprint', 'true')
    query.set('model', request.upstreamModel)
    const body = await this.getJson(`/attestation/report?${query}`, request.upstreamModel, request.signal)
    return checkEvidence(body, { nonce: request.nonce, algo: request.algo, signingAddress: request.signingAddress, modelKey: request.modelKey, proofFormat: this.proofFormat })
  }

  /** Its chats go through the Chat Completions adapter: what it refuses. */
  checkRequest(call: AdapterCall): void {
    this.chat.checkRequest(call)
  }

  /** Confidential: the call goes ahead only once fresh evidence binds our challenge and the backend key. */
  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    return (await this.streamAttested(call)).events
  }

  /** `stream`, reporting the challenge and the key the call was bound to (Fusion's attestation fields). */
  async streamAttested(call: ProviderCall): Promise<{ events: AsyncIterable<ChatEvent>; attestation: CallAttestation }> {
    const nonce = bytesToHex(randomBytes(32))
    const evidence = await this.attest({ upstreamModel: call.upstreamModel, nonce, algo: this.signingAlgos[0]!, signal: call.signal })
    // Always streamed: the backend's protocol (signatures, E2EE) is built on its streams, so a
    // collected call does not ask this backend for one JSON answer.
    const events = await this.chat.stream({ ...call, collect: false })
    return { events, attestation: { nonce, signingAddress: evidence.signingAddress, signingAlgo: evidence.signingAlgo, proofFormat: this.proofFormat.name } }
  }

  /** Encrypted: POSTs the bytes and hands back the 2xx stream untouched (non-2xx rejects, classified). */
  relay(call: RelayCall): Promise<UpstreamStream> {
    const origin = this.origin(call.upstreamModel)
    const headers: Record<string, string> = { 'content-type': 'application/json', ...call.headers }
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`
    return openUpstreamStream({
      url: `${this.base}/chat/completions`,
      headers,
      body: call.body,
      signal: call.signal,
      connectTimeoutMs: call.collect ? this.config.responseTimeoutMs : this.config.connectTimeoutMs,
      idleTimeoutMs: this.config.idleTimeoutMs,
      origin,
      classifyStatus: (status, responseHeaders, text) => classifyStatus(origin, status, responseHeaders, text),
    })
  }

  /** The backend's signature record for a chat id, or null when it has none (404, expired, failed). */
  async signature(chatId: string, algo: SigningAlgo, upstreamModel: string, signal?: AbortSignal): Promise<SignatureRecord | null> {
    try {
      const body = (await this.getJson(`/signature/${encodeURIComponent(chatId)}?${new URLSearchParams({ signing_algo: algo, model: upstreamModel })}`, upstreamModel, signal)) as Record<string, unknown>
      if (typeof body?.text !== 'string' || typeof body.signature !== 'string' || typeof body.signing_address !== 'string') return null
      return { text: body.text, signature: body.signature, signing_address: body.signing_address, signing_algo: String(body.signing_algo ?? algo) }
    } catch {
      return null
    }
  }

  private origin(model: string): ErrorOrigin {
    return { provider: this.id, model, apiKey: this.config.apiKey }
  }

  private async getJson(path: string, model: string, signal?: AbortSignal): Promise<unknown> {
    const origin = this.origin(model)
    const deadline = AbortSignal.timeout(this.config.connectTimeoutMs + this.config.idleTimeoutMs)
    // Closes the connection of an answer past the size cap (only an abort reliably does, STACK-NOTES.md §8).
    const cut = new AbortController()
    const headers: Record<string, string> = { accept: 'application/json' }
    if (this.config.apiKey) headers.authorization = `Bearer ${this.config.apiKey}`
    let response: Response
    try {
      response = await fetch(`${this.base}${path}`, { headers, redirect: 'manual', signal: AbortSignal.any(signal ? [signal, deadline, cut.signal] : [deadline, cut.signal]) })
    } catch (error) {
      if (signal?.aborted) throw mark(new UpstreamError('aborted', 'the caller left', origin.provider, origin.model))
      if (deadline.aborted) throw mark(new UpstreamError('timeout', 'attestation timed out', origin.provider, origin.model))
      throw mark(connectionError(origin, error))
    }
    // Read under the cap: read whole first, an answer that never ends filled the memory until the deadline.
    const text = await textUpTo(response, MAX_JSON_BYTES).catch(() => '')
    // A read cut short by the caller leaving is not the backend's failure; by the deadline, a timeout (not "not JSON").
    if (signal?.aborted) throw mark(new UpstreamError('aborted', 'the caller left', origin.provider, origin.model))
    if (deadline.aborted) throw mark(new UpstreamError('timeout', 'attestation timed out', origin.provider, origin.model))
    if (text === undefined) cut.abort()
    if (response.status < 200 || response.status >= 300) throw mark(classifyStatus(origin, response.status, response.headers, (text ?? '').slice(0, 4096)))
    if (text === undefined) throw mark(new UpstreamError('server', 'attestation answer too large', origin.provider, origin.model))
    try {
      return JSON.parse(text)
    } catch {
      throw mark(new UpstreamError('server', 'attestation answer is not JSON', origin.provider, origin.model))
    }
  }
}

/** The body as text, or undefined once it passes `limit` bytes (nothing more is read). */
async function textUpTo(response: Response, limit: number): Promise<string | undefined> {
  if (response.body === null) return ''
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    // As response.text(): UTF-8, a BOM dropped.
    if (done) return new TextDecoder().decode(Buffer.concat(chunks))
    size += value.length
    if (size > limit) return undefined
    chunks.push(value)
  }
}

/** Marks a failure of the evidence fetch: the pipeline answers it 503 unavailable, not 502. */
function mark(error: UpstreamError): UpstreamError {
  return new UpstreamError(error.kind, error.message, error.provider, error.model, { ...error.details, phase: 'attestation' })
}
