import { afterEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { loadConfig } from '../../src/config/load'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { openAIClient } from '../support/gateway'
import { buildTestApp, createPlanOrg, type TestApp } from '../support/harness'

// Spec §8 limits on POST /v1/chat/completions over a real socket: the 64 MiB body cap (enforced
// while the body streams in), the 1 MiB inline attachment cap, the model's context, and
// `uncensored` only where the catalog has an uncensored binding. Each refusal charges nothing.

const MiB = 1024 * 1024
const CREDIT = 10_000_000_000n

let t: TestApp
let server: ReturnType<typeof Bun.serve>
let upstream: FakeUpstream | undefined
let client: OpenAI
let orgId: string
let key: string
/** The headers of every request the gateway received. */
let seenHeaders: Headers[]

afterEach(async () => {
  server.stop(true)
  await upstream?.close()
  upstream = undefined
  await t.close()
})

/** The gateway on a real port (the embedded default unless `yaml` is given), and a funded pay-as-you-go org. */
async function start(yaml?: string) {
  const env = yaml === undefined ? {} : { SVC_CONFIG: '/virtual/limits.yaml' }
  t = await buildTestApp(env, yaml === undefined ? undefined : loadConfig(env, () => yaml))
  seenHeaders = []
  server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: request => {
      seenHeaders.push(request.headers)
      return t.app.fetch(request)
    },
  })
  ;({ orgId, key } = await createPlanOrg(t, { name: 'limits', keyName: 'chat', credit: CREDIT }))
  client = openAIClient(`http://127.0.0.1:${server.port}`, key)
}

/** Asserts the refusal left no trace: nothing charged, no hold, no slot. */
async function expectUntouched() {
  const balance = await t.deps.balance(orgId)
  expect(balance.prepaidNanos).toBe(CREDIT)
  expect(balance.availableNanos).toBe(CREDIT)
  expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
}

async function refusal(body: Record<string, unknown>): Promise<InstanceType<typeof OpenAI.APIError>> {
  const error = await client.chat.completions.create(body as never).then(
    () => {
      throw new Error('expected the request to be refused')
    },
    error => error,
  )
  expect(error).toBeInstanceOf(OpenAI.APIError)
  return error
}

/** A base64 data URL of `bytes` bytes of a PNG-looking payload. */
function pngDataUrl(bytes: number): string {
  const data = new Uint8Array(bytes)
  data.set([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
  return `data:image/png;base64,${Buffer.from(data).toString('base64')}`
}

describe('chat request limits', () => {
  test('a chunked body over 64 MiB → 413 while it streams in: the upload is cut short, never read whole', async () => {
    await start()
    const total = 256 * MiB
    const piece = new Uint8Array(MiB).fill(0x20) // JSON whitespace: the cap, not the parser, must stop it
    let pulled = 0
    let cancelled = false
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= total) return controller.close()
        pulled += piece.byteLength
        controller.enqueue(piece)
      },
      cancel() {
        cancelled = true
      },
    })
    const response = await fetch(`http://127.0.0.1:${server.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body,
      duplex: 'half',
    } as RequestInit)
    expect(response.status).toBe(413)
    expect(await response.json()).toMatchObject({ error: { code: 'payload_too_large', type: 'invalid_request_error' } })
    expect(response.headers.get('x-request-id')).toMatch(/.+/)
    // Sent chunked: the cap could not have been decided from a Content-Length.
    expect(seenHeaders[0]!.get('content-length')).toBeNull()
    expect(seenHeaders[0]!.get('transfer-encoding')).toBe('chunked')
    // The server answered after a little over the cap and the client stopped uploading.
    expect(pulled).toBeGreaterThan(64 * MiB)
    expect(pulled).toBeLessThan(total / 2)
    expect(cancelled).toBe(true)
    await expectUntouched()
  })

  test('a declared Content-Length over 64 MiB → 413 before a single body byte is sent', async () => {
    await start()
    const head = await new Promise<string>((resolve, reject) => {
      let received = ''
      Bun.connect({
        hostname: '127.0.0.1',
        port: server.port!,
        socket: {
          open(socket) {
            socket.write(
              `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${64 * MiB + 1}\r\n\r\n`,
            )
          },
          data(socket, chunk) {
            received += Buffer.from(chunk).toString('latin1')
            if (received.includes('\r\n\r\n')) {
              socket.end()
              resolve(received)
            }
          },
          close: () => resolve(received),
          error: (_socket, error) => reject(error),
        },
      }).catch(reject)
    })
    expect(head).toStartWith('HTTP/1.1 413')
    await expectUntouched()
  })

  test('an inline image over 1 MiB decoded → 400 on a vision model; exactly 1 MiB passes through to the backend', async () => {
    upstream = await FakeUpstream.start()
    await start(
      [
        'providers:',
        `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", retention: none }`,
        'models:',
        '  - { id: eyes, backends: [{ provider: up, model: vision-model }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 100000, max_output_tokens: 1000, capabilities: { vision: true } }',
        'plans: { payg: { monthly_allowance: "0", fusion: false } }',
      ].join('\n'),
    )
    const ask = (bytes: number) => ({
      model: 'eyes',
      messages: [{ role: 'user', content: [{ type: 'text', text: 'What is this?' }, { type: 'image_url', image_url: { url: pngDataUrl(bytes) } }] }],
    })

    const tooBig = await refusal(ask(MiB + 1))
    expect([tooBig.status, tooBig.code, tooBig.param]).toEqual([400, 'invalid_request', 'messages.0.content.1.image_url.url'])
    expect(tooBig.message).toContain('1 MiB')
    expect(upstream.requests).toHaveLength(0)
    await expectUntouched()

    upstream.enqueue({ kind: 'sse', body: openAIWire.stream({ text: 'A tiny PNG.', finish: 'stop', usage: { inputTokens: 900, outputTokens: 4 } }) })
    const completion = await client.chat.completions.create(ask(MiB) as never)
    expect(completion.choices[0]!.message.content).toBe('A tiny PNG.')
    const sent = upstream.onlyRequest().body.messages[0].content[1]
    expect(sent.type).toBe('image_url')
    expect(sent.image_url.url).toStartWith('data:image/png;base64,')
    expect(Buffer.from(sent.image_url.url.slice('data:image/png;base64,'.length), 'base64').byteLength).toBe(MiB)
  })

  test("a request that cannot fit the model's context → 400; one that fits gets its output bounded by what is left", async () => {
    await start()
    // demo-anonymous: context 32768, max output 4096. About 35 000 input tokens cannot fit at all.
    const overflow = await refusal({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'x'.repeat(140_000) }] })
    expect([overflow.status, overflow.code, overflow.param]).toEqual([400, 'invalid_request', 'messages'])
    expect(overflow.message).toContain('32768')

    // About 30 004 input tokens fit, but not with 4096 more of output.
    const words = 'x '.repeat(60_000)
    const tight = await refusal({ model: 'demo-anonymous', messages: [{ role: 'user', content: words }], max_tokens: 4096 })
    expect([tight.status, tight.code, tight.param]).toEqual([400, 'invalid_request', 'messages'])
    await expectUntouched()

    // Without max_tokens it is served, and the answer stops where the context runs out.
    const served = await client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: words }] })
    expect(served.choices[0]!.finish_reason).toBe('length')
    expect(served.usage!.completion_tokens).toBe(32768 - (Math.ceil(words.length / 4) + 4))
  })

  test('uncensored: true → 400 where the model has no uncensored binding; else only the uncensored binding serves it', async () => {
    upstream = await FakeUpstream.start()
    await start(
      [
        'providers:',
        '  - { id: demo, type: demo, retention: none }',
        `  - { id: up, type: openai-compatible, base_url: "${upstream.url}/v1", retention: none }`,
        'models:',
        '  - { id: tame, backends: [{ provider: demo, model: demo }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 512 }',
        '  - id: both',
        '    backends: [{ provider: up, model: careful-model }, { provider: up, model: free-model, uncensored: true }]',
        '    price: { input_per_mtok: "1", output_per_mtok: "2" }',
        '    context_length: 8192',
        '    max_output_tokens: 512',
        'plans: { payg: { monthly_allowance: "0", fusion: false } }',
      ].join('\n'),
    )
    const error = await refusal({ model: 'tame', messages: [{ role: 'user', content: 'anything goes?' }], uncensored: true })
    expect([error.status, error.code, error.param]).toEqual([400, 'invalid_request', 'uncensored'])
    await expectUntouched()
    // Without the flag the same model serves.
    const tame = await client.chat.completions.create({ model: 'tame', messages: [{ role: 'user', content: 'hi' }] })
    expect(tame.choices[0]!.message.content).toBe('Hello from the demo model. You said: hi')

    const reply = { kind: 'sse' as const, body: openAIWire.stream({ text: 'ok', finish: 'stop', usage: { inputTokens: 3, outputTokens: 1 } }) }
    upstream.enqueue(reply, reply, reply)
    await client.chat.completions.create({ model: 'both', messages: [{ role: 'user', content: 'hi' }], uncensored: true } as never)
    await client.chat.completions.create({ model: 'both', messages: [{ role: 'user', content: 'hi' }] })
    // Messages takes the extension too (QA: "unknown field"), as README's privacy section says of every route.
    const messages = await t.request('POST', '/v1/messages', { key, body: { model: 'both', max_tokens: 10, uncensored: true, messages: [{ role: 'user', content: 'hi' }] } })
    expect(messages.status).toBe(200)
    expect(upstream.requests.map(request => request.body.model)).toEqual(['free-model', 'careful-model', 'free-model'])
    for (const request of upstream.requests) expect(request.text).not.toContain('uncensored')
  })
})
