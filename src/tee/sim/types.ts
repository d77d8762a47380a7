import type { NearV1Cipher } from '../cipher'
import type { KeyPair } from '../keys'

/** Fault switches: each one makes the backend misbehave in a way the gateway must catch. */
export interface SimFaults {
  /** request_nonce differs from the nonce asked for. */
  echoWrongNonce?: boolean
  /** nvidia_payload.nonce differs. */
  gpuWrongNonce?: boolean
  /** The quote's report_data carries another nonce. */
  quoteWrongNonce?: boolean
  /** intel_quote is empty. */
  emptyQuote?: boolean
  /** nvidia_payload has an empty evidence_list. */
  emptyGpuEvidence?: boolean
  /** The report has no request_nonce at all. */
  omitRequestNonce?: boolean
  /** signing_algo echoes the other algorithm. */
  wrongAlgoEcho?: boolean
  /** signing_public_key is not the key of signing_address. */
  keyAddressMismatch?: boolean
  /** Every route answers 500. */
  status500?: boolean
  /** Added before every answer (real timers: keep small). */
  latencyMs?: number
  /** No signature is recorded for chats. */
  dropSignature?: boolean
  /** Streams stop after the first delta, without [DONE]. */
  abortStream?: boolean
  /** A streamed chat is answered with one JSON completion instead of an event stream. */
  jsonForStream?: boolean
  /** A streamed chat's event stream comes without a Content-Type header. */
  noContentType?: boolean
  /** A chat answered with nothing: a stream of only `data: [DONE]`, or the JSON `{}`. */
  emptyAnswer?: boolean
  /** A legitimate empty reply: content "" with its choice and finish_reason, and no usage. */
  blankAnswer?: boolean
}

export interface SimOptions {
  family?: 'nearai' | 'phala'
  modelName?: string
  token?: string
  port?: number
  ed25519Seed?: Uint8Array
  secp256k1Secret?: Uint8Array
  nearV1ResponseCipher?: NearV1Cipher
  ecdsaAddressCase?: 'lower' | 'checksum'
  tlsFingerprint?: string
  replayWindowSec?: number
  aggregated?: boolean
  eventLogAs?: 'array' | 'string'
  /** Adds reasoning to replies. */
  reasoning?: boolean
  /**
   * The field that carries it: `reasoning_content` (the default) or `reasoning` (vLLM's newer
   * name). NEAR encrypts both; Phala only `reasoning_content`, so its `reasoning` is plaintext (A2).
   */
  reasoningField?: 'reasoning_content' | 'reasoning'
  faults?: SimFaults
  /** Seconds now (tests inject a fixed clock for the Phala v2 window). */
  now?: () => number
}

export interface SimKeys {
  ed25519: KeyPair
  ecdsa: KeyPair
}

/** What the backend saw of one chat: the decrypted request (for tests comparing both ends). */
export interface SeenChat {
  encrypted: boolean
  headers: Record<string, string>
  /** The body as received (ciphertext-bearing). */
  rawBody: string
  /** The request after decryption. */
  plain: Record<string, any>
  /** The response before encryption. */
  replyPlain: { content: string; reasoning?: string; toolCall?: { name: string; arguments: string } }
}

export interface SimState {
  faults: SimFaults
  keys: SimKeys
  /** Every chat, in order. */
  seen: SeenChat[]
  /** Attestation calls, in order (query strings). */
  attestations: URLSearchParams[]
  /** Replaces both keys (the old attestation no longer matches). */
  rotateKeys(): void
}
