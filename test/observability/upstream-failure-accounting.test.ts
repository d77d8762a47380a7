import { afterAll, beforeAll, describe, expect, test } from 'bun:test'
import { Lifecycle } from '../../src/observability/lifecycle'
import { createLogger } from '../../src/observability/logger'
import { paygConfig, startServedGateway, upstreamProvider, type ServedGateway } from '../support/gateway'
import { poll } from '../support/poll'

// What the metrics and the request's log line say when backends fail (README, "Metrics and
// logs"), over real sockets, for the cases a QA pass found miscounted: every backend tried is
// counted, in its phase, under the provider that was called; the log line names the backend the
// outcome is about; a refusal of the request itself, or a cut by the drain's deadline, is not
// logged as the upstream's failure.

type Mode = 'ok' | '500' | 'fails-before-output' | 'slow'
const encoder = new TextEncoder()
const sse = (chunks: object[]) => chunks.map(chunk => `data: ${JSON.stringify(chunk)}\n\n`).join('')
const head = { id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm' }

/** A live stream: no declared length, one chunk per frame (a stream of declared length is read whole, and fails at its opening). */
function live(frames: string[]): Response {
  const body = new ReadableStream<Uint8Array>({
    async pull(controller) {
      const frame = frames.shift()
      if (frame === undefined) return controller.close()
      controller.enqueue(encoder.encode(frame))
      await Bun.sleep(1)
    },
  })
  return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
}

/** An OpenAI-compatible upstream whose behaviour is chosen by the upstream model name. */
function upstream(name: string) {
  return Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      const body = (await request.json()) as { model: string; stream?: boolean }
      const mode = body.model as Mode
      if (mode === '500') return new Response('{"error":{"message":"boom"}}', { status: 500, headers: { 'content-type': 'application/json' } })
      if (mode === 'slow') await Bun.sleep(3000)
      if (mode === 'fails-before-output') {
        return live([sse([{ ...head, choices: [{ index: 0, delta: { role: 'assistant' }, finish_reason: null }] }]), sse([{ error: { message: 'overloaded', type: 'server_error' } }])])
      }
      const usage = { prompt_tokens: 3, completion_tokens: 2, total_tokens: 5 }
      if (body.stream !== true) {
        return Response.json({ ...head, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: `from ${name}` }, finish_reason: 'stop' }], usage })
      }
      return live([
        sse([{ ...head, choices: [{ index: 0, delta: { role: 'assistant', content: `from ${name}` }, finish_reason: null }] }]),
        sse([{ ...head, choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], usage }]),
        'data: [DONE]\n\n',
      ])
    },
  })
}

let a: ReturnType<typeof upstream>
let b: ReturnType<typeof upstream>
let g: ServedGateway
const lines: Array<Record<string, unknown>> = []

beforeAll(async () => {
  a = upstream('a')
  b = upstream('b')
  const model = (id: string, backends: string, extra = '') =>
    `  - { id: ${id}, backends: [${backends}], price: { input_per_mtok: "1", output_per_mtok: "1" }, context_length: 8192, max_output_tokens: 256${extra} }`
  const yaml = paygConfig(
    [upstreamProvider('a', 'openai-compatible', `http://127.0.0.1:${a.port}/v1`, 'UP_KEY'), upstreamProvider('b', 'openai-compatible', `http://127.0.0.1:${b.port}/v1`, 'UP_KEY')],
    [
      model('both-500', '{ provider: a, model: "500" }, { provider: b, model: "500" }'),
      model('then-500', '{ provider: a, model: fails-before-output }, { provider: b, model: "500" }'),
      model('then-ok', '{ provider: a, model: fails-before-output }, { provider: b, model: ok }'),
      model('censored', '{ provider: a, model: ok }'),
      model('slow', '{ provider: a, model: slow }'),
    ],
  )
  g = await startServedGateway(yaml, { UP_KEY: 'sk-up-0123456789' }, { overrides: { logger: createLogger('info', line => lines.push(JSON.parse(line))) } })
})
afterAll(async () => {
  await g.close()
  a.stop(true)
  b.stop(true)
})

async function chat(model: string, stream: boolean, requestId: string, extra: object = {}) {
  // Past every cool-down: each request tries its backends in their configured order.
  g.t.clock.advance(31_000)
  const response = await fetch(`${g.baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${g.key}`, 'content-type': 'application/json', 'x-request-id': requestId },
    body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'hi' }], ...extra }),
  })
  return { status: response.status, text: await response.text() }
}

const line = (requestId: string) => poll(`the log line of ${requestId}`, 200, 10, () => lines.find(entry => entry.msg === 'request' && entry.request_id === requestId))

/** A counter's value in /metrics (0 when absent). */
function counter(series: string): number {
  const found = g.t.deps.metrics.registry.render().split('\n').find(entry => entry.startsWith(`${series} `))
  return found === undefined ? 0 : Number(found.slice(series.length + 1))
}

const requests = (provider: string, outcome: string) => counter(`svc_upstream_requests_total{provider="openai-compatible:${provider}",outcome="${outcome}"}`)
const errors = (provider: string, phase: string) => counter(`svc_upstream_errors_total{provider="openai-compatible:${provider}",kind="server",phase="${phase}"}`)

describe('upstream failures are counted and logged as what they were', () => {
  test('every backend that failed to open is counted, not only the last; the line names the last', async () => {
    const before = { a: requests('a', 'server'), b: requests('b', 'server'), aErrors: errors('a', 'before-first-event') }
    for (const stream of [false, true]) {
      const id = `req_both_500_${stream}`
      expect((await chat('both-500', stream, id)).status).toBe(502)
      expect(await line(id)).toMatchObject({ outcome: 'upstream-error', backend: 'openai-compatible:b/500' })
    }
    expect(requests('a', 'server') - before.a).toBe(2)
    expect(requests('b', 'server') - before.b).toBe(2)
    expect(errors('a', 'before-first-event') - before.aErrors).toBe(2)
  })

  test('a stream that failed before its output, then a next backend that failed to open: each in its phase, none mid-stream', async () => {
    const before = { aOutput: errors('a', 'before-output'), bOpen: requests('b', 'server'), aMid: errors('a', 'mid-stream'), bMid: errors('b', 'mid-stream') }
    const id = 'req_then_500'
    const { status, text } = await chat('then-500', true, id)
    // The reply had started (the role frame): the failure is in-band.
    expect(status).toBe(200)
    expect(text).toContain('"error"')
    expect(await line(id)).toMatchObject({ backend: 'openai-compatible:b/500', charged_nanos: '0' })
    expect(errors('a', 'before-output') - before.aOutput).toBe(1)
    expect(requests('b', 'server') - before.bOpen).toBe(1)
    expect(errors('a', 'mid-stream') - before.aMid).toBe(0)
    expect(errors('b', 'mid-stream') - before.bMid).toBe(0)
  })

  test('the fallback that opened is counted as before, and the line names the backend that answered', async () => {
    const before = { aOutput: errors('a', 'before-output'), bOk: requests('b', 'ok') }
    const id = 'req_then_ok'
    const { status, text } = await chat('then-ok', true, id)
    expect(status).toBe(200)
    expect(text).toContain('from b')
    expect(await line(id)).toMatchObject({ outcome: 'finished', backend: 'openai-compatible:b/ok' })
    expect(errors('a', 'before-output') - before.aOutput).toBe(1)
    expect(requests('b', 'ok') - before.bOk).toBe(1)
  })

  test('a request no backend may serve (no uncensored one) is logged as its refusal, not an upstream error', async () => {
    const id = 'req_uncensored'
    const { status } = await chat('censored', false, id, { uncensored: true })
    expect(status).toBe(400)
    expect(await line(id)).toMatchObject({ status: 400, outcome: 'invalid_request' })
  })

  test('a chat refused before its upstream is called still names its model and stream mode', async () => {
    const broke = await g.t.createOrg('broke', 0n)
    const id = 'req_no_funds'
    const response = await fetch(`${g.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${broke.adminKey}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'censored', stream: true, messages: [{ role: 'user', content: 'hi' }] }),
    })
    expect(response.status).toBe(429)
    expect(await line(id)).toMatchObject({ status: 429, outcome: 'insufficient_quota', model: 'censored', stream: true })
  })

  test('a call the client cancelled before the upstream answered is an upstream call `aborted`, not an error', async () => {
    const before = { aborted: requests('a', 'aborted'), errors: counter('svc_upstream_errors_total{provider="openai-compatible:a",kind="aborted",phase="before-first-event"}') }
    const id = 'req_client_left'
    const client = new AbortController()
    const answered = fetch(`${g.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      signal: client.signal,
      headers: { authorization: `Bearer ${g.key}`, 'content-type': 'application/json', 'x-request-id': id },
      body: JSON.stringify({ model: 'slow', messages: [{ role: 'user', content: 'hi' }] }),
    }).catch(() => undefined)
    const lifecycle = g.t.deps.lifecycle as Lifecycle
    await poll('the call in flight', 200, 10, () => (lifecycle.inFlight > 0 ? true : undefined))
    client.abort()
    await answered
    expect(await line(id)).toMatchObject({ outcome: 'cancelled' })
    await poll('the call counted', 200, 10, () => (requests('a', 'aborted') - before.aborted === 1 ? true : undefined))
    expect(counter('svc_upstream_errors_total{provider="openai-compatible:a",kind="aborted",phase="before-first-event"}')).toBe(before.errors)
  })

  test("a non-streamed call the drain's deadline cut is logged `aborted`, not as the upstream's failure", async () => {
    const id = 'req_drain_cut'
    const answered = chat('slow', false, id)
    const lifecycle = g.t.deps.lifecycle as Lifecycle
    await poll('the call in flight', 200, 10, () => (lifecycle.inFlight > 0 ? true : undefined))
    lifecycle.drain()
    lifecycle.abortAll()
    const before = requests('a', 'aborted')
    expect((await answered).status).toBe(503)
    expect(await line(id)).toMatchObject({ status: 503, outcome: 'aborted' })
    expect(requests('a', 'aborted') - before).toBe(1)
  })

})
