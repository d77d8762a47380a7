import { encryptField, requestAad, responseAad } from '../../src/tee/cipher'
import { generateKeyPair, hexToBytes, signingIdentity, type SigningAlgo } from '../../src/tee/keys'
import { parseProofFormat } from '../../src/tee/proof-format'
import { signText } from '../../src/tee/signature'

// A relay on real HTTP in front of a gateway that forges Encrypted chat replies, as anyone who
// sees the svc-encrypted headers can: the reply is encrypted to the client's public key.

type Json = Record<string, any>
export type Forgery = 'none' | 'reply' | 'reply-and-evidence' | 'own-signature' | 'strip-evidence' | 'question'

export const FORGED = 'FORGED ANSWER'

/**
 * A relay that forwards to `gateway` and forges what `forgery` says, from what anyone on the path
 * sees: the headers, and the attestation's proof_format and provider_model_id.
 */
export function startForgingRelay(gateway: string, proofFormat: string, providerModelId: string): ForgingRelay {
  const variant = parseProofFormat(proofFormat)!.e2ee!
  const state = { forgery: 'none' as Forgery }
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const url = new URL(request.url)
      const headers = new Headers(request.headers)
      headers.delete('host')
      const algo = headers.get('svc-encrypted-signing-algo') as SigningAlgo
      const replay = { nonce: headers.get('svc-encrypted-nonce') ?? '', timestamp: Number(headers.get('svc-encrypted-timestamp')) }
      const v2 = variant.family === 'phala' && variant.version === 2
      const toClient = (text: string, where: { id: string; model: string; choice: number; field: string }) =>
        encryptField(text, variant, algo, hexToBytes(headers.get('svc-encrypted-client-pub-key')!), { aad: v2 ? responseAad({ algo, ...where, ...replay }) : undefined })
      let body = request.method === 'POST' ? await request.text() : undefined
      const chat = url.pathname === '/v1/chat/completions'
      if (chat && state.forgery === 'question') {
        // The relay's own question, encrypted to the model key with the client's key header: the
        // backend answers it, to the client, and signs it genuinely.
        const json = JSON.parse(body!)
        const index = json.messages.length - 1
        const aad = v2 ? requestAad({ algo, model: providerModelId, messageIndex: index, ...replay }) : undefined
        json.messages[index].content = encryptField('FORGED QUESTION', variant, algo, hexToBytes(headers.get('svc-encrypted-model-pub-key')!), { aad })
        body = JSON.stringify(json)
      }
      const upstream = await fetch(`${gateway}${url.pathname}${url.search}`, { method: request.method, headers, body })
      if (!chat || state.forgery === 'none' || state.forgery === 'question') return upstream
      if (upstream.headers.get('content-type')?.includes('text/event-stream')) {
        // Streamed: the first content delta says FORGED ANSWER, the others say nothing.
        let first = true
        const text = (await upstream.text()).replace(/^data: (\{.*\})$/gm, (_line, data: string) => {
          const chunk = JSON.parse(data)
          chunk.choices?.forEach((choice: Json, position: number) => {
            if (typeof choice.delta?.content !== 'string' || choice.delta.content === '') return
            choice.delta.content = first ? toClient(FORGED, { id: chunk.id, model: chunk.model, choice: position, field: 'content' }) : ''
            first = false
          })
          return `data: ${JSON.stringify(chunk)}`
        })
        return new Response(text, { headers: upstream.headers })
      }
      const json = (await upstream.json()) as Json
      const forge = (reply: Json) => {
        reply.choices[0].message.content = toClient(FORGED, { id: reply.id, model: reply.model, choice: 0, field: 'content' })
        return reply
      }
      forge(json)
      const evidence = json.svc_response_evidence
      if (state.forgery === 'strip-evidence') delete json.svc_response_evidence
      if ((state.forgery === 'reply-and-evidence' || state.forgery === 'own-signature') && evidence?.raw_body_b64) {
        const raw = Buffer.from(JSON.stringify(forge(JSON.parse(Buffer.from(evidence.raw_body_b64, 'base64').toString()))))
        evidence.raw_body_b64 = raw.toString('base64')
        evidence.response_sha256 = new Bun.CryptoHasher('sha256').update(raw).digest('hex')
        if (state.forgery === 'own-signature') {
          // A consistent record, signed by a key of the relay's own.
          const parts = evidence.text.split(':')
          parts[parts.length - 1] = evidence.response_sha256
          const own = generateKeyPair(algo)
          evidence.text = parts.join(':')
          evidence.signature = signText(algo, evidence.text, own.secretKey)
          evidence.signing_address = signingIdentity(own).address
        }
      }
      return Response.json(json)
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, state, stop: () => server.stop(true) }
}

export interface ForgingRelay {
  url: string
  /** What the next chats get: set by the test. */
  state: { forgery: Forgery }
  stop(): void
}
