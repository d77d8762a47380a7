/**
 * The benchmark's mock OpenAI-compatible upstream, run as its own process so its CPU time is
 * never counted against a target. `POST /v1/chat/completions` answers a chat.completion, or with
 * `stream: true` a stream of CHUNKS content chunks, a usage chunk and `[DONE]`.
 *
 * Pacing (env): FIRST_MS before the first byte, GAP_MS between stream chunks (0 = instant).
 * Prints `{"port": N}` once listening.
 */

import { mockBodies } from './mock-bodies'

const FIRST_MS = Number(process.env.FIRST_MS ?? 0)
const GAP_MS = Number(process.env.GAP_MS ?? 0)
const CHUNKS = Number(process.env.CHUNKS ?? 20)
const encoder = new TextEncoder()
const wait = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

const bodies = mockBodies(CHUNKS)
const completion = bodies.completion
const frames = bodies.frames.map(frame => encoder.encode(frame))
const whole = encoder.encode(bodies.frames.join(''))

const server = Bun.serve({
  port: Number(process.env.PORT ?? 0),
  hostname: '127.0.0.1',
  idleTimeout: 0,
  async fetch(request) {
    if (request.method !== 'POST') return new Response('not found', { status: 404 })
    const body = (await request.json()) as { stream?: boolean }
    if (!body.stream) {
      if (FIRST_MS > 0) await wait(FIRST_MS)
      return new Response(completion, { headers: { 'content-type': 'application/json' } })
    }
    const headers = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }
    if (FIRST_MS === 0 && GAP_MS === 0) return new Response(whole, { headers })
    const stream = new ReadableStream<Uint8Array>({
      type: 'direct',
      async pull(controller: ReadableStreamDirectController) {
        if (FIRST_MS > 0) await wait(FIRST_MS)
        for (let i = 0; i < frames.length; i++) {
          if (i > 0 && GAP_MS > 0) await wait(GAP_MS)
          controller.write(frames[i]!)
          await controller.flush()
        }
        controller.close()
      },
    } as never)
    return new Response(stream, { headers })
  },
})
console.log(JSON.stringify({ port: server.port }))
export {}
