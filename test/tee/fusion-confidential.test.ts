import { describe, expect, test } from 'bun:test'
import { json } from '../support/harness'
import { NEAR_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'

// Fusion at the Confidential level, end to end over HTTP: the participants and the judge are
// `:confidential` catalog entries bound to the simulated TEE backend, every part attests with
// its own fresh challenge, and the result reports exactly what the backend was challenged with.

let t: TeeGateway
let baseUrl: string
let key: string
let orgId: string
teeGatewayForFile([{ id: 'tee-near', proofFormat: NEAR_V2, signingAlgos: ['ecdsa'] }], { models: ['alpha', 'beta', 'gamma', 'judge'], fusionJudge: 'judge' }, session => ({ t, key, orgId, baseUrl } = session))

const sim = () => t.sims['tee-near']!
const fusion = (body: Record<string, unknown>) =>
  fetch(`${baseUrl}/api/v1/chat/fusion`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
const messages = [{ role: 'user', content: 'Is this attested?' }]

describe('Fusion of Confidential participants on an attested backend', () => {
  test('each participant and the judge attest with their own nonce; the result carries exactly what the backend was challenged with', async () => {
    const attestedBefore = sim().state.attestations.length
    const seenBefore = sim().state.seen.length
    const balanceBefore = (await t.deps.balance(orgId)).availableNanos
    const response = await fusion({ models: ['alpha:confidential', 'beta:confidential', 'gamma:confidential'], messages })
    expect(response.status).toBe(200)
    const body = await json(response)
    expect(body.status).toBe('complete')
    // The configured judge is Private; for Confidential participants its Confidential level runs.
    expect(body.judge).toBe('judge:confidential')

    // Three participants and the judge: four challenges, four chats, all distinct nonces.
    const challenges = sim().state.attestations.slice(attestedBefore)
    expect(challenges.length).toBe(4)
    expect(sim().state.seen.length).toBe(seenBefore + 4)
    const nonces = challenges.map(query => query.get('nonce')!)
    expect(new Set(nonces).size).toBe(4)
    for (const query of challenges) {
      expect(query.get('signing_algo')).toBe('ecdsa')
      expect(query.get('model')).toBe(sim().modelName)
    }

    // The address the backend signs with now (an independent attestation through the gateway).
    const served = await json(await t.request('GET', '/api/v1/attestation?model=alpha:confidential', { key }))
    expect(served.signing_address).toMatch(/^0x[0-9a-f]{40}$/i)

    const participantNonces: string[] = []
    for (const entry of body.models as Array<Record<string, any>>) {
      expect(entry.output).toBe('echo: Is this attested?')
      expect(entry.attestation).toEqual({ model: entry.id, nonce: expect.stringMatching(/^[0-9a-f]{64}$/), signing_address: served.signing_address, signing_algo: 'ecdsa', proof_format: NEAR_V2 })
      participantNonces.push(entry.attestation.nonce)
    }
    expect(body.models.map((entry: { id: string }) => entry.id)).toEqual(['alpha:confidential', 'beta:confidential', 'gamma:confidential'])
    // The participants run concurrently (their challenge order is theirs); the judge runs last.
    expect(participantNonces.sort()).toEqual(nonces.slice(0, 3).sort())
    expect(body.judge_attestation).toEqual({ model: 'judge:confidential', nonce: nonces[3], signing_address: served.signing_address, signing_algo: 'ecdsa', proof_format: NEAR_V2 })
    // The judge read every participant's answer (the backend saw them in its prompt).
    const judgePrompt = JSON.stringify(sim().state.seen.at(-1)!.plain.messages)
    expect(judgePrompt.split('echo: Is this attested?').length - 1).toBe(3)
    expect((await t.deps.balance(orgId)).availableNanos).toBeLessThan(balanceBefore)
  })

  test('stream: true ends in the same object, attestation fields included', async () => {
    const attestedBefore = sim().state.attestations.length
    const response = await fusion({ models: ['alpha:confidential', 'beta:confidential'], messages, stream: true })
    expect(response.status).toBe(200)
    expect(response.headers.get('content-type')).toContain('text/event-stream')
    const text = await response.text()
    const final = text.split('\n\n').find(frame => frame.startsWith('event: fusion.completion'))
    expect(final).toBeDefined()
    const body = JSON.parse(final!.split('\n').find(line => line.startsWith('data: '))!.slice(6))
    expect(body.status).toBe('complete')
    const nonces = sim().state.attestations.slice(attestedBefore).map(query => query.get('nonce'))
    expect(nonces.length).toBe(3)
    expect(body.models.map((entry: { attestation: { nonce: string } }) => entry.attestation.nonce).sort()).toEqual(nonces.slice(0, 2).sort())
    expect(body.judge_attestation).toMatchObject({ model: 'judge:confidential', nonce: nonces[2], signing_algo: 'ecdsa', proof_format: NEAR_V2 })
  })

  test('a participant whose evidence contradicts the challenge fails alone with 503, uncharged; with one answer left the run is partial', async () => {
    // The first challenge of this run gets a wrong nonce echoed back; the rest are honest. The
    // simulator records a challenge before it builds the report, so the switch flips in time.
    let first = true
    const original = sim().state.attestations.push.bind(sim().state.attestations)
    sim().state.attestations.push = (...items: URLSearchParams[]) => {
      if (first) {
        first = false
        sim().state.faults = { echoWrongNonce: true }
      } else sim().state.faults = {}
      return original(...items)
    }
    try {
      const response = await fusion({ models: ['alpha:confidential', 'beta:confidential'], messages })
      expect(response.status).toBe(200)
      const body = await json(response)
      const failed = body.models.filter((entry: Record<string, unknown>) => entry.error !== undefined && entry.error !== null)
      expect(failed.length).toBe(1)
      expect(failed[0].error_code).toBe('unavailable')
      expect(failed[0].attestation).toBeUndefined()
      expect(failed[0].tokens).toBe(0)
      expect(body.status).toBe('partial')
      expect(body.judge_attestation?.model).toBe('judge:confidential')
    } finally {
      sim().state.attestations.push = original
      sim().state.faults = {}
    }
  })
})

describe('the level rules against real attested catalog entries', () => {
  const cases: Array<[string, Record<string, unknown>, RegExp, string]> = [
    ['Confidential with Anonymous', { models: ['alpha:confidential', 'demo-anonymous'] }, /combine only with other Confidential/, 'models'],
    ['Confidential with Private (the same attested model family)', { models: ['alpha:confidential', 'beta'] }, /combine only with other Confidential/, 'models'],
    ['an Encrypted participant', { models: ['alpha:confidential', 'beta:encrypted'] }, /Encrypted models cannot take part in Fusion/, 'models.1'],
    ['Encrypted participants only', { models: ['alpha:encrypted', 'beta:encrypted'] }, /Encrypted/, 'models.0'],
    ['an Encrypted participant among Private ones', { models: ['alpha', 'beta', 'gamma:encrypted'] }, /Encrypted/, 'models.2'],
    ['a named Private judge for Confidential participants', { models: ['alpha:confidential', 'beta:confidential'], judge: 'judge' }, /synthesis must be too/, 'judge'],
    ['an Encrypted judge', { models: ['alpha:confidential', 'beta:confidential'], judge: 'judge:encrypted' }, /judge must read the answers/, 'judge'],
  ]
  for (const [name, patch, message, param] of cases) {
    test(`${name} → 400 before any attestation, chat or charge`, async () => {
      const attested = sim().state.attestations.length
      const seen = sim().state.seen.length
      const before = (await t.deps.balance(orgId)).availableNanos
      const response = await fusion({ messages, ...patch })
      expect(response.status).toBe(400)
      const body = await json(response)
      expect(body.error.code).toBe('invalid_request')
      expect(body.error.message).toMatch(message)
      expect(body.error.param).toBe(param)
      expect(sim().state.attestations.length).toBe(attested)
      expect(sim().state.seen.length).toBe(seen)
      expect((await t.deps.balance(orgId)).availableNanos).toBe(before)
    })
  }

  test('an explicitly named Confidential judge is used as named', async () => {
    const response = await fusion({ models: ['alpha:confidential', 'beta:confidential'], judge: 'gamma:confidential', messages })
    expect(response.status).toBe(200)
    const body = await json(response)
    expect(body.judge).toBe('gamma:confidential')
    expect(body.judge_attestation.model).toBe('gamma:confidential')
  })
})
