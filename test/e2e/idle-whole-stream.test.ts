import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { chunk, DONE, frame } from '../providers/openai-wire'
import type { FakeUpstream } from '../support/fake-upstream'
import type { TestApp, TestOrg } from '../support/harness'
import { expectNothingOpen, settledOnce, startPassThroughGateway } from '../support/pass-through'

// An idle gateway sends a streamed answer that came whole (the upstream's stream in one read)
// before settling it, and writes the terminal frames once the settlement commits
// (stream-response.ts `before`, a direct stream). Over a real socket: the answer and its usage
// arrive whole, and a client that leaves after the answer's first bytes is still charged once,
// with its hold, slot and stream freed.

const STREAM = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'Hello' }) + chunk({ content: ' there' }) + chunk({}, 'stop') +
  frame({ id: 'chatcmpl-test123', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'up', choices: [], usage: { prompt_tokens: 11, completion_tokens: 2, total_tokens: 13 } }) + DONE

describe('a whole stream on an idle gateway, over a socket', () => {
  let t: TestApp
  let upstream: FakeUpstream
  let org: TestOrg
  let base: string

  beforeAll(async () => {
    ;({ t, upstream, org } = await startPassThroughGateway('openai-compatible', 'backends: [{ provider: up, model: up }], price: { input_per_mtok: "1000", output_per_mtok: "1000" }, context_length: 8192, max_output_tokens: 128', 'idle-whole', 'iw'))
    base = t.listen()
  })

  afterAll(async () => {
    expectNothingOpen(t)
    await upstream.close()
    await t.close()
  })

  test('the official SDK reads the answer, its usage and the end; charged once for the reported usage', async () => {
    upstream.enqueue({ kind: 'sse', body: STREAM })
    const client = new OpenAI({ apiKey: org.adminKey, baseURL: `${base}/v1`, maxRetries: 0 })
    const { data: stream, response } = await client.chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true, stream_options: { include_usage: true } }).withResponse()
    let text = ''
    let usage: OpenAI.CompletionUsage | null | undefined
    let finish: string | null | undefined
    for await (const part of stream) {
      text += part.choices[0]?.delta.content ?? ''
      finish ??= part.choices[0]?.finish_reason
      if (part.usage) usage = part.usage
    }
    expect(text).toBe('Hello there')
    expect(finish).toBe('stop')
    expect(usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 2 })
    // 13 tokens at 1000 USD per Mtok: 13,000,000 nanos.
    expect(await settledOnce(t, response.headers.get('x-request-id')!)).toEqual({ n: 1, nanos: 13_000_000n })
  })

  test('a client that leaves once the answer starts arriving is charged once; hold, slot and stream freed', async () => {
    upstream.enqueue({ kind: 'sse', body: STREAM })
    const requestId = `iw-left-${Bun.randomUUIDv7()}`
    const body = JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'hi' }] })
    const received = await new Promise<string>((resolve, reject) => {
      let text = ''
      void Bun.connect({
        hostname: '127.0.0.1',
        port: Number(new URL(base).port),
        socket: {
          open: socket =>
            void socket.write(
              `POST /v1/chat/completions HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: Bearer ${org.adminKey}\r\nx-request-id: ${requestId}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
            ),
          data: (socket, chunk) => {
            text += new TextDecoder().decode(chunk)
            if (text.includes('Hello')) {
              socket.terminate()
              resolve(text)
            }
          },
          close: () => resolve(text),
          error: (_socket, error) => reject(error),
        },
      })
    })
    expect(received.startsWith('HTTP/1.1 200')).toBe(true)
    expect(await settledOnce(t, requestId)).toEqual({ n: 1, nanos: 13_000_000n })
    expect(t.deps.limits.concurrency.inUse(org.orgId)).toBe(0)
    expectNothingOpen(t)
  })
})
