import { describe, expect, test } from 'bun:test'
import { sha256 } from '@noble/hashes/sha2.js'
import { contextFor, decryptChatResponse, decryptChatStream, encryptChatRequest, encryptedChat, generateClientKeys, verifyResponseSignature, type Attestation } from '../../src/client/tee'
import { bytesToHex } from '../../src/tee/keys'
import { json } from '../support/harness'
import type { SimFaults } from '../../src/tee/sim/types'
import { NEAR_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'

// The relay itself: bytes unchanged (so backend signatures verify), [DONE] only after the
// settlement, response evidence, cut streams, and billing from the backend's usage.

let t: TeeGateway
let key: string
let orgId: string
teeGatewayForFile([{ id: 'near', proofFormat: NEAR_V2 }], {}, session => ({ t, key, orgId } = session))

const sim = () => t.sims.near!

async function prepared(algo: 'ed25519' | 'ecdsa', extra: Record<string, unknown> = {}, responseEvidence = false) {
  const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=${algo}`, { key }))
  const ctx = contextFor(attestation, generateClientKeys(algo))
  const request = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'relay me' }], ...extra }, ctx, { responseEvidence })
  const raw = new TextEncoder().encode(JSON.stringify(request.body))
  return { attestation, ctx, raw, headers: request.headers }
}

const post = (raw: Uint8Array, headers: Record<string, string>) =>
  t.app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: raw }))

async function simSignature(id: string, algo: string) {
  const response = await fetch(`${sim().url}/signature/${id}?signing_algo=${algo}`, { headers: { authorization: `Bearer ${sim().token}` } })
  return response.status === 200 ? ((await response.json()) as { text: string; signature: string; signing_address: string }) : null
}

/** The route's own headers reach a relayed reply too: the request id and the key's rate limit. */
function expectRouteHeaders(response: Response, requestId: string): void {
  expect(response.headers.get('x-request-id')).toBe(requestId)
  expect(response.headers.get('x-ratelimit-limit')).toMatch(/^\d+$/)
  expect(response.headers.get('x-ratelimit-remaining')).toMatch(/^\d+$/)
}

describe('Encrypted relay', () => {
  for (const algo of ['ecdsa', 'ed25519'] as const) {
    test(`${algo}: non-streamed body bytes are the backend's; response evidence verifies against the client's own request bytes`, async () => {
      const { attestation, ctx, raw, headers } = await prepared(algo, {}, true)
      const response = await post(raw, headers)
      expect(response.status).toBe(200)
      const body = await json(response)
      const evidence = body.svc_response_evidence
      expect(evidence).toMatchObject({ object: 'response_evidence', evidence_available: true, verified: false, proof_format: attestation.proof_format, signing_algo: algo })
      const report = verifyResponseSignature({ evidence, rawRequestBytes: raw, expectedAddress: attestation.signing_address })
      expect(report).toEqual({ signatureValid: true, responseHashMatches: true, requestHashMatches: true, addressMatches: true })
      // The outer object carries the same ciphertext as the raw body: both decrypt.
      const inner = JSON.parse(Buffer.from(evidence.raw_body_b64, 'base64').toString())
      expect(inner.id).toMatch(/^chatcmpl-sim-/)
      expect(inner.model).toBe('sim/echo-1')
      expect(decryptChatResponse(inner, ctx).choices[0].message.content).toBe('echo: relay me')
      expect(decryptChatResponse(body, ctx).choices[0].message.content).toBe('echo: relay me')
      // The backend got our hash of the client's bytes.
      expect(sim().state.seen.at(-1)!.headers['x-request-hash']).toBe(bytesToHex(sha256(raw)))
    })
  }

  test('without response evidence the body is exactly the backend bytes (hash in its signature)', async () => {
    const { raw, headers } = await prepared('ecdsa')
    const response = await post(raw, { ...headers, 'x-request-id': 'req-relay-json' })
    expectRouteHeaders(response, 'req-relay-json')
    const bytes = new Uint8Array(await response.arrayBuffer())
    const id = JSON.parse(new TextDecoder().decode(bytes)).id
    const signature = await simSignature(id, 'ecdsa')
    expect(signature!.text.split(':')[2]).toBe(bytesToHex(sha256(bytes)))
    expect(signature!.text.split(':')[1]).toBe(bytesToHex(sha256(raw)))
  })

  test('a missing signature leaves the chat a success with evidence_available: false', async () => {
    sim().state.faults = { dropSignature: true }
    try {
      const { raw, headers } = await prepared('ecdsa', {}, true)
      const response = await post(raw, headers)
      expect(response.status).toBe(200)
      const evidence = (await json(response)).svc_response_evidence
      expect(evidence).toMatchObject({ evidence_available: false, signature: null, text: null })
      expect(typeof evidence.reason).toBe('string')
    } finally {
      sim().state.faults = {}
    }
  })

  test('streamed: byte-for-byte passthrough, [DONE] only after the charge is committed, signature over every byte', async () => {
    const { ctx, raw, headers } = await prepared('ecdsa', { stream: true })
    const before = (await t.deps.balance(orgId)).availableNanos
    const response = await post(raw, { ...headers, 'x-request-id': 'req-relay-stream' })
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    expectRouteHeaders(response, 'req-relay-stream')
    const chunks: Uint8Array[] = []
    const reader = response.body!.getReader()
    let chargedAtDone: bigint | undefined
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      chunks.push(value)
      if (new TextDecoder().decode(value).includes('[DONE]')) chargedAtDone = (await t.deps.balance(orgId)).availableNanos
    }
    expect(chargedAtDone).toBeLessThan(before)
    const bytes = new Uint8Array(Buffer.concat(chunks))
    const text = new TextDecoder().decode(bytes)
    expect(text).toEndWith('data: [DONE]\n\n')
    expect(text).not.toContain(': ping')
    const id = /"id":"(chatcmpl-sim-\d+)"/.exec(text)![1]!
    const signature = await simSignature(id, 'ecdsa')
    expect(signature!.text.split(':')[2]).toBe(bytesToHex(sha256(bytes)))
    // The client decrypts the same bytes.
    let content = ''
    for await (const chunk of decryptChatStream([bytes], ctx)) content += chunk.choices[0]?.delta?.content ?? ''
    expect(content).toBe('echo: relay me')
    // include_usage was added for billing, so the usage chunk came through.
    expect(text).toContain('"usage":{"prompt_tokens"')
    expect(sim().state.seen.at(-1)!.plain.stream_options).toEqual({ include_usage: true })
  })

  test('non-streamed: stream_options is dropped (vLLM refuses it without stream: true), as on the plain route', async () => {
    const { ctx, raw, headers } = await prepared('ecdsa', { stream: false, stream_options: { include_usage: true } })
    const response = await post(raw, headers)
    expect(response.status).toBe(200)
    expect(decryptChatResponse(await json(response), ctx).choices[0].message.content).toBe('echo: relay me')
    expect(Object.keys(sim().state.seen.at(-1)!.plain)).not.toContain('stream_options')
  })

  test('billing settles from the backend-reported usage', async () => {
    const { raw, headers } = await prepared('ed25519')
    const before = (await t.deps.balance(orgId)).availableNanos
    const body = await json(await post(raw, headers))
    const after = (await t.deps.balance(orgId)).availableNanos
    // 1 USD / 2 USD per million tokens, one ceil per charge.
    const expected = BigInt(Math.ceil(body.usage.prompt_tokens * 1000)) + BigInt(Math.ceil(body.usage.completion_tokens * 2000))
    expect(before - after).toBe(expected)
  })

  test('a stream the backend cuts: no [DONE], no signature, output still billed', async () => {
    sim().state.faults = { abortStream: true }
    try {
      const { raw, headers } = await prepared('ecdsa', { stream: true })
      const before = (await t.deps.balance(orgId)).availableNanos
      const text = await (await post(raw, headers)).text()
      expect(text).not.toContain('[DONE]')
      const id = /"id":"(chatcmpl-sim-\d+)"/.exec(text)![1]!
      expect(await simSignature(id, 'ecdsa')).toBeNull()
      expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
    } finally {
      sim().state.faults = {}
    }
  })

  test('the client library does not pass a cut stream off as a complete reply (QA: encryptedChat returned "echo: ")', async () => {
    sim().state.faults = { abortStream: true }
    try {
      const { ctx, raw, headers } = await prepared('ed25519', { stream: true })
      const text = await (await post(raw, headers)).text()
      const chunks: unknown[] = []
      const read = async () => { for await (const chunk of decryptChatStream([new TextEncoder().encode(text)], ctx)) chunks.push(chunk) }
      await expect(read()).rejects.toThrow('the stream ended before data: [DONE]')
      expect(chunks.length).toBeGreaterThan(0)
      const viaGateway: typeof fetch = (async (url: string, init?: RequestInit) => t.app.handle(new Request(url, init))) as typeof fetch
      await expect(encryptedChat({ baseUrl: 'http://localhost', apiKey: key, model: 'sim:encrypted', algo: 'ecdsa', stream: true, messages: [{ role: 'user', content: 'cut me' }], fetch: viaGateway }))
        .rejects.toThrow('reply is incomplete')
    } finally {
      sim().state.faults = {}
    }
  })

  test('a streamed call the backend answers with JSON, or with no content type, instead of an event stream: 502, nothing relayed or billed', async () => {
    for (const faults of [{ jsonForStream: true }, { noContentType: true }]) await notAnEventStream(faults)
  })

  async function notAnEventStream(faults: SimFaults) {
    sim().state.faults = faults
    try {
      const { raw, headers } = await prepared('ecdsa', { stream: true })
      const before = (await t.deps.balance(orgId)).availableNanos
      const response = await post(raw, headers)
      expect(response.status).toBe(502)
      expect((await json(response)).error.code).toBe('provider_error')
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
    } finally {
      sim().state.faults = {}
    }
  }

  test('an answer that holds nothing (only data: [DONE], or JSON {}): 502 provider_error (in-band on a stream), nothing billed', async () => {
    sim().state.faults = { emptyAnswer: true }
    try {
      const before = (await t.deps.balance(orgId)).availableNanos
      const plain = await prepared('ecdsa')
      const response = await post(plain.raw, plain.headers)
      expect(response.status).toBe(502)
      expect((await json(response)).error).toMatchObject({ code: 'provider_error', message: expect.stringMatching(/without a completion/) })
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
      // A stream's headers went out before its [DONE]: the failure comes in-band, in place of the [DONE].
      const streamed = await prepared('ed25519', { stream: true })
      const text = await (await post(streamed.raw, streamed.headers)).text()
      expect(text).not.toContain('[DONE]')
      expect(JSON.parse(text.replace(/^data: /, '')).error).toMatchObject({ code: 'provider_error', type: 'server_error' })
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
      // The reservation was released, not held: the next call is charged as usual.
      sim().state.faults = {}
      const next = await prepared('ecdsa')
      expect((await post(next.raw, next.headers)).status).toBe(200)
      expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
    } finally {
      sim().state.faults = {}
    }
  })

  test('an empty reply that is still an answer (content "", its choice and finish_reason, no usage) is relayed and charged its input', async () => {
    sim().state.faults = { blankAnswer: true }
    try {
      for (const stream of [false, true]) {
        const { ctx, raw, headers } = await prepared('ecdsa', { stream })
        const before = (await t.deps.balance(orgId)).availableNanos
        const response = await post(raw, headers)
        expect(response.status).toBe(200)
        if (stream) {
          const text = await response.text()
          expect(text).toEndWith('data: [DONE]\n\n')
          expect(text).not.toContain('"error"')
        } else {
          expect(decryptChatResponse(await json(response), ctx).choices[0]).toMatchObject({ message: { content: '' }, finish_reason: 'stop' })
        }
        expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(before)
      }
    } finally {
      sim().state.faults = {}
    }
  })

  test('a key that cannot pay is refused before any evidence fetch, as on :confidential', async () => {
    const org = await t.createOrg()
    const { secret } = await t.deps.keys.create({ orgId: org.orgId, userId: org.ownerUserId, name: 'capped', admin: false, expiresAtMs: null, spendCap: { period: 'overall', nanos: 1_000n } })
    const { raw, headers } = await prepared('ecdsa')
    const attestations = sim().state.attestations.length
    const seen = sim().state.seen.length
    const response = await t.app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, body: raw }))
    expect(response.status).toBe(429)
    expect(sim().state.attestations.length).toBe(attestations)
    expect(sim().state.seen.length).toBe(seen)
  })

  test('a pin that fails (key mismatch, rejected evidence, unreachable backend) releases the reservation: the cap still covers the next call', async () => {
    const org = await t.createOrg()
    // Covers one call's estimate (4096 output tokens at 2 USD/M, plus the input), not two.
    const { secret } = await t.deps.keys.create({ orgId: org.orgId, userId: org.ownerUserId, name: 'one-call', admin: false, expiresAtMs: null, spendCap: { period: 'overall', nanos: 10_000_000n } })
    const send = (raw: Uint8Array, headers: Record<string, string>) =>
      t.app.handle(new Request('http://localhost/v1/chat/completions', { method: 'POST', headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json', ...headers }, body: raw }))
    const before = (await t.deps.balance(org.orgId)).availableNanos
    const stale = await prepared('ecdsa')
    sim().state.rotateKeys()
    expect((await send(stale.raw, stale.headers)).status).toBe(400)
    for (const [faults, status] of [[{ echoWrongNonce: true }, 503], [{ status500: true }, 503]] as const) {
      const request = await prepared('ecdsa')
      sim().state.faults = faults
      try {
        expect((await send(request.raw, request.headers)).status).toBe(status)
      } finally {
        sim().state.faults = {}
      }
    }
    expect((await t.deps.balance(org.orgId)).availableNanos).toBe(before)
    const fresh = await prepared('ecdsa')
    expect((await send(fresh.raw, fresh.headers)).status).toBe(200)
  })

  test('an unreachable backend at call time is 503 and nothing is billed', async () => {
    sim().state.faults = { status500: true }
    try {
      const before = (await t.deps.balance(orgId)).availableNanos
      sim().state.faults = {}
      const { raw, headers } = await prepared('ecdsa')
      sim().state.faults = { status500: true }
      const response = await post(raw, headers)
      expect(response.status).toBe(503)
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
    } finally {
      sim().state.faults = {}
    }
  })
})
