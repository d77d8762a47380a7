import { expect, test } from 'bun:test'
import { contextFor, decryptChatStream, encryptChatRequest, generateClientKeys, type Attestation } from '../../src/client/tee'
import { createLogger } from '../../src/observability/logger'
import { json } from '../support/harness'
import { NEAR_V2, startTeeGateway } from '../support/tee'

// After Encrypted exchanges (plain, streamed, refused, tampered), neither the log lines nor any
// database row holds the plaintext, the ciphertext, the client key or the attestation nonce.

test('no plaintext, ciphertext, client key or nonce in the logs or the database', async () => {
  const lines: string[] = []
  const t = await startTeeGateway([{ id: 'near', proofFormat: NEAR_V2 }], { logger: createLogger('debug', line => lines.push(line)) })
  try {
    const org = await t.createOrg()
    const secrets: string[] = []
    for (const [algo, stream] of [['ecdsa', false], ['ed25519', true], ['ecdsa', true]] as const) {
      const nonce = 'ab'.repeat(16) + algo.length.toString(16).padStart(2, '0').repeat(16)
      const attestation: Attestation = await json(await t.request('GET', `/api/v1/attestation?model=sim:encrypted&trust_tier=encrypted&signing_algo=${algo}&nonce=${nonce}`, { key: org.adminKey }))
      const ctx = contextFor(attestation, generateClientKeys(algo))
      const plaintext = `top secret plaintext ${algo} ${stream}`
      const { body, headers } = encryptChatRequest({ model: 'sim:encrypted', stream, messages: [{ role: 'user', content: plaintext }] }, ctx, { responseEvidence: !stream })
      secrets.push(plaintext, body.messages[0].content.slice(0, 64), ctx.client.publicKeyHex.slice(0, 64), nonce)
      const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body, headers })
      expect(response.status).toBe(200)
      if (stream) {
        let reply = ''
        for await (const chunk of decryptChatStream(response.body!, ctx)) reply += chunk.choices[0]?.delta?.content ?? ''
        expect(reply).toBe(`echo: ${plaintext}`)
        secrets.push(reply)
      } else {
        const reply = await json(response)
        secrets.push(reply.choices[0].message.content.slice(0, 64))
      }
      // A refused one (plaintext content) and a tampered one (backend 400) too.
      const refused = structuredClone(body)
      refused.messages[0].content = plaintext
      expect((await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: refused, headers })).status).toBe(400)
      const tampered = structuredClone(body)
      tampered.messages[0].content = tampered.messages[0].content.slice(0, -2) + (tampered.messages[0].content.endsWith('00') ? '11' : '00')
      expect((await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: tampered, headers })).status).toBe(400)
    }
    expect(lines.some(line => line.includes('"level":"encrypted"'))).toBe(true)

    const dump: string[] = []
    const tables = await t.deps.database.client.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
    for (const row of tables.rows) {
      const rows = await t.deps.database.client.execute(`SELECT * FROM "${String(row.name)}"`)
      dump.push(JSON.stringify(rows.rows, (_key, value) => (typeof value === 'bigint' ? value.toString() : value)))
    }
    const logs = lines.join('\n')
    const database = dump.join('\n')
    expect(database.length).toBeGreaterThan(100)
    for (const secret of secrets) {
      expect(logs.includes(secret) ? `log holds ${secret}` : 'clean').toBe('clean')
      expect(database.includes(secret) ? `database holds ${secret}` : 'clean').toBe('clean')
    }
  } finally {
    await t.stopAll()
  }
})
