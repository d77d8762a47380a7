/**
 * The benchmark's mock upstream, run as its own process so its CPU time is never counted against
 * a target. `POST /v1/chat/completions` answers a chat.completion, or with `stream: true` a stream
 * of CHUNKS content chunks, a usage chunk and `[DONE]`. `POST /v1/messages` answers the same turn
 * as Anthropic's Messages API does (one message, or with `stream: true` its event stream).
 *
 * Pacing (env): FIRST_MS before the first byte, GAP_MS between stream chunks (0 = instant).
 * Prints `{"port": N}` once listening.
 */

import { anthropicFrames, anthropicMessage, mockBodies } from './mock-bodies'

const FIRST_MS = Number(process.env.FIRST_MS ?? 0)
const GAP_MS = Number(process.env.GAP_MS ?? 0)
const CHUNKS = Number(process.env.CHUNKS ?? 20)
const encoder = new TextEncoder()
const wait = (ms: number) => new Promise<void>(resolve => setTimeout(resolve, ms))

/** One API's answers: the JSON one, the stream's frames, and the stream as one body (instant). */
function answers(json: string, frames: string[]) {
  return { json, frames: frames.map(frame => encoder.encode(frame)), whole: encoder.encode(frames.join('')) }
}
const bodies = mockBodies(CHUNKS)
const chat = answers(bodies.completion, bodies.frames)
const messages = answers(anthropicMessage(CHUNKS), anthropicFrames(CHUNKS))

const server = Bun.serve({
  port: Number(process.env.PORT ?? 0),
  hostname: '127.0.0.1',
  idleTimeout: 0,
  async fetch(request) {
    if (request.method !== 'POST') return new Response('not found', { status: 404 })
    const body = (await request.json()) as { stream?: boolean }
    const api = request.url.endsWith('/messages') ? messages : chat
    if (!body.stream) {
      if (FIRST_MS > 0) await wait(FIRST_MS)
      return new Response(api.json, { headers: { 'content-type': 'application/json' } })
    }
    const headers = { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }
    if (FIRST_MS === 0 && GAP_MS === 0) return new Response(api.whole, { headers })
    const stream = new ReadableStream<Uint8Array>({
      type: 'direct',
      async pull(controller: ReadableStreamDirectController) {
        if (FIRST_MS > 0) await wait(FIRST_MS)
        for (let i = 0; i < api.frames.length; i++) {
          if (i > 0 && GAP_MS > 0) await wait(GAP_MS)
          controller.write(api.frames[i]!)
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
