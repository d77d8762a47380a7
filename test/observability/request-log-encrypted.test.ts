import { expect, test } from 'bun:test'
import { contextFor, decryptChatStream, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger, silentLogger } from '../../src/observability/logger'
import { json } from '../support/harness'
import { NEAR_V2, startTeeGateway } from '../support/tee'

// README: every request's `"msg":"request"` line carries, for inference, the model, backend,
// outcome, stream, tokens and charge, and a stream's line is written when the stream ends.
// Before, an Encrypted chat's request line had none of them (they went to a second `chat`
// line only), and a stream's was written when its headers left.

test('an Encrypted chat, streamed or not, logs its model, backend, outcome, usage and charge on its request line', async () => {
  const lines: string[] = []
  const t = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2 }], { logger: createLogger('info', line => lines.push(line)) })
  try {
    const org = await t.createOrg()
    const requests = (id: string) => lines.map(line => JSON.parse(line)).filter(line => line.msg === 'request' && line.request_id === id)
    for (const stream of [false, true]) {
      const nonce = (stream ? 'cd' : 'ab').repeat(32)
      const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&nonce=${nonce}`, { key: org.adminKey }))
      const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
      const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream, messages: [{ role: 'user', content: 'a secret prompt' }] }, ctx)
      const requestId = `req-encrypted-${stream}`
      const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers: { ...headers, 'x-request-id': requestId } })
      expect(response.status).toBe(200)
      if (stream) {
        for await (const _chunk of decryptChatStream(response.body!, ctx));
      } else {
        await response.text()
      }
      const logged = requests(requestId)
      expect(logged).toHaveLength(1)
      expect(logged[0]).toMatchObject({
        org_id: org.orgId, route: '/v1/chat/completions', status: 200, model: 'sim:encrypted', backend: expect.stringContaining('near/'),
        outcome: stream ? 'finished' : 'ok', stream,
      })
      expect(logged[0]!.input_tokens).toBeGreaterThan(0)
      expect(logged[0]!.output_tokens).toBeGreaterThan(0)
      expect(BigInt(logged[0]!.charged_nanos)).toBeGreaterThan(0n)
    }
    expect(lines.join('')).not.toContain('a secret prompt')
  } finally {
    await t.stopAll()
  }
})

test('an Encrypted chat counts in the metrics: tokens and nanos by model, the upstream call by provider', async () => {
  // Before: the relay counted nothing, so svc_billed_nanos_total missed every Encrypted charge.
  const t = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2 }], { logger: silentLogger })
  try {
    const org = await t.createOrg()
    const nonce = 'ef'.repeat(32)
    const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa&nonce=${nonce}`, { key: org.adminKey }))
    const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
    const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream: false, messages: [{ role: 'user', content: 'hello' }] }, ctx)
    const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers })
    expect(response.status).toBe(200)
    const usage = (await json(response)).usage
    const charged = (await t.deps.database.client.execute("SELECT -SUM(amount_nanos) AS n FROM ledger_entries WHERE kind = 'settle'")).rows[0]!.n
    const text = t.deps.metrics.registry.render()
    const sample = (series: string) => Number(text.split('\n').find(line => line.startsWith(`${series} `))?.split(' ')[1])
    expect(sample('svc_tokens_total{model="sim:encrypted",direction="input"}')).toBe(usage.prompt_tokens)
    expect(sample('svc_tokens_total{model="sim:encrypted",direction="output"}')).toBe(usage.completion_tokens)
    expect(sample('svc_billed_nanos_total{model="sim:encrypted",purpose="chat"}')).toBe(Math.abs(Number(charged)))
    expect(text).toMatch(/svc_upstream_requests_total\{provider="[^"]*near",outcome="ok"\} 1/)
  } finally {
    await t.stopAll()
  }
})

// QA: an Encrypted backend that failed after its headers (a stream cut, an answer of only
// `data: [DONE]` or `{}`) was counted `ok` in svc_upstream_requests_total and nowhere in
// svc_upstream_errors_total, where the same faults on :confidential were counted in their phase.
test('an Encrypted backend that fails after its headers is counted in its phase, as a Confidential one is, never also ok', async () => {
  const t = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2 }], { logger: silentLogger })
  try {
    const org = await t.createOrg()
    const text = () => t.deps.metrics.registry.render()
    const sample = (series: string) => Number(text().split('\n').find(line => line.startsWith(`${series} `))?.split(' ')[1] ?? 0)
    const provider = 'attested:near'
    const requests = (outcome: string) => sample(`svc_upstream_requests_total{provider="${provider}",outcome="${outcome}"}`)
    const errors = (phase: string) => sample(`svc_upstream_errors_total{provider="${provider}",kind="server",phase="${phase}"}`)
    const chat = async (stream: boolean, faults: Record<string, boolean>) => {
      const attestation: Attestation = await json(await t.request('GET', '/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=ecdsa', { key: org.adminKey }))
      const ctx = contextFor(attestation, generateClientKeys('ecdsa'))
      const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream, messages: [{ role: 'user', content: 'hello' }] }, ctx)
      t.sims.near!.state.faults = faults
      try {
        const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers })
        return { status: response.status, text: await response.text() }
      } finally {
        t.sims.near!.state.faults = {}
      }
    }

    // Cut after its first chunks: the call answered (`ok`), then failed mid-stream.
    const cut = await chat(true, { abortStream: true })
    expect(cut.status).toBe(200)
    expect(cut.text).not.toContain('[DONE]')
    expect(requests('ok')).toBe(1)
    expect(errors('mid-stream')).toBe(1)
    expect(errors('before-first-event')).toBe(0)

    // No completion, streamed (only `data: [DONE]`) or not (`{}`): failed before its first event.
    expect((await chat(true, { emptyAnswer: true })).text).toContain('"error"')
    expect((await chat(false, { emptyAnswer: true })).status).toBe(502)
    expect(requests('server')).toBe(2)
    expect(errors('before-first-event')).toBe(2)
    expect(requests('ok')).toBe(1)
    expect(errors('mid-stream')).toBe(1)
    // One latency per call counted, answered or failed.
    expect(sample(`svc_upstream_response_seconds_count{provider="${provider}"}`)).toBe(3)

    // A call that answers is `ok` once, and nothing else.
    expect((await chat(true, {})).text).toContain('[DONE]')
    expect((await chat(false, {})).status).toBe(200)
    expect(requests('ok')).toBe(3)
    expect(requests('server')).toBe(2)
    expect(errors('mid-stream') + errors('before-first-event')).toBe(3)
  } finally {
    await t.stopAll()
  }
})
