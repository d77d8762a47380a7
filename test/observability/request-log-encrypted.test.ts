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
