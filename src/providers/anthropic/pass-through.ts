// Same-format pass-through for a Messages client on an Anthropic upstream (ARCHITECTURE.md §11,
// bench/README.md "Messages streams passed through"). The content deltas, which carry no id or
// model, go to the client as the upstream sent them; every other event (message_start with its
// id, model and usage, block starts and stops, message_delta, message_stop, errors, pings) goes
// through the translator as before, so the ids, the model, the usage and the terminal frames
// held for settlement are still the gateway's.
//
// A `content_block_delta` event is forwarded when its data is exactly what the messages stream
// encoder writes for the delta it stands for:
//   {"type":"content_block_delta","index":N,"delta":{"type":"text_delta","text":"…"}}
// (or thinking_delta with "thinking", input_json_delta with "partial_json"), with a non-empty
// literal written as JSON.stringify writes it, into the block open at N with the matching kind.
// A tool literal of JSON whitespace alone goes through the translator: whitespace is no input
// yet, and the translator adds the "{}" of a call that gets none at the block's end (a streamed
// no-argument call may send only " "; forwarded as input, it left the client nothing to parse).
// Anything else (other delta types, extra fields, other spacing, escapes JSON.stringify would not
// write, a delta for no open block) goes through the translator and is re-encoded. The client's
// bytes are the same either way (test/providers/anthropic-pass-through.test.ts).

import type { ChatEvent, PassThroughEvent } from '../../inference/canonical'
import { SseDecoder, type SseEvent } from '../../http/sse'
import { canonicalLiteralBytes } from '../../lib/json-literal'
import type { AnthropicStreamTranslator } from './from-upstream-stream'

type Frames = Extract<PassThroughEvent, { format: 'messages' }>

const DATA_HEAD = '{"type":"content_block_delta","index":'
const DATA_TAIL = '"}}'
/** A literal of JSON whitespace only, as JSON.stringify writes it (a space, or \n, \r, \t escaped). */
const BLANK = /^(?: |\\[nrt])+$/
/** A frame as the encoder writes it, up to the index: the only form a stream read whole forwards in place. */
const FRAME_HEAD = `event: content_block_delta\ndata: ${DATA_HEAD}`

/** The deltas forwarded: their JSON text between the index and the literal, and the kind of block they belong to. */
const SHAPES = [
  { head: ',"delta":{"type":"text_delta","text":"', kind: 'text' },
  { head: ',"delta":{"type":"thinking_delta","thinking":"', kind: 'reasoning' },
  { head: ',"delta":{"type":"input_json_delta","partial_json":"', kind: 'tool' },
] as const

interface Delta {
  readonly index: number
  readonly block: number
  readonly kind: Frames['kind']
  readonly bytes: number
}

/**
 * Wraps the provider's translator for a Messages client: `events` for the SSE events of a
 * network read, `whole` for a stream read whole. Forwarded deltas become `passthrough` events,
 * one per run of deltas into the same block within a read.
 */
export class MessagesPassThrough {
  private current: Frames | undefined

  constructor(private readonly translator: AnthropicStreamTranslator) {}

  /** Decoded SSE events, up to the terminal one. */
  events(sse: SseEvent[], out: ChatEvent[]): void {
    for (const event of sse) {
      if (this.translator.done) return
      const data = event.data
      const delta = this.delta(data, 0, data.length)
      if (delta !== undefined) {
        // The frame the encoder would write, whatever the upstream's event line was.
        this.forward(delta, out).frames += `event: content_block_delta\ndata: ${data}\n\n`
        continue
      }
      for (const translated of this.translator.push(event)) out.push(translated)
    }
  }

  /**
   * A stream read whole, up to its terminal event. A frame written as the encoder writes it is
   * forwarded in place: consecutive ones as one slice of the text. Any other frame goes through
   * the SSE decoder (fed the text cut after blank lines, where its state is empty) and `events`.
   */
  whole(text: string, out: ChatEvent[]): void {
    let decoder: SseDecoder | undefined
    const sse: SseEvent[] = []
    // The slice text[start, end) not yet appended to `owner`'s frames.
    let owner: Frames | undefined
    let start = 0
    let end = 0
    const flush = () => {
      if (owner !== undefined) owner.frames += text.slice(start, end)
      owner = undefined
    }
    for (let at = 0; at < text.length && !this.translator.done; ) {
      const blank = text.indexOf('\n\n', at)
      const next = blank === -1 ? text.length : blank + 2
      if (blank !== -1 && text.startsWith(FRAME_HEAD, at)) {
        const delta = this.delta(text, at + FRAME_HEAD.length - DATA_HEAD.length, blank)
        if (delta !== undefined) {
          const event = this.forward(delta, out)
          if (event === owner && end === at) end = next
          else {
            flush()
            owner = event
            start = at
            end = next
          }
          at = next
          continue
        }
      }
      flush()
      ;(decoder ??= new SseDecoder()).pushText(at === 0 && next === text.length ? text : text.slice(at, next), sse)
      this.events(sse, out)
      sse.length = 0
      at = next
    }
    flush()
  }

  /** The delta whose event data is text[start, end), if it is forwarded as it is. */
  private delta(text: string, start: number, end: number): Delta | undefined {
    if (!text.startsWith(DATA_HEAD, start) || !text.startsWith(DATA_TAIL, end - DATA_TAIL.length)) return undefined
    // The index: digits without a leading zero (JSON's), as the encoder writes a number.
    let at = start + DATA_HEAD.length
    let index = 0
    for (; at < end; at += 1) {
      const digit = text.charCodeAt(at) - 48
      if (digit < 0 || digit > 9) break
      if (at > start + DATA_HEAD.length && index === 0) return undefined
      index = index * 10 + digit
    }
    if (at === start + DATA_HEAD.length || index > 1_000_000) return undefined
    const literalEnd = end - DATA_TAIL.length
    for (const shape of SHAPES) {
      if (!text.startsWith(shape.head, at)) continue
      const literalStart = at + shape.head.length
      // An empty delta writes nothing (the translator drops it).
      if (literalEnd <= literalStart) return undefined
      const open = this.translator.openBlock(index)
      if (open === undefined || open.kind !== shape.kind) return undefined
      const literal = text.slice(literalStart, literalEnd)
      if (shape.kind === 'tool' && BLANK.test(literal)) return undefined
      const bytes = canonicalLiteralBytes(literal)
      return bytes === undefined ? undefined : { index, block: open.block, kind: shape.kind, bytes }
    }
    return undefined
  }

  /** The passthrough event `delta` joins (the last one in `out`, if into the same block), counted. */
  private forward(delta: Delta, out: ChatEvent[]): Frames {
    let event = this.current
    if (event === undefined || out[out.length - 1] !== event || event.index !== delta.index || event.kind !== delta.kind) {
      event = { type: 'passthrough', format: 'messages', kind: delta.kind, block: delta.block, index: delta.index, frames: '', count: 0, textBytes: 0, reasoningBytes: 0, toolBytes: 0 }
      out.push(event)
      this.current = event
    }
    event.count += 1
    if (delta.kind === 'text') event.textBytes += delta.bytes
    else if (delta.kind === 'reasoning') event.reasoningBytes += delta.bytes
    else {
      event.toolBytes += delta.bytes
      this.translator.inputForwarded(delta.index)
    }
    return event
  }
}
