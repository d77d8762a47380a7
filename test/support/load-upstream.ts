// An OpenAI-compatible upstream for load and crash tests: every POST …/chat/completions streams
// a role chunk, `chunks` word deltas (a few milliseconds apart, so a kill can land anywhere),
// the finish chunk, a usage chunk and [DONE]. It records the X-Request-Id of every request it
// received, so tests can tell requests that reached the upstream from those that did not.

const encoder = new TextEncoder()

export interface LoadUpstream {
  readonly url: string
  /** X-Request-Id of every request received. */
  readonly received: Set<string>
  /** The usage every answer reports. */
  readonly usage: { inputTokens: number; outputTokens: number }
  close(): Promise<void>
}

export function startLoadUpstream(options: { chunks?: number; gapMs?: number } = {}): LoadUpstream {
  const chunks = options.chunks ?? 8
  const gapMs = options.gapMs ?? 3
  const received = new Set<string>()
  const usage = { inputTokens: 17, outputTokens: chunks }
  const frame = (value: unknown) => encoder.encode(`data: ${JSON.stringify(value)}\n\n`)
  const base = { id: 'chatcmpl-load', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'load-model' }
  const choice = (delta: object, finish: string | null = null) => ({ ...base, choices: [{ index: 0, delta, finish_reason: finish }] })
  const server = Bun.serve({
    port: 0,
    hostname: '127.0.0.1',
    async fetch(request) {
      received.add(request.headers.get('x-request-id') ?? '')
      await request.text()
      let sent = 0
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          if (sent === 0) controller.enqueue(frame(choice({ role: 'assistant', content: '' })))
          if (sent < chunks) {
            await Bun.sleep(Math.random() * gapMs)
            controller.enqueue(frame(choice({ content: `word${sent} ` })))
            sent += 1
            return
          }
          controller.enqueue(frame(choice({}, 'stop')))
          controller.enqueue(frame({ ...base, choices: [], usage: { prompt_tokens: usage.inputTokens, completion_tokens: usage.outputTokens, total_tokens: usage.inputTokens + usage.outputTokens } }))
          controller.enqueue(encoder.encode('data: [DONE]\n\n'))
          controller.close()
        },
      })
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } })
    },
  })
  return { url: `http://127.0.0.1:${server.port}`, received, usage, close: () => server.stop(true) }
}
