import type { ThinkingForm } from '../catalog/types'
import type { ChatEvent, ChatRequest, PassThroughFormat } from '../inference/canonical'

/** One call of a provider: the canonical request, the upstream model name, and cancellation. */
export interface ProviderCall {
  readonly request: ChatRequest
  /** The backend's own model name (from the catalog binding). */
  readonly upstreamModel: string
  /** The binding's thinking form (from the catalog; read by the Anthropic adapter). Absent: the client's form. */
  readonly thinking?: ThinkingForm
  /** Aborted when the client leaves or the deadline passes: the upstream request must be cancelled. */
  readonly signal: AbortSignal
  /**
   * The controller behind `signal`, lent when no other backend will be tried after this call (the
   * router's last attempt): the provider may abort it itself (a deadline, a body it stops
   * reading) instead of tying a controller of its own to `signal` with a listener. The caller
   * then reads a timeout's abort as the call's end, which it is. Absent: make your own.
   */
  readonly abortable?: AbortController
  readonly requestId: string
  /**
   * The caller collects the whole answer and nothing watches single events (a non-streamed
   * reply): an adapter may ask its upstream for one JSON answer instead of a stream, under the
   * provider's `responseTimeoutMs` for the headers. The events are the same either way.
   */
  readonly collect?: boolean
  /**
   * The client's stream format: a provider whose upstream speaks it may emit `passthrough` events
   * of that format instead of re-encodable ones (the openai-compatible provider for Chat
   * Completions, the Anthropic provider for Messages).
   */
  readonly passThrough?: PassThroughFormat
}

/**
 * An upstream adapter (ARCHITECTURE.md §6). `stream` resolves once the upstream answered 2xx
 * and rejects with an UpstreamError before any event otherwise; after that, failures arrive
 * in-band as an `error` event (one before any output still lets the router fall back:
 * before-output.ts). Non-streaming clients collect the same events.
 */
export interface Provider {
  /** `<type>:<config id>`, e.g. `openai-compatible:vllm-a`. */
  readonly id: string
  stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>>
  /**
   * Attested providers: like `stream`, but also reports the evidence the call was bound to (the
   * router prefers it when present, so Confidential calls can say which attestation they ran under).
   */
  streamAttested?(call: ProviderCall): Promise<{ events: AsyncIterable<ChatEvent>; attestation: CallAttestation }>
  /** The exact prompt size of a request, for upstreams that count (Anthropic's count_tokens). Rejects with an UpstreamError. */
  countTokens?(call: ProviderCall): Promise<number>
  /**
   * Throws the UpstreamError (phase `adapter`) `stream` would refuse the request with before any
   * call, without calling anything: what the adapter's wire cannot carry. Absent: it refuses nothing.
   */
  checkRequest?(call: AdapterCall): void
}

/** What an adapter's own checks read of a call (Provider.checkRequest). */
export type AdapterCall = Pick<ProviderCall, 'request' | 'upstreamModel' | 'thinking'>

/** The attestation fields of one Confidential call: the fresh challenge and the key it bound (spec §2.4 names). */
export interface CallAttestation {
  nonce: string
  signingAddress: string
  signingAlgo: string
  proofFormat: string
}

export type UpstreamErrorKind = 'auth' | 'rate-limited' | 'bad-request' | 'not-found' | 'server' | 'timeout' | 'connection' | 'aborted'

/** An upstream failure, classified once in each adapter's errors.ts. */
export class UpstreamError extends Error {
  constructor(
    readonly kind: UpstreamErrorKind,
    message: string,
    readonly provider: string,
    readonly model: string,
    /**
     * `phase: 'attestation'`: the evidence fetch before a Confidential or Encrypted call failed (→ 503);
     * `phase: 'adapter'`: the adapter refused to send the request (no upstream call was made).
     * `upstreamMessage`: the message of an error object the upstream answered (key scrubbed), the only
     * upstream text a client may be shown; `bodySnippet` is the raw body, for logs; `param`: the
     * field an adapter's own refusal blames.
     */
    readonly details: { status?: number; retryAfterMs?: number; bodySnippet?: string; upstreamMessage?: string; phase?: 'attestation' | 'adapter'; param?: string } = {},
  ) {
    super(message)
  }

  get status(): number | undefined {
    return this.details.status
  }

  /** Whether the router may try the next backend (only before any output: router.ts). */
  get retryable(): boolean {
    return this.kind === 'connection' || this.kind === 'timeout' || this.kind === 'server' || this.kind === 'rate-limited'
  }
}
