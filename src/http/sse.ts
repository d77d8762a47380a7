/**
 * Server-sent events: a byte-level decoder for upstream streams and a frame encoder for
 * clients. The decoder knows nothing about JSON shapes (ARCHITECTURE.md §1.3).
 */

/** One decoded event: `event` is undefined when the stream gave none (the default "message"). */
export interface SseEvent {
  event: string | undefined
  data: string
  id?: string
}

/**
 * Longest event the decoder holds (its unfinished line and data lines, in UTF-16 code units): the
 * size of the largest whole JSON answer a provider accepts (16 MiB). An upstream whose line never
 * ends would otherwise fill the memory while its bytes keep the idle deadline from firing.
 */
export const MAX_SSE_EVENT_CHARS = 16 * 1024 * 1024

/** An upstream event past MAX_SSE_EVENT_CHARS: the stream fails (before any output, the next backend is tried). */
export class SseEventTooLargeError extends Error {
  constructor() {
    super(`an SSE event longer than ${MAX_SSE_EVENT_CHARS} characters`)
  }
}

/**
 * Decodes an SSE byte stream per the WHATWG rules: lines end in CRLF, LF or CR, may be split
 * across chunks at any byte (including inside a multi-byte UTF-8 character or between CR and
 * LF); `data:` lines join with "\n"; comment lines (":") and unknown fields are ignored; an event
 * is dispatched at a blank line. A final event without its blank line is dropped, as browsers do.
 *
 * Synchronous, one network chunk at a time: a provider translates the events of a chunk in the
 * same turn. Passing every event through an async generator cost a promise and a microtask hop
 * per event and per layer (decodeSse, then the provider's translator, then its stream), most
 * of the decoder's ~7% of a chat request's CPU.
 */
export class SseDecoder {
  private readonly decoder = new TextDecoder('utf-8')
  private buffer = ''
  private event: string | undefined
  private data: string[] = []
  /** Characters held in `data` (see MAX_SSE_EVENT_CHARS). */
  private dataChars = 0
  private id: string | undefined
  private skipLeadingLf = false

  /** Appends the events completed by `chunk` to `out`. */
  push(chunk: Uint8Array, out: SseEvent[]): void {
    this.pushText(this.decoder.decode(chunk, { stream: true }), out)
  }

  /** As `push`, for text already decoded (a body read whole). */
  pushText(text: string, out: SseEvent[]): void {
    // The held rest of a line has no line end: a chunk without one only extends it. Searched
    // again from its start, a line arriving in n chunks cost O(n²) (seconds for a few MiB).
    if (this.buffer !== '' && text.indexOf('\n') === -1 && text.indexOf('\r') === -1) {
      this.buffer += text
      if (this.buffer.length + this.dataChars > MAX_SSE_EVENT_CHARS) throw new SseEventTooLargeError()
      return
    }
    const buffer = this.buffer + text
    // Lines are found with indexOf (native) rather than a per-character loop: this decoder runs
    // on every upstream frame. Most streams never send a CR, so its search ends at once for them.
    let cr = buffer.indexOf('\r')
    let start = 0
    while (start < buffer.length) {
      if (this.skipLeadingLf) {
        // The LF of a CRLF whose CR ended the previous chunk.
        this.skipLeadingLf = false
        if (buffer.charCodeAt(start) === 10) {
          start += 1
          continue
        }
      }
      if (cr !== -1 && cr < start) cr = buffer.indexOf('\r', start)
      const lf = buffer.indexOf('\n', start)
      const lineStart = start
      let lineEnd: number
      if (cr !== -1 && (lf === -1 || cr < lf)) {
        lineEnd = cr
        if (cr + 1 === buffer.length) {
          this.skipLeadingLf = true
          start = cr + 1
        } else {
          start = buffer.charCodeAt(cr + 1) === 10 ? cr + 2 : cr + 1
        }
      } else if (lf !== -1) {
        lineEnd = lf
        start = lf + 1
      } else {
        break
      }
      if (lineStart === lineEnd) {
        const data = this.data
        if (data.length > 0) {
          const joined = data.length === 1 ? data[0]! : data.join('\n')
          out.push(this.id !== undefined ? { event: this.event, data: joined, id: this.id } : { event: this.event, data: joined })
        }
        this.event = undefined
        if (data.length > 0) {
          this.data = []
          this.dataChars = 0
        }
        continue
      }
      if (buffer.charCodeAt(lineStart) === 58) continue // ":" comment (keep-alives)
      // The common lines, `data: …` and `event: …`, are recognised without slicing the field name.
      if (buffer.startsWith('data:', lineStart)) {
        const value = buffer.slice(buffer.charCodeAt(lineStart + 5) === 32 ? lineStart + 6 : lineStart + 5, lineEnd)
        this.dataChars += value.length
        this.data.push(value)
        continue
      }
      if (buffer.startsWith('event:', lineStart)) {
        this.event = buffer.slice(buffer.charCodeAt(lineStart + 6) === 32 ? lineStart + 7 : lineStart + 6, lineEnd)
        continue
      }
      const line = buffer.slice(lineStart, lineEnd)
      const colon = line.indexOf(':')
      const field = colon === -1 ? line : line.slice(0, colon)
      let value = colon === -1 ? '' : line.slice(colon + 1)
      if (value.charCodeAt(0) === 32) value = value.slice(1)
      if (field === 'data') {
        this.dataChars += value.length
        this.data.push(value)
      } else if (field === 'event') this.event = value
      else if (field === 'id') this.id = value
    }
    this.buffer = start === buffer.length ? '' : buffer.slice(start)
    if (this.buffer.length + this.dataChars > MAX_SSE_EVENT_CHARS) throw new SseEventTooLargeError()
  }
}

/** The events of an SSE byte stream (see SseDecoder). */
export async function* decodeSse(body: AsyncIterable<Uint8Array> | ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new SseDecoder()
  const events: SseEvent[] = []
  for await (const chunk of body as AsyncIterable<Uint8Array>) {
    decoder.push(chunk, events)
    for (const event of events) yield event
    events.length = 0
  }
}

const encoder = new TextEncoder()

/** One SSE frame: optional event name, JSON-or-text data (multi-line data split per line). */
export function sseFrame(data: string, event?: string): Uint8Array {
  const lines = data.includes('\n') ? data.split('\n').map(line => `data: ${line}`).join('\n') : `data: ${data}`
  return encoder.encode(event === undefined ? `${lines}\n\n` : `event: ${event}\n${lines}\n\n`)
}

/** A keep-alive comment, sent on long gaps so proxies and clients do not time out. */
export const SSE_PING = encoder.encode(': ping\n\n')
