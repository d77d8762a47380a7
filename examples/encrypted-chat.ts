// Encrypted chat through an svc gateway, step by step, with the client library.
//   SVC_URL=http://localhost:8080 SVC_API_KEY=z_sk_… bun examples/encrypted-chat.ts demo-tee:encrypted "hello"
// (`svc dev-tee` runs a simulated backend and prints the config that offers demo-tee:encrypted.)

import { checkBinding, contextFor, decryptChatStream, encryptChatRequest, fetchAttestation, generateClientKeys } from 'svc-gateway/client'

const baseUrl = process.env.SVC_URL ?? 'http://localhost:8080'
const apiKey = process.env.SVC_API_KEY
const [model = 'demo-tee:encrypted', prompt = 'Hello from an encrypted client'] = process.argv.slice(2)
if (!apiKey) throw new Error('set SVC_API_KEY')

// 1. Attest with our own challenge and check what the gateway cannot fake: the evidence echoes
//    our nonce (report, GPU evidence, quote report data) and binds the model key to the quote.
const nonce = Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('hex')
const attestation = await fetchAttestation(baseUrl, apiKey, model, { trustTier: 'encrypted', nonce, signingAlgo: 'ecdsa' })
const binding = await checkBinding(attestation, nonce)
for (const step of binding.steps) console.error(`${step.ok ? 'ok  ' : 'FAIL'} ${step.name}${step.ok ? '' : `: ${step.reason}`}`)
if (!binding.bound) process.exit(1)
console.error(binding.simulated ? 'warning: simulated evidence (svc dev-tee)' : 'note: the quote chain itself is not verified here')

// 2. Encrypt to the attested key with a fresh key of our own, send, decrypt as it streams. A
//    streamed reply is not authenticated: the gateway offers no signature over a stream, so a
//    relay could alter it. encryptedChat({ stream: false }) checks the backend's signature.
const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
const { body, headers } = encryptChatRequest({ model, stream: true, messages: [{ role: 'user', content: prompt }] }, ctx)
const response = await fetch(`${baseUrl}/v1/chat/completions`, {
  method: 'POST',
  headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json', ...headers },
  body: JSON.stringify(body),
})
if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`)
console.error('note: a streamed reply is not authenticated: the gateway offers no signature over a stream')
for await (const chunk of decryptChatStream(response.body, ctx)) process.stdout.write(chunk.choices[0]?.delta?.content ?? '')
process.stdout.write('\n')
