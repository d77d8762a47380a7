import { afterEach, expect, test } from 'bun:test'
import { buildTestApp, type TestApp } from '../support/harness'

// The README's Fusion example, for real: the embedded default config, the gateway listening on a
// port, three demo models and the default judge, over HTTP. It also checks that the route lifts
// Bun's idle timeout for its connection (a Fusion run is several generations long).

let t: TestApp | undefined
afterEach(async () => {
  await t?.app.stop(true)
  await t?.close()
  t = undefined
})

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b
/** The demo models' price: 0.10 USD in, 0.40 USD out per million tokens. */
const demoCharge = (input: number, output: number) => ceilDiv(BigInt(input) * 100_000_000n, 1_000_000n) + ceilDiv(BigInt(output) * 400_000_000n, 1_000_000n)

test('three demo models and the default judge through a listening gateway, billed part by part', async () => {
  t = await buildTestApp()
  t.app.listen({ port: 0, hostname: '127.0.0.1' })
  const server = t.app.server!
  const lifted: string[] = []
  const timeout = server.timeout.bind(server)
  server.timeout = (request: Request, seconds: number) => {
    lifted.push(`${new URL(request.url).pathname} ${seconds}`)
    return timeout(request, seconds)
  }
  const org = await t.createOrg('readme')

  // As in the README: curl -s localhost:8080/api/v1/chat/fusion -H "Authorization: Bearer $KEY" -H 'Content-Type: application/json' -H "Idempotency-Key: $(uuidgen)" -d '…'
  const response = await fetch(`http://127.0.0.1:${server.port}/api/v1/chat/fusion`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json', 'idempotency-key': crypto.randomUUID() },
    body: JSON.stringify({ models: ['demo-anonymous', 'demo-private', 'demo-alt'], messages: [{ role: 'user', content: 'Is 9.11 larger than 9.9?' }] }),
  })
  expect(response.status).toBe(200)
  expect(response.headers.get('x-request-id')).toBeTruthy()
  const result: any = await response.json()
  expect(result.object).toBe('fusion.completion')
  expect(result.status).toBe('complete')
  expect(result.judge).toBe('demo-private')
  expect(result.models.map((entry: any) => entry.id)).toEqual(['demo-anonymous', 'demo-private', 'demo-alt'])
  for (const entry of result.models) {
    expect(entry).toMatchObject({ output: 'Hello from the demo model. You said: Is 9.11 larger than 9.9?', finish_reason: 'stop' })
    expect(entry.prompt_tokens).toBeGreaterThan(0)
    expect(entry.tokens).toBe(12) // one token per word
    expect(entry.error).toBeUndefined()
  }
  // The demo judge echoes the last message it was given: the candidates block of the synthesis prompt.
  expect(result.synthesis).toStartWith('Hello from the demo model. You said: 3 models answered the last message above.')
  expect(result.synthesis_prompt_tokens).toBeGreaterThan(result.models[0].prompt_tokens)
  expect(result.synthesis_tokens).toBeGreaterThan(0)
  // Lifted for the run, restored with its answer (http/idle-timeout.ts).
  expect(lifted).toEqual(['/api/v1/chat/fusion 0', '/api/v1/chat/fusion 30'])

  // Four settlements, each the demo price of the usage shown for that part.
  const rows = await t.deps.database.client.execute("SELECT amount_nanos FROM ledger_entries WHERE kind = 'settle' AND purpose = 'fusion'")
  const charged = rows.rows.map(row => BigInt(row.amount_nanos as bigint)).sort()
  const expected = [
    ...result.models.map((entry: any) => demoCharge(entry.prompt_tokens, entry.tokens)),
    demoCharge(result.synthesis_prompt_tokens, result.synthesis_tokens),
  ].sort()
  expect(charged).toEqual(expected)

  // Streamed: lifted for the run, restored once its last event is written.
  const streamed = await fetch(`http://127.0.0.1:${server.port}/api/v1/chat/fusion`, {
    method: 'POST',
    headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ models: ['demo-anonymous', 'demo-private'], stream: true, messages: [{ role: 'user', content: 'Is 9.11 larger than 9.9?' }] }),
  })
  expect(await streamed.text()).toContain('event: fusion.completion')
  expect(lifted.slice(2)).toEqual(['/api/v1/chat/fusion 0', '/api/v1/chat/fusion 30'])
})
