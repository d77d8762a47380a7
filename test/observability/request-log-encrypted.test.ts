import { expect, test } from 'bun:test'
import { contextFor, decryptChatStream, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger } from '../../src/observability/logger'
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
