import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger } from '../../src/observability/logger'
import { ethAddress } from '../../src/tee/keys'
import type { SimFaults } from '../../src/tee/sim/types'
import { json } from '../support/harness'
import { startTeeGateway, type TeeGateway, TWO_NEAR_BACKENDS } from '../support/tee'

// Encrypted key pinning with two backends `a` and `b` of one model, `a` first, when `a` sends
// evidence the gateway rejects. Only the backend holding the client's key can serve its
// ciphertext, so `a`'s evidence refuses a request only when the client encrypted to `a`'s key,
// as GET /api/v1/attestation with `b`'s signing_address passes `a` over (QA tee #1).

let t: TeeGateway
let key: string
const lines: string[] = []

beforeAll(async () => {
  t = await startTeeGateway(TWO_NEAR_BACKENDS, { logger: createLogger('warn', line => lines.push(line)) })
  key = (await t.createOrg()).adminKey
})
afterAll(() => t.stopAll())

const failures = (provider: string) => {
  const series = `svc_attestation_failures_total{provider="attested:${provider}",kind="evidence-rejected"}`
  const line = t.deps.metrics.registry.render().split('\n').find(candidate => candidate.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}

/** The attestation of `sim`'s ecdsa key (selected by its signing_address), with the given faults on `a`. */
async function attestTo(sim: 'a' | 'b', faults: SimFaults = {}): Promise<Attestation> {
  t.sims.a!.state.faults = faults
  const address = ethAddress(t.sims[sim]!.keys().ecdsa.publicKey)
  const response = await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&signing_address=${address}`, { key })
  expect(response.status).toBe(200)
  return json(response)
}

async function chat(attestation: Attestation, text: string) {
  const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: text }] }, contextFor(attestation, generateClientKeys('ecdsa')))
  return t.request('POST', '/v1/chat/completions', { key, body, headers })
}

describe('Encrypted key pinning past a backend whose evidence is rejected', () => {
  for (const fault of ['echoWrongNonce', 'quoteWrongNonce', 'emptyQuote', 'keyAddressMismatch', 'wrongAlgoEcho'] as const) {
    test(`${fault} on a: a chat encrypted to b's key is served by b, as its attestation was`, async () => {
      try {
        const attestation = await attestTo('b', { [fault]: true })
        const seenA = t.sims.a!.state.seen.length
        const rejected = failures('a')
        lines.length = 0
        const response = await chat(attestation, `to b past ${fault}`)
        expect(response.status).toBe(200)
        expect(t.sims.b!.state.seen.at(-1)!.plain.messages[0].content).toBe(`to b past ${fault}`)
        expect(t.sims.a!.state.seen.length).toBe(seenA)
        // The rejection is still reported, as when it refused the request.
        expect(failures('a')).toBe(rejected + 1)
        const warning = lines.map(line => JSON.parse(line)).find(line => line.msg.includes('rejected'))
        expect(warning).toMatchObject({ level: 'warn', backend: 'attested:a/sim/echo-1' })
      } finally {
        t.sims.a!.state.faults = {}
      }
    })
  }

  for (const fault of ['echoWrongNonce', 'emptyQuote', 'keyAddressMismatch', 'wrongAlgoEcho'] as const) {
    test(`${fault} on a: a chat encrypted to a's key is still 503; b never papers over it`, async () => {
      const attestation = await attestTo('a')
      t.sims.a!.state.faults = { [fault]: true }
      try {
        const seenB = t.sims.b!.state.seen.length
        const response = await chat(attestation, 'to a')
        expect(response.status).toBe(503)
        expect((await json(response)).error.message).toContain('attestation evidence rejected')
        expect(t.sims.b!.state.seen.length).toBe(seenB)
      } finally {
        t.sims.a!.state.faults = {}
      }
    })
  }

  test("the key's own backend does not answer: 503 retry, not the client's 400 key mismatch", async () => {
    const attestation = await attestTo('b')
    t.sims.b!.state.faults = { status500: true }
    try {
      const response = await chat(attestation, 'to b, which is down')
      expect(response.status).toBe(503)
      expect((await json(response)).error.message).toContain('some did not answer; retry shortly')
    } finally {
      t.sims.b!.state.faults = {}
    }
  })

  test('a key neither backend holds: 400 re-attest, even past a rejected backend', async () => {
    const attestation = await attestTo('b')
    const stale = { ...attestation, model_public_key: generateClientKeys('ecdsa').publicKeyHex }
    t.sims.a!.state.faults = { echoWrongNonce: true }
    try {
      const response = await chat(stale, 'to nobody')
      expect(response.status).toBe(400)
      expect((await json(response)).error.message).toContain('model key mismatch')
    } finally {
      t.sims.a!.state.faults = {}
    }
  })
})
