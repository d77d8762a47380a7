import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { refuseEncrypted } from '../../src/inference/encrypted'
import { bytesToHex, generateKeyPair } from '../../src/tee/keys'
import { json } from '../support/harness'
import { NEAR_V1, NEAR_V2, PHALA_V2, gatewaysPerFormat, startTeeGateway, type FormatGateway } from '../support/tee'

// Every Encrypted chat rule of spec §4.10 / TEE-PROTOCOL.md B3 as a route test. None of the
// refused requests reaches the backend's chat or charges anything.

type Json = Record<string, any>
type Setup = FormatGateway
const setups = gatewaysPerFormat([['near2', NEAR_V2], ['near1', NEAR_V1], ['phala2', PHALA_V2]] as const)

async function attest(s: Setup, algo: 'ed25519' | 'ecdsa'): Promise<Attestation> {
  const response = await s.t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=${algo}`, { key: s.key })
  expect(response.status).toBe(200)
  return json(response)
}

/** A valid encrypted request for `setup`, before any mutation. */
async function valid(name: string, algo: 'ed25519' | 'ecdsa' = 'ecdsa', extra: Json = {}, options: { encryptAllFields?: boolean } = {}) {
  const s = setups[name]!
  const ctx = contextFor(await attest(s, algo), generateClientKeys(algo))
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'hello' }], ...extra }, ctx, options)
  return { s, ctx, body, headers }
}

async function send(s: Setup, body: unknown, headers: Record<string, string>) {
  return s.t.request('POST', '/v1/chat/completions', { key: s.key, body, headers })
}

async function expect400(name: string, mutate: (request: { body: Json; headers: Record<string, string> }) => void, pattern: RegExp, options: { algo?: 'ed25519' | 'ecdsa'; extra?: Json; allFields?: boolean; status?: number } = {}) {
  const request = await valid(name, options.algo ?? 'ecdsa', options.extra ?? {}, { encryptAllFields: options.allFields })
  mutate(request)
  const sim = request.s.t.sims[name]!
  const seen = sim.state.seen.length
  const before = (await request.s.t.deps.balance(request.s.orgId)).availableNanos
  const response = await send(request.s, request.body, request.headers)
  const body = await json(response)
  expect(response.status).toBe(options.status ?? 400)
  expect(body.error.code).toBe(options.status === 503 ? 'unavailable' : 'invalid_request')
  expect(body.error.message).toMatch(pattern)
  if (options.status !== 503 && !/backend refused/.test(body.error.message)) expect(sim.state.seen.length).toBe(seen)
  expect((await request.s.t.deps.balance(request.s.orgId)).availableNanos).toBe(before)
}

describe('Encrypted chat: presence', () => {
  test('the valid request works (control)', async () => {
    const { s, body, headers } = await valid('near2')
    expect((await send(s, body, headers)).status).toBe(200)
  })
  test(':encrypted without the headers', () => expect400('near2', r => { r.headers = {} }, /needs the Encrypted headers/))
  test('the headers with a non-:encrypted model', async () => {
    await expect400('near2', r => { r.body.model = 'sim:confidential' }, /need an :encrypted model id/)
    await expect400('near2', r => { r.body.model = 'demo-anonymous' }, /need an :encrypted model id/)
  })
  test('svc-encrypted-* without svc-encrypted: 1', async () => {
    await expect400('near2', r => { delete r.headers['svc-encrypted'] }, /need svc-encrypted: 1/)
    await expect400('near2', r => { r.headers['svc-encrypted'] = 'true' }, /svc-encrypted must be 1/)
    await expect400('near2', r => { r.headers['svc-encrypted-bogus'] = '1' }, /unknown Encrypted header/)
  })
})

describe('Encrypted chat: header shapes', () => {
  test('signing algo', () => expect400('near2', r => { r.headers['svc-encrypted-signing-algo'] = 'rsa' }, /signing-algo must be ed25519 or ecdsa/))
  test('client key: ecdsa 64 bytes, off-curve, odd hex; ed25519 wrong length', async () => {
    await expect400('near2', r => { r.headers['svc-encrypted-client-pub-key'] = r.headers['svc-encrypted-client-pub-key']!.slice(2) }, /client-pub-key/)
    await expect400('near2', r => { r.headers['svc-encrypted-client-pub-key'] = `04${'1'.repeat(128)}` }, /client-pub-key/)
    await expect400('near2', r => { r.headers['svc-encrypted-client-pub-key'] += '0' }, /client-pub-key/)
    await expect400('near2', r => { r.headers['svc-encrypted-client-pub-key'] = 'ab'.repeat(31) }, /client-pub-key/, { algo: 'ed25519' })
  })
  test('client key: an Ed25519 small-order point (a shared secret anyone can compute) is refused', async () => {
    // The identity, and a point of order 8 (as listed in libsodium's blocklist).
    for (const smallOrder of [`01${'00'.repeat(31)}`, 'c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a']) {
      await expect400('near2', r => { r.headers['svc-encrypted-client-pub-key'] = smallOrder }, /client-pub-key/, { algo: 'ed25519' })
    }
  })
  test('model key shape', async () => {
    await expect400('near2', r => { r.headers['svc-encrypted-model-pub-key'] = 'abcd' }, /model-pub-key must be 64 or 65 bytes/)
    await expect400('near2', r => { r.headers['svc-encrypted-model-pub-key'] = 'ab'.repeat(33) }, /model-pub-key must be 32 bytes/, { algo: 'ed25519' })
  })
  test('ecdsa model key may come as 64 bytes (x‖y) and is normalized', async () => {
    const { s, body, headers } = await valid('near2')
    headers['svc-encrypted-model-pub-key'] = headers['svc-encrypted-model-pub-key']!.slice(2)
    expect((await send(s, body, headers)).status).toBe(200)
  })
  test('a model key of the right shape that is not the attested one, and a rotated backend key', async () => {
    await expect400('near2', r => { r.headers['svc-encrypted-model-pub-key'] = bytesToHex(generateKeyPair('ecdsa').publicKey) }, /model key mismatch/)
    const request = await valid('near2', 'ed25519')
    request.s.t.sims.near2!.state.rotateKeys()
    const response = await send(request.s, request.body, request.headers)
    expect(response.status).toBe(400)
    expect((await json(response)).error.message).toMatch(/model key mismatch, re-attest|re-attest/)
  })
  test('an algorithm no backend of the model serves is named as the header on chat, as the query parameter on attestation', async () => {
    const g = await startTeeGateway([{ id: 'ecdsa-only', proofFormat: NEAR_V2, signingAlgos: ['ecdsa'] }])
    try {
      const org = await g.createOrg()
      const client = generateClientKeys('ed25519')
      const headers = {
        'svc-encrypted': '1', 'svc-encrypted-signing-algo': 'ed25519', 'svc-encrypted-encryption-version': '2',
        'svc-encrypted-client-pub-key': client.publicKeyHex, 'svc-encrypted-model-pub-key': bytesToHex(generateKeyPair('ed25519').publicKey),
      }
      const body = { model: 'sim:encrypted', messages: [{ role: 'user', content: 'ab'.repeat(100) }] }
      const response = await g.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers })
      expect(response.status).toBe(400)
      expect((await json(response)).error).toMatchObject({ code: 'invalid_request', param: 'svc-encrypted-signing-algo', message: expect.stringContaining('serves svc-encrypted-signing-algo ed25519') })
      expect(g.sims['ecdsa-only']!.state.attestations).toHaveLength(0)
      const attestation = await g.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ed25519', { key: org.adminKey })
      expect(attestation.status).toBe(400)
      expect((await json(attestation)).error).toMatchObject({ param: 'signing_algo', message: expect.stringContaining('serves signing_algo ed25519') })
    } finally {
      await g.stopAll()
    }
  })
  test('protocol version per proof_format', async () => {
    await expect400('near2', r => { delete r.headers['svc-encrypted-encryption-version'] }, /needs svc-encrypted-encryption-version: 2/)
    await expect400('near1', r => { r.headers['svc-encrypted-encryption-version'] = '2' }, /legacy protocol/)
    await expect400('near2', r => { r.headers['svc-encrypted-encryption-version'] = '3' }, /must be 2/)
  })
  test('Phala v2 nonce and timestamp; NEAR refuses them', async () => {
    await expect400('phala2', r => { delete r.headers['svc-encrypted-nonce'] }, /needs svc-encrypted-nonce and svc-encrypted-timestamp/)
    await expect400('phala2', r => { r.headers['svc-encrypted-timestamp'] = String(Math.floor(Date.now() / 1000) - 400) }, /more than 300 s/)
    await expect400('phala2', r => { r.headers['svc-encrypted-timestamp'] = '-5' }, /positive Unix timestamp/)
    await expect400('phala2', r => { r.headers['svc-encrypted-nonce'] = 'short' }, /16 to 128/)
    await expect400('phala2', r => { r.headers['svc-encrypted-nonce'] = 'a|b'.repeat(8) }, /16 to 128/)
    await expect400('near2', r => { r.headers['svc-encrypted-nonce'] = 'n'.repeat(20); r.headers['svc-encrypted-timestamp'] = String(Math.floor(Date.now() / 1000)) }, /no replay protection/)
  })
  test('response evidence with stream: true', () => expect400('near2', r => { r.headers['svc-encrypted-response-evidence'] = '1'; r.body.stream = true }, /needs stream: false/))
})

describe('Encrypted chat: body', () => {
  test('content must be nonblank ciphertext of the right shape', async () => {
    await expect400('near2', r => { r.body.messages[0].content = 'hello in plaintext' }, /ciphertext hex/)
    await expect400('near2', r => { r.body.messages[0].content = '  ' }, /nonblank ciphertext/)
    await expect400('near2', r => { r.body.messages[0].content = '04' + 'ab'.repeat(40) }, /too short/)
    await expect400('near2', r => { r.body.messages[0].content += 'a' }, /ciphertext hex/)
    await expect400('near2', r => { r.body.messages[0].content = '05' + r.body.messages[0].content.slice(2) }, /start with the 04/)
    await expect400('near2', r => { r.body.messages[0].content = null }, /nonblank ciphertext/)
    await expect400('near2', r => { r.body.messages[0].content = 'ab'.repeat(71) }, /too short/, { algo: 'ed25519' })
    await expect400('near2', r => { r.body.messages[0].content = r.body.messages[0].content.slice(0, -2) + 'zz' }, /ciphertext hex/)
  })

  test("a role named after Object.prototype's members is no role (before: a 500)", async () => {
    for (const role of ['toString', 'constructor', '__proto__']) await expect400('near2', r => { r.body.messages[0].role = role }, /role must be system, developer, user, assistant or tool/)
  })

  test('long valid ciphertext is read as hex (a pattern of hex pairs stopped matching past a few million characters), and measured against the context', async () => {
    // 6 million hex characters: no longer "not hex", but far more than the 32,768-token context.
    await expect400('near2', r => { r.body.messages[0].content = '04' + 'ab'.repeat(2_999_999) }, /^the request \(about \d+ input tokens\) does not fit model sim:encrypted's context of 32768 tokens$/)
  })
  test('content arrays and image, file or document parts', async () => {
    await expect400('near2', r => { r.body.messages[0].content = [{ type: 'text', text: r.body.messages[0].content }] }, /content arrays/)
    await expect400('near2', r => { r.body.messages[0].content = [{ type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }, /content arrays/)
    await expect400('near2', r => { r.body.messages[0].content = [{ type: 'file', file: { file_data: 'AAAA' } }] }, /content arrays/)
  })
  test('hosted web tools, uncensored, unknown fields', async () => {
    await expect400('near2', r => { r.body.tools = [{ type: 'web_search' }] }, /hosted web_search/)
    await expect400('near2', r => { r.body.tools = [{ type: 'web_fetch' }] }, /hosted web_fetch/)
    await expect400('near2', r => { r.body.web_fetch = true }, /hosted web_fetch/)
    await expect400('near2', r => { r.body.web_search = true }, /hosted web_search/)
    await expect400('near2', r => { r.body.uncensored = true }, /uncensored/)
    // Any value but false: before, a string was read, accepted and dropped.
    await expect400('near2', r => { r.body.uncensored = 'yes' }, /uncensored is not available/)
    await expect400('near2', r => { r.body.web_search = 'yes' }, /hosted web_search/)
    await expect400('near2', r => { r.body.best_of = 2 }, /unknown field "best_of"/)
  })
  test("the plain route's other fields are accepted with its rules and stay with the gateway (QA: unknown field)", async () => {
    const fields = { safety_identifier: 'u1', prompt_cache_key: 'k', logprobs: false, top_logprobs: 0, verbosity: 'medium', modalities: ['text'] }
    const { s, body, headers } = await valid('near2', 'ed25519', fields)
    expect((await send(s, body, headers)).status).toBe(200)
    // None is forwarded, as the plain route forwards none (safety_identifier is `user`'s successor).
    const plain = s.t.sims.near2!.state.seen.at(-1)!.plain as Record<string, unknown>
    for (const key of Object.keys(fields)) expect(plain).not.toHaveProperty(key)
    await expect400('near2', r => { r.body.logprobs = true }, /^logprobs are not supported$/)
    await expect400('near2', r => { r.body.top_logprobs = 2 }, /^logprobs are not supported$/)
    await expect400('near2', r => { r.body.safety_identifier = 'u'.repeat(300) }, /safety_identifier/)
    await expect400('near2', r => { r.body.prompt_cache_key = 5 }, /prompt_cache_key/)
    await expect400('near2', r => { r.body.verbosity = 'low' }, /verbosity "low" is not supported/)
    await expect400('near2', r => { r.body.modalities = ['text', 'audio'] }, /audio output is not supported/)
  })
  test('plaintext fields follow the plain route\'s rules, and a refused value is named by the gateway, not relayed', async () => {
    await expect400('near2', r => { r.body.reasoning_effort = 'banana' }, /reasoning_effort/)
    await expect400('near2', r => { r.body.temperature = 5 }, /temperature/)
    await expect400('near2', r => { r.body.top_p = '0.5' }, /top_p/)
    await expect400('near2', r => { r.body.stop = 7 }, /stop/)
    await expect400('near2', r => { r.body.seed = 1.5 }, /seed/)
    await expect400('near2', r => { r.body.metadata = { tier: 1 } }, /metadata/)
    // OpenAI's metadata limits, as on the plain route (at most 16 pairs, values of at most 512 characters).
    await expect400('near2', r => { r.body.metadata = Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, 'v'])) }, /metadata takes at most 16 pairs/)
    await expect400('near2', r => { r.body.metadata = { tier: 'v'.repeat(513) } }, /metadata values must be strings of at most 512 characters/)
    // Characters are code points: an emoji counts once.
    await expect400('near2', r => { r.body.metadata = { tier: '🔑'.repeat(513) } }, /metadata values must be strings of at most 512 characters/)
    await expect400('near2', r => { r.body.metadata = { ['🔑'.repeat(65)]: 'v' } }, /metadata takes at most 16 pairs, with keys of at most 64 characters/)
    await expect400('near2', r => { r.body.parallel_tool_calls = 'yes' }, /parallel_tool_calls/)
    await expect400('near2', r => { r.body.user = 'u'.repeat(300) }, /user/)
    // Values the schema admits but the plain route refuses are refused here too (before, relayed).
    await expect400('near2', r => { r.body.presence_penalty = 0.5 }, /presence_penalty is not supported/)
    await expect400('near2', r => { r.body.frequency_penalty = -1 }, /frequency_penalty is not supported/)
    await expect400('near2', r => { r.body.tool_choice = 'required' }, /tool_choice "required" needs at least one function tool/)
    await expect400('near2', r => { r.body.service_tier = 'flex' }, /service_tier "flex" is not supported/)
    await expect400('near2', r => { r.body.max_completion_tokens = 100_000 }, /^max_completion_tokens 100000 exceeds/)
    await expect400('near2', r => { r.body.logit_bias = { '50256': -100 } }, /logit_bias is not supported/)
    await expect400('near2', r => { r.body.audio = { voice: 'alloy', format: 'wav' } }, /audio output is not supported/)
    // Values the plain route takes are relayed as it sends them: metadata and service_tier stay
    // with the gateway, an effort the backend may not take goes as the plain route's.
    const { s, body, headers } = await valid('near2', 'ecdsa', { temperature: 0.5, top_p: 1, stop: ['END'], seed: 7, presence_penalty: 0, metadata: { tier: 'gold', ['🔑'.repeat(64)]: '🔑'.repeat(512) }, service_tier: 'auto', reasoning_effort: 'minimal' })
    const sim = s.t.sims.near2!
    const response = await send(s, body, headers)
    expect(response.status).toBe(200)
    const seen = sim.state.seen.at(-1)!
    expect(seen).toMatchObject({ plain: { temperature: 0.5, top_p: 1, stop: ['END'], seed: 7, presence_penalty: 0, reasoning_effort: 'low' } })
    expect([(seen.plain as Record<string, unknown>).metadata, (seen.plain as Record<string, unknown>).service_tier]).toEqual([undefined, undefined])
    // An empty stop sequence stops nothing and is dropped (vLLM refuses one), as on the plain route.
    const stops = await valid('near2', 'ecdsa', { stop: ['', 'END'] })
    expect((await send(stops.s, stops.body, stops.headers)).status).toBe(200)
    expect((sim.state.seen.at(-1)!.plain as Record<string, unknown>).stop).toEqual(['END'])

    // Null logit_bias, prediction and audio ask for nothing and stay here, as on the plain route.
    const nulls = await valid('near2', 'ecdsa', { logit_bias: null, prediction: null, audio: null })
    expect((await send(nulls.s, nulls.body, nulls.headers)).status).toBe(200)
    const relayed = sim.state.seen.at(-1)!.plain as Record<string, unknown>
    expect(['logit_bias', 'prediction', 'audio'].filter(field => field in relayed)).toEqual([])
    // The request id goes upstream, as on every other call.
    expect((seen.headers as Record<string, string>)['x-request-id']).toMatch(/^req_/)
  })
  test('both output caps: the backend gets one, the one reserved and billed (QA: both relayed, the larger honoured, 1 billed)', async () => {
    const sim = setups.near2!.t.sims.near2!
    const forwarded = async (caps: Json) => {
      const { s, body, headers } = await valid('near2', 'ed25519', caps)
      expect((await send(s, body, headers)).status).toBe(200)
      return sim.state.seen.at(-1)!.plain as Record<string, unknown>
    }
    // As on the plain route, max_completion_tokens wins, and goes in the field attested backends read.
    for (const [caps, cap] of [[{ max_tokens: 10_000_000, max_completion_tokens: 1 }, 1], [{ max_completion_tokens: 7 }, 7], [{ max_tokens: 5, max_completion_tokens: null }, 5]] as const) {
      const plain = await forwarded(caps)
      expect(plain.max_tokens).toBe(cap)
      expect(plain).not.toHaveProperty('max_completion_tokens')
    }
    // Each is held to the plain route's schema, the one that loses too.
    await expect400('near2', r => { r.body.max_tokens = 0; r.body.max_completion_tokens = 5 }, /max_tokens/)
    await expect400('near2', r => { r.body.max_tokens = 5; r.body.max_completion_tokens = 2.5 }, /max_completion_tokens/)
  })
  test('store: true is the plain route\'s 400 naming store, not relayed; store: false stays with the gateway', async () => {
    await expect400('near2', r => { r.body.store = true }, /^store is not supported: the gateway keeps no completions$/)
    const refused = await valid('near2')
    const response = await send(refused.s, { ...refused.body, store: true }, refused.headers)
    expect((await json(response)).error).toMatchObject({ code: 'invalid_request', param: 'store' })
    await expect400('near2', r => { r.body.store = 'yes' }, /store/)
    const { s, body, headers } = await valid('near2', 'ecdsa', { store: false })
    expect((await send(s, body, headers)).status).toBe(200)
    expect(Object.keys(s.t.sims.near2!.state.seen.at(-1)!.plain as Record<string, unknown>)).not.toContain('store')
  })
  test('function tools need encrypt-all-fields, ciphertext fields, and a NEAR-family backend', async () => {
    const tool = { type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }
    await expect400('near2', r => { r.body.tools = [tool] }, /function tools need svc-encrypted-encrypt-all-fields: 1/)
    await expect400('near2', r => { r.body.tools[0].function.parameters = { type: 'object' } }, /parameters must be a nonblank ciphertext/, { extra: { tools: [tool] }, allFields: true })
    await expect400('near2', r => { r.body.tools[0].function.name = 'lookup' }, /name must be ciphertext hex/, { extra: { tools: [tool] }, allFields: true })
    // strict travels in plaintext: the boolean the plain route takes, nothing else (before: relayed whatever it was).
    await expect400('near2', r => { r.body.tools[0].function.strict = 'lookup' }, /tools.0.function.strict must be a boolean/, { extra: { tools: [tool] }, allFields: true })
    await expect400('near2', r => { r.body.tool_choice = { type: 'function', function: { name: 'lookup' } } }, /tool_choice.function.name must be ciphertext/, { extra: { tools: [tool] }, allFields: true })
    await expect400('phala2', r => { r.body.tools = [tool] }, /cannot take encrypted function tools/)
    await expect400('phala2', r => { r.headers['svc-encrypted-encrypt-all-fields'] = '1' }, /cannot encrypt tool fields/)
  })
  test('history tool calls and tool results must be ciphertext', async () => {
    await expect400('near2', r => {
      r.body.messages.push({ role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'lookup', arguments: '{}' } }] })
      r.body.messages.push({ role: 'tool', tool_call_id: 'c1', content: 'sunny' })
    }, /tool_calls.0.function.name must be ciphertext/, { allFields: true })
    await expect400('near2', r => { r.body.messages.push({ role: 'tool', tool_call_id: 'c1', content: 'sunny' }) }, /messages.1.content must be ciphertext/)
    await expect400('near2', r => { r.body.messages[0].name = 'alice' }, /name would travel in plaintext/)
  })
  test('a tampered ciphertext: the backend refuses, the gateway answers 400 with its error type only', async () => {
    await expect400('near2', r => {
      const content: string = r.body.messages[0].content
      r.body.messages[0].content = content.slice(0, -2) + (content.endsWith('00') ? '01' : '00')
    }, /^the attested backend refused the encrypted request \(bad_request\)$/)
    await expect400('phala2', r => {
      const content: string = r.body.messages[0].content
      r.body.messages[0].content = content.slice(0, -2) + (content.endsWith('00') ? '01' : '00')
    }, /\(e2ee_decryption_failed\)$/)
  })
  test('Phala v2: a replayed request is refused by the backend', async () => {
    const { s, body, headers } = await valid('phala2')
    expect((await send(s, body, headers)).status).toBe(200)
    const again = await send(s, body, headers)
    expect(again.status).toBe(400)
    expect((await json(again)).error.message).toContain('e2ee_replay_detected')
  })
})

describe('Encrypted chat: evidence faults before the call → 503', () => {
  for (const fault of ['echoWrongNonce', 'gpuWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'emptyGpuEvidence', 'keyAddressMismatch', 'wrongAlgoEcho'] as const) {
    test(fault, async () => {
      const request = await valid('near2', 'ed25519')
      request.s.t.sims.near2!.state.faults = { [fault]: true }
      try {
        const seen = request.s.t.sims.near2!.state.seen.length
        const response = await send(request.s, request.body, request.headers)
        expect(response.status).toBe(503)
        expect((await json(response)).error.code).toBe('unavailable')
        expect(request.s.t.sims.near2!.state.seen.length).toBe(seen)
      } finally {
        request.s.t.sims.near2!.state.faults = {}
      }
    })
  }
})

describe('refuseEncrypted: the helper other routes call', () => {
  test('headers or an :encrypted route → 400; otherwise nothing', () => {
    const catchError = (fn: () => void) => { try { fn(); return undefined } catch (error) { return error as { status: number; message: string } } }
    expect(catchError(() => refuseEncrypted(new Headers({ 'svc-encrypted': '1' }), undefined, 'POST /v1/responses'))?.status).toBe(400)
    expect(catchError(() => refuseEncrypted(new Headers({ 'svc-encrypted-nonce': 'x' }), undefined, 'POST /v1/messages'))?.message).toContain('only on POST /v1/chat/completions')
    expect(catchError(() => refuseEncrypted(new Headers(), { id: 'm:encrypted', level: 'encrypted' }, 'MCP'))?.status).toBe(400)
    expect(catchError(() => refuseEncrypted(new Headers({ 'x-other': '1' }), { id: 'm:confidential', level: 'confidential' }, 'MCP'))).toBeUndefined()
  })
})

describe('Encrypted chat: hostile bodies never reach a 500', () => {
  test.each([
    ['messages not an array', { messages: 'x' }],
    ['message not an object', { messages: [5] }],
    ['content an object', { messages: [{ role: 'user', content: {} }] }],
    ['unknown role', { messages: [{ role: 'root', content: 'ab' }] }],
    ['tool_calls not an array', { messages: [{ role: 'assistant', content: null, tool_calls: 'x' }] }],
    ['tool call without function', { messages: [{ role: 'assistant', content: null, tool_calls: [{ id: 'a', type: 'function' }] }] }],
    ['tools an object', { tools: {} }],
    ['tool function missing', { tools: [{ type: 'function' }] }],
    ['tool_choice number', { tool_choice: 5 }],
    ['max_tokens string', { max_tokens: '5' }],
    ['max_tokens beyond the model', { max_tokens: 999_999 }],
    ['stream string', { stream: 'yes' }],
    // QA: a string was spread into {0: 'a', 1: 'b', …, include_usage: true} and forwarded (200).
    ['stream_options a string', { stream: true, stream_options: 'ab' }],
    ['stream_options with an unknown key', { stream: true, stream_options: { include_usage: true, extra: 1 } }],
    ['stream_options.include_usage a string', { stream: true, stream_options: { include_usage: 'yes' } }],
    ['model number', { model: 5 }],
    ['proto keys', JSON.parse('{"__proto__":{"x":1},"constructor":{"prototype":{}}}')],
  ])('%s → 400', async (_name, patch) => {
    const request = await valid('near2')
    const response = await send(request.s, { ...request.body, ...patch }, request.headers)
    expect(response.status).toBe(400)
    expect((await json(response)).error.code).toBe('invalid_request')
  })
})
