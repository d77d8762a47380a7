// µs per upstream frame of a Chat Completions stream from an openai-compatible upstream, in
// process: SSE decode → (ChunkTranslator → canonical events | PassThroughTranslator → passthrough
// events) → chat-completions encoder → one TextEncoder.encode per event, as stream-response.ts
// writes them. No HTTP, no ledger: only the per-frame work the pass-through removes.
//
//   bun bench/http/stream-frames.ts [--chunks 20] [--streams 20000] [--pieces 1]
//
// --pieces N cuts each stream into N network reads (1: the instant mock's single read).

import { SseDecoder, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { ChunkTranslator } from '../../src/providers/openai-compatible/from-upstream-stream'
import { PassThroughTranslator } from '../../src/providers/openai-compatible/pass-through'

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? fallback : Number(process.argv[at + 1])
}
const CHUNKS = arg('chunks', 20)
const STREAMS = arg('streams', 20_000)
const PIECES = arg('pieces', 1)

// The same stream as bench/http/mock-upstream.ts.
const head = { id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'bench-upstream' }
const chunk = (delta: object, finish: string | null = null) => `data: ${JSON.stringify({ ...head, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`
const usage = { prompt_tokens: 12, completion_tokens: CHUNKS, total_tokens: 12 + CHUNKS }
const sse = [
  chunk({ role: 'assistant', content: '' }),
  ...Array.from({ length: CHUNKS }, (_, i) => chunk({ content: i === 0 ? 'word' : ' word' })),
  chunk({}, 'stop'),
  `data: ${JSON.stringify({ ...head, choices: [], usage })}\n\n`,
  'data: [DONE]\n\n',
].join('')
const bytes = new TextEncoder().encode(sse)
const size = Math.ceil(bytes.length / PIECES)
const pieces = Array.from({ length: PIECES }, (_, i) => bytes.subarray(i * size, (i + 1) * size))
const context = { provider: 'openai-compatible:bench', model: 'bench-upstream', requestId: 'req' }
const text = new TextEncoder()

function stream(passThrough: boolean): number {
  const translator = passThrough ? new PassThroughTranslator(context) : new ChunkTranslator(context)
  const encoder = new ChatCompletionsStreamEncoder({ id: 'chatcmpl-gw', model: 'client-model', createdAt: 1_800_000_000, includeUsage: false, estimatedInputTokens: 0 })
  const decoder = new SseDecoder()
  const events: SseEvent[] = []
  const out: ChatEvent[] = []
  let written = 0
  const write = (frames: string[]) => {
    if (frames.length > 0) written += text.encode(frames.length === 1 ? frames[0]! : frames.join('')).length
  }
  write(encoder.start())
  for (const piece of pieces) {
    decoder.push(piece, events)
    for (const event of events) translator.event(event, out)
    events.length = 0
    for (const event of out) {
      if (event.type === 'finish') write(encoder.finish(event.reason, event.usage))
      else if (event.type !== 'error') write(encoder.push(event))
    }
    out.length = 0
  }
  return written
}

function measure(passThrough: boolean): number {
  const started = performance.now()
  for (let i = 0; i < STREAMS; i++) stream(passThrough)
  return ((performance.now() - started) * 1000) / STREAMS
}

if (stream(true) !== stream(false)) throw new Error('the two paths wrote different byte counts')
for (let i = 0; i < 5_000; i++) stream(false), stream(true) // warm the JIT
const frames = CHUNKS + 4
const median = (values: number[]) => values.sort((a, b) => a - b)[values.length >> 1]!
const reEncoded: number[] = []
const passed: number[] = []
for (let round = 0; round < 7; round++) {
  // Alternate, so the machine's load falls on both alike.
  reEncoded.push(measure(false))
  passed.push(measure(true))
}
const a = median(reEncoded)
const b = median(passed)
console.log(`${CHUNKS} content chunks, ${PIECES} network read(s) per stream, median of 7 rounds × ${STREAMS} streams`)
console.log(`re-encode:    ${a.toFixed(1)} µs/stream, ${(a / frames).toFixed(2)} µs/frame`)
console.log(`pass-through: ${b.toFixed(1)} µs/stream, ${(b / frames).toFixed(2)} µs/frame (${((b / a - 1) * 100).toFixed(0)}%)`)
