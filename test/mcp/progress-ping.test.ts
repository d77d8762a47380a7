import { afterEach, expect, spyOn, test } from 'bun:test'
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js'
import { loadConfig } from '../../src/config/load'
import { keepAlive } from '../../src/http/keep-alive'
import { buildTestApp, type TestApp } from '../support/harness'
import { connectMcp } from '../support/mcp'
import { codeFlowTokens } from '../support/oauth'
import { poll } from '../support/poll'

// A tools/call answered as SSE (the client sent a progressToken) may stay quiet for a long time:
// a model thinking, a slow upstream. Like every other stream it gets the `: ping` comment after
// the keep-alive ticker's quiet ticks, so a proxy's read timeout does not cut it; MCP clients
// skip SSE comments. The ticker is driven by hand (no waiting on the clock).

const encoder = new TextEncoder()
const chunk = (delta: Record<string, unknown>, finish: string | null = null, usage?: object) =>
  encoder.encode(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }], ...(usage ? { usage } : {}) })}\n\n`)

/** An upstream that streams "Hi", then stays quiet until `release()`, then finishes with " there". */
function quietUpstream() {
  const waiting: Array<() => void> = []
  let released = false
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      await request.text()
      const body = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(chunk({ role: 'assistant', content: 'Hi' }))
          if (!released) await new Promise<void>(resolve => waiting.push(resolve))
          controller.enqueue(chunk({ content: ' there' }))
          controller.enqueue(chunk({}, 'stop', { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }))
          controller.enqueue(encoder.encode('data: [DONE]\n\n'))
          controller.close()
        },
      })
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return {
    server,
    release() {
      released = true
      for (const wake of waiting.splice(0)) wake()
    },
  }
}

let cleanup: Array<() => unknown> = []
afterEach(async () => {
  for (const step of cleanup.reverse()) await step()
  cleanup = []
})

async function gateway() {
  const upstream = quietUpstream()
  cleanup.push(() => upstream.server.stop(true))
  const yaml = [
    'providers:',
    `  - { id: up, type: openai-compatible, base_url: "http://127.0.0.1:${upstream.server.port}/v1", api_key_env: UP_KEY, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 60000 }`,
    'models:',
    '  - { id: m, backends: [{ provider: up, model: m }], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 100000, max_output_tokens: 1000 }',
    'plans: { payg: { monthly_allowance: "0", fusion: false } }',
  ].join('\n')
  const env = { SVC_CONFIG: '/virtual/gateway.yaml', UP_KEY: 'k' }
  const t: TestApp = await buildTestApp(env, loadConfig(env, () => yaml))
  cleanup.push(() => t.close())
  const org = await t.createOrg('acme', 1_000_000_000n)
  const base = t.listen()
  const token = (await codeFlowTokens(t, org.adminKey)).access_token
  return { upstream, base, token, t }
}

const CALL = { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'svc.chat', arguments: { model: 'm', prompt: 'hi' }, _meta: { progressToken: 'p' } } }

/** The progress-streamed call over HTTP; `readUntil` reads the stream until its text holds `what`, `received()` is the text so far. */
async function callWithProgress(base: string, token: string) {
  const response = await fetch(`${base}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-11-25', 'content-type': 'application/json' },
    body: JSON.stringify(CALL),
  })
  const reader = response.body!.getReader()
  const decoder = new TextDecoder()
  let text = ''
  const readUntil = async (what: string) => {
    while (!text.includes(what)) {
      const { done, value } = await reader.read()
      if (done) throw new Error(`the stream ended before ${JSON.stringify(what)}:\n${text}`)
      text += decoder.decode(value, { stream: true })
    }
  }
  return { response, readUntil, received: () => text }
}

test('a quiet svc.chat with progress is pinged with an SSE comment between its messages, then answers', async () => {
  const { upstream, base, token, t } = await gateway()
  const { response, readUntil, received } = await callWithProgress(base, token)
  expect(response.headers.get('content-type')).toContain('text/event-stream')
  await readUntil('notifications/progress')
  expect(received()).not.toContain(': ping')
  // One open stream: the MCP response, not also the tool's chat read inside it.
  expect(t.deps.metrics.openStreams).toBe(1)
  // The ticker's quiet ticks: the first clears the mark the notification left, three more ping.
  for (let tick = 0; tick < 4; tick++) keepAlive.tick()
  await readUntil(': ping')
  // Between whole SSE messages, never inside one.
  expect(received()).toMatch(/\n\n: ping\n\n$/)
  upstream.release()
  await readUntil('"result"')
  const answer = received().split('\n').find(line => line.startsWith('data: ') && line.includes('"result"'))!
  expect(JSON.parse(answer.slice(6)).result.content[0].text).toBe('Hi there')
  await poll('the stream to be counted out', 200, 10, () => (t.deps.metrics.openStreams === 0 ? true : undefined))
})

test("the official SDK client reads through the ping: its progress and the tool's result are unchanged", async () => {
  const { upstream, base, token } = await gateway()
  const client = await connectMcp(base, token)
  cleanup.push(() => client.close())
  const progress: string[] = []
  const result = client.callTool({ name: 'svc.chat', arguments: { model: 'm', prompt: 'hi' } }, CallToolResultSchema, {
    onprogress: update => void progress.push(update.message ?? ''),
  })
  await poll('the first progress notification', 500, 10, () => (progress.length > 0 ? true : undefined))
  for (let tick = 0; tick < 4; tick++) keepAlive.tick()
  upstream.release()
  const answer = await result
  expect((answer.content as Array<{ text: string }>)[0]!.text).toBe('Hi there')
  expect(progress.join('')).toBe('Hi there')
})

/**
 * A hand-driven clock for the intervals armed from now on (the SDK's transport arms its own
 * keep-alive with setInterval, and takes no clock): each still runs on the real clock (all are
 * longer than a test), and `advance` fires each as often as it would in that much time.
 */
function intervalsByHand() {
  const armed: Array<{ callback: () => void; ms: number }> = []
  const real = globalThis.setInterval
  const spy = spyOn(globalThis, 'setInterval').mockImplementation(((callback: () => void, ms: number) => {
    armed.push({ callback, ms })
    return real(callback, ms)
  }) as typeof setInterval)
  cleanup.push(() => spy.mockRestore())
  return {
    advance(ms: number) {
      for (const interval of armed) for (let fired = 0; fired < Math.floor(ms / interval.ms); fired++) interval.callback()
    },
  }
}

test("the gateway's ping is the stream's only keep-alive: the SDK transport's own `: keepalive` is off", async () => {
  const { upstream, base, token } = await gateway()
  // Before: the SDK wrote `: keepalive` every 15 s, which the flow passed on as a message read:
  // the stream marked written (so the gateway's own ping never came), one more notification
  // counted as read (so more than MAX_UNREAD_FRAMES could go unread), and README said `: ping`.
  const clock = intervalsByHand()
  const { readUntil, received } = await callWithProgress(base, token)
  await readUntil('notifications/progress')
  // 20 s of quiet. The shared ticker's timer may predate the spy: its quiet ticks by hand too.
  clock.advance(20_000)
  for (let tick = 0; tick < 4; tick++) keepAlive.tick()
  await readUntil(': ping')
  upstream.release()
  await readUntil('"result"')
  expect(received()).toMatch(/\n\n: ping\n\n/)
  expect(received()).not.toContain(': keepalive')
})
