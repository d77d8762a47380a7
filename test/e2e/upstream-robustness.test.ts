import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { anthropicWire } from '../providers/anthropic-wire'
import { openAIWire } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, startServedGateway, upstreamProvider } from '../support/gateway'
import { type TestApp } from '../support/harness'
import { poll } from '../support/poll'

// Upstreams that misbehave in ways the conformance suites do not play: a stream line that never
// ends, and error bodies that name the operator's internal hosts. The gateway is served over
// HTTP with the official SDK as its client; the upstreams are real servers on port 0.

const CREDIT = 10_000_000_000n
const PRICE_YAML = '{ input_per_mtok: "1", output_per_mtok: "3" }'
const UPSTREAM_KEY = 'sk-upstream-key-0123456789'

/**
 * An upstream that answers 200 text/event-stream, sends `prefix` (whole events), then one SSE line
 * that never ends, until it is cut.
 */
function endlessLine(prefix = '') {
  let sent = 0
  let cut = false
  let resolveCut!: () => void
  const whenCut = new Promise<void>(resolve => (resolveCut = resolve))
  const piece = new TextEncoder().encode('a'.repeat(64 * 1024))
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    fetch: () =>
      new Response(
        new ReadableStream<Uint8Array>({
          start: controller => controller.enqueue(new TextEncoder().encode(`${prefix}data: {"text":"`)),
          pull: async controller => {
            // One piece per macrotask, as a network would deliver them.
            await new Promise(resolve => setImmediate(resolve))
            sent += piece.length
            controller.enqueue(piece)
          },
          cancel: () => {
            cut = true
            resolveCut()
          },
        }),
        { headers: { 'content-type': 'text/event-stream' } },
      ),
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    sent: () => sent,
    cut: () => cut,
    whenCut,
    close: () => server.stop(true),
  }
}

for (const type of ['openai-compatible', 'anthropic'] as const) {
  const wire = type === 'anthropic' ? anthropicWire : openAIWire

  describe(`${type} upstreams that misbehave`, () => {
    let t: TestApp
    let endless: ReturnType<typeof endlessLine>
    let endlessAfterText: ReturnType<typeof endlessLine>
    let healthy: FakeUpstream
    let client: OpenAI
    let orgId: string

    const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos
    const slotsInUse = () => t.deps.limits.concurrency.inUse(orgId)

    beforeEach(async () => {
      endless = endlessLine()
      endlessAfterText = endlessLine(wire.partial('words before the flood'))
      healthy = await FakeUpstream.start()
      const provider = (id: string, url: string) => upstreamProvider(id, type, `${url}/v1`, 'UPSTREAM_KEY')
      const model = (id: string, backends: string) =>
        `  - { id: ${id}, backends: ${backends}, price: ${PRICE_YAML}, context_length: 16384, max_output_tokens: 2048, capabilities: { tools: true } }`
      const yaml = paygConfig(
        [provider('endless', endless.url), provider('healthy', healthy.url), provider('flood', endlessAfterText.url)],
        [
          model('duo', '[{ provider: endless, model: model-a }, { provider: healthy, model: model-b }]'),
          model('flooded', '[{ provider: flood, model: model-c }, { provider: healthy, model: model-b }]'),
          model('solo', '[{ provider: healthy, model: model-b }]'),
        ],
      )
      ;({ t, orgId, openai: client } = await startServedGateway(yaml, { UPSTREAM_KEY }, { credit: CREDIT }))
    })

    afterEach(async () => {
      await Promise.all([endless.close(), endlessAfterText.close(), healthy.close()])
      await t.close()
    })

    test('a stream line that never ends is cut past 16 MiB, before any output: the next backend serves, the first is charged nothing', async () => {
      healthy.enqueue({ kind: 'sse', body: wire.stream({ text: 'from the healthy backend', finish: 'stop', usage: { inputTokens: 5, outputTokens: 4 } }) })
      const stream = await client.chat.completions.create({ model: 'duo', messages: [{ role: 'user', content: 'hi' }], stream: true })
      let text = ''
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
      expect(text).toBe('from the healthy backend')
      // The endless upstream was cut once the line passed the cap, not left to fill the memory.
      await endless.whenCut
      expect(endless.sent()).toBeGreaterThan(16 * 1024 * 1024)
      // Plus what the server wrote into socket buffers before it saw the abort (varies with load).
      expect(endless.sent()).toBeLessThan(48 * 1024 * 1024)
      expect(t.deps.router.isCoolingDown({ provider: 'endless', model: 'model-a' })).toBe(true)
      // The input estimate and the 4 words sent, at 1 and 3 USD per million tokens.
      expect(await charged()).toBe(5n * 1000n + 4n * 3000n)
      await poll('the slot to be freed', 500, 5, () => (slotsInUse() === 0 ? true : undefined))
    }, 10_000)

    test('the same line after some output: an in-band provider_error after the text, the output sent charged, nothing tried elsewhere', async () => {
      const stream = await client.chat.completions.create({ model: 'flooded', messages: [{ role: 'user', content: 'hi' }], stream: true })
      let text = ''
      const failure = await (async () => {
        for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? ''
      })().catch(error => error)
      expect(text).toBe('words before the flood')
      expect(failure).toBeInstanceOf(OpenAI.APIError)
      expect(failure.error).toMatchObject({ code: 'provider_error', message: 'the upstream provider failed: server' })
      await endlessAfterText.whenCut
      expect(endlessAfterText.sent()).toBeLessThan(48 * 1024 * 1024)
      expect(healthy.requests).toHaveLength(0)
      // The input ('hi' estimated at 2 bytes ÷ 3 plus 4; Anthropic's message_start says 5 too) and the text sent (22 bytes ÷ 4), rounded up.
      expect(await charged()).toBe(5n * 1000n + 6n * 3000n)
      await poll('the slot to be freed', 500, 5, () => (slotsInUse() === 0 ? true : undefined))
    }, 10_000)

    test("a backend's 400 reaches the client with its message, never its page, its key or the operator's hosts", async () => {
      const internal = ['vllm-a.internal', 'gpu-node-3.cluster.local', '10.0.3.7', 'vllm-b:8000', '[fd00::17]', healthy.url.slice('http://'.length)]
      const message = `prompt too long: 9000 tokens > 8192 (via ${healthy.url}/v1/chat/completions, http://vllm-a.internal:8000/v1, 10.0.3.7, vllm-b:8000, [fd00::17]:8000 and gpu-node-3.cluster.local; key ${UPSTREAM_KEY})`
      const page = `<html><h1>400 Bad Request</h1><p>upstream vllm-b:8000 (10.0.3.7) refused; Authorization: Bearer ${UPSTREAM_KEY}</p></html>`
      healthy.enqueue({ kind: 'json', status: 400, body: wire.errorBody(400, message) }, { kind: 'text', status: 400, body: page })
      const ask = () => client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'hi' }] }).catch(error => error)

      const fromJson = await ask()
      expect(fromJson).toBeInstanceOf(OpenAI.BadRequestError)
      expect(fromJson.error).toMatchObject({ code: 'invalid_request' })
      expect(fromJson.message).toContain('prompt too long: 9000 tokens > 8192')
      const fromPage = await ask()
      expect(fromPage).toBeInstanceOf(OpenAI.BadRequestError)
      expect(fromPage.message).toBe('400 the upstream provider rejected the request (HTTP 400)')
      for (const shown of [fromJson.message, fromPage.message]) {
        for (const host of internal) expect(shown).not.toContain(host)
        expect(shown).not.toContain(UPSTREAM_KEY)
        expect(shown).not.toContain('<html>')
      }
      expect(await charged()).toBe(0n)
      expect(slotsInUse()).toBe(0)
    })

    if (type === 'openai-compatible') {
      test("a FastAPI validation error (vLLM's 422) is shown by place and message, without the input it echoes", async () => {
        const detail = [{ type: 'missing', loc: ['body', 'messages', 0, 'content'], msg: 'Field required', input: { role: 'user' }, url: 'https://errors.pydantic.dev/2.9/v/missing' }]
        healthy.enqueue({ kind: 'json', status: 422, body: { detail } })
        const error = await client.chat.completions.create({ model: 'solo', messages: [{ role: 'user', content: 'hi' }] }).catch(thrown => thrown)
        expect(error).toBeInstanceOf(OpenAI.BadRequestError)
        expect(error.message).toBe('400 the upstream provider rejected the request: body.messages.0.content: Field required')
      })
    }
  })
}
