import { describe, expect, test } from 'bun:test'
import { contextFor, encryptChatRequest, generateClientKeys } from '../../src/client/tee'
import { json } from '../support/harness'
import { NEAR_V2, type TeeGateway, teeGatewayForFile } from '../support/tee'

// Attestation fetches as Prometheus series (issue 12 point 1 applied to TEE): latency by
// provider and failures by provider and kind, counted once per evidence fetch whoever asked for
// it (Confidential chat, Fusion parts, Encrypted key pinning, GET /api/v1/attestation).

const PROVIDER = 'attested:tee-near'

let t: TeeGateway
let key: string
teeGatewayForFile([{ id: 'tee-near', proofFormat: NEAR_V2 }], { models: ['sim', 'other'], fusionJudge: 'sim' }, session => ({ t, key } = session))

const sim = () => t.sims['tee-near']!

/** The value of one series in the text /metrics serves (0 when the series does not exist yet). */
function sample(series: string): number {
  const line = t.deps.metrics.registry.render().split('\n').find(candidate => candidate.startsWith(`${series} `))
  return line === undefined ? 0 : Number(line.slice(series.length + 1))
}
const fetches = () => sample(`svc_attestation_fetch_seconds_count{provider="${PROVIDER}"}`)
const failures = (kind: string) => sample(`svc_attestation_failures_total{provider="${PROVIDER}",kind="${kind}"}`)

/** Runs `act` and returns how many fetches it added, checking the backend saw exactly as many challenges. */
async function counted(act: () => Promise<void>): Promise<number> {
  const before = fetches()
  const challenges = sim().state.attestations.length
  await act()
  const added = fetches() - before
  expect(sim().state.attestations.length - challenges).toBe(added)
  return added
}

const chat = (body: Record<string, unknown>, headers: Record<string, string> = {}) => t.request('POST', '/v1/chat/completions', { key, body, headers })

// QA: a Confidential call's upstream requests were counted under `attested:…` and its failures
// under `openai-compatible:…` (the attested provider's inner chat client), so the two series
// could not be joined. (Before the tests below, which stop the backend.)
test("a Confidential stream's mid-stream failure is counted under the attested provider, as its call is", async () => {
  const errors = () => t.deps.metrics.registry.render().split('\n').filter(line => line.startsWith('svc_upstream_errors_total{'))
  sim().state.faults = { abortStream: true }
  try {
    const response = await chat({ model: 'sim:confidential', stream: true, messages: [{ role: 'user', content: 'cut me' }] })
    expect(response.status).toBe(200)
    await response.text()
  } finally {
    sim().state.faults = {}
  }
  expect(errors().some(line => line.includes(`provider="${PROVIDER}"`) && line.includes('phase="mid-stream"'))).toBe(true)
  expect(errors().filter(line => line.includes('openai-compatible:'))).toEqual([])
})

describe('svc_attestation_fetch_seconds and svc_attestation_failures_total', () => {
  test('the series are declared with their help and type', () => {
    const text = t.deps.metrics.registry.render()
    expect(text).toContain('# TYPE svc_attestation_fetch_seconds histogram')
    expect(text).toContain('# TYPE svc_attestation_failures_total counter')
  })

  test('one fetch per Confidential chat, plain and streamed, per GET /api/v1/attestation, per Fusion part', async () => {
    expect(await counted(async () => expect((await chat({ model: 'sim:confidential', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(200))).toBe(1)
    expect(
      await counted(async () => {
        const response = await chat({ model: 'sim:confidential', stream: true, messages: [{ role: 'user', content: 'hi' }] })
        expect(response.status).toBe(200)
        await response.text()
      }),
    ).toBe(1)
    expect(await counted(async () => expect((await t.request('GET', '/api/v1/attestation?model=sim:confidential', { key })).status).toBe(200))).toBe(1)
    // Two participants and the judge.
    expect(
      await counted(async () => {
        const response = await t.request('POST', '/api/v1/chat/fusion', { key, body: { models: ['sim:confidential', 'other:confidential'], messages: [{ role: 'user', content: 'hi' }] } })
        expect((await json(response)).status).toBe('complete')
      }),
    ).toBe(3)
    // The histogram's buckets are cumulative and end at the count.
    expect(sample(`svc_attestation_fetch_seconds_bucket{provider="${PROVIDER}",le="+Inf"}`)).toBe(fetches())
    expect(sample(`svc_attestation_fetch_seconds_sum{provider="${PROVIDER}"}`)).toBeGreaterThan(0)
  })

  test('an Encrypted chat: the client attests once, the gateway pins the key with one fetch of its own', async () => {
    expect(
      await counted(async () => {
        const attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ed25519', { key }))
        const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', messages: [{ role: 'user', content: 'hello' }] }, contextFor(attestation, generateClientKeys('ed25519')))
        expect((await chat(body as Record<string, unknown>, headers)).status).toBe(200)
      }),
    ).toBe(2)
  })

  test('failures by kind: evidence rejected, a backend 5xx, an unreachable backend; each also times the fetch', async () => {
    const rejected = failures('evidence-rejected')
    for (const fault of ['echoWrongNonce', 'emptyQuote', 'keyAddressMismatch'] as const) {
      sim().state.faults = { [fault]: true }
      try {
        expect(await counted(async () => expect((await chat({ model: 'sim:confidential', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(503))).toBe(1)
      } finally {
        sim().state.faults = {}
      }
    }
    expect(failures('evidence-rejected')).toBe(rejected + 3)

    const server = failures('server')
    // A backend answering 500 records no challenge: count the fetch alone.
    sim().state.faults = { status500: true }
    try {
      const before = fetches()
      expect((await t.request('GET', '/api/v1/attestation?model=sim:confidential', { key })).status).toBe(503)
      expect(fetches()).toBe(before + 1)
    } finally {
      sim().state.faults = {}
    }
    expect(failures('server')).toBe(server + 1)
    expect(failures('evidence-rejected')).toBe(rejected + 3)

    // Last: the backend goes away.
    await sim().stop()
    const before = fetches()
    expect((await chat({ model: 'sim:confidential', messages: [{ role: 'user', content: 'hi' }] })).status).toBe(503)
    expect(fetches()).toBe(before + 1)
    expect(failures('connection')).toBe(1)
  })
})
