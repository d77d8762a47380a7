import { describe, expect, test } from 'bun:test'
import { decodeSse, MAX_SSE_EVENT_CHARS, SseDecoder, SseEventTooLargeError, sseFrame, type SseEvent } from '../../src/http/sse'

async function decodeChunks(chunks: Array<string | Uint8Array>): Promise<SseEvent[]> {
  const encoder = new TextEncoder()
  async function* source() {
    for (const chunk of chunks) yield typeof chunk === 'string' ? encoder.encode(chunk) : chunk
  }
  const events: SseEvent[] = []
  for await (const event of decodeSse(source())) events.push(event)
  return events
}

/** Every way of cutting `text` into two chunks decodes to the same events. */
async function everySplit(text: string): Promise<SseEvent[][]> {
  const bytes = new TextEncoder().encode(text)
  const results: SseEvent[][] = []
  for (let cut = 0; cut <= bytes.length; cut += 1) results.push(await decodeChunks([bytes.slice(0, cut), bytes.slice(cut)]))
  return results
}

describe('decodeSse', () => {
  test('events, names, multi-line data, comments, ids', async () => {
    const events = await decodeChunks([': ping\n\nevent: message_start\ndata: {"a":1}\n\ndata: line1\ndata: line2\nid: 7\n\ndata: [DONE]\n\n'])
    expect(events).toEqual([
      { event: 'message_start', data: '{"a":1}' },
      { event: undefined, data: 'line1\nline2', id: '7' },
      { event: undefined, data: '[DONE]', id: '7' },
    ])
  })

  test('CRLF, CR and LF line endings, split at every byte, including inside UTF-8 and between CR and LF', async () => {
    const text = 'event: x\r\ndata: héllo 🌍\r\n\r\ndata: b\rdata: c\r\r\ndata: d\n\n'
    const expected = [
      { event: 'x', data: 'héllo 🌍' },
      { event: undefined, data: 'b\nc' },
      { event: undefined, data: 'd' },
    ]
    for (const events of await everySplit(text)) expect(events).toEqual(expected)
  })

  test('one byte at a time', async () => {
    const bytes = new TextEncoder().encode('data: {"x":"ü"}\n\n')
    expect(await decodeChunks([...bytes].map(byte => new Uint8Array([byte])))).toEqual([{ event: undefined, data: '{"x":"ü"}' }])
  })

  test('a field without a colon, a value without a space, and a trailing event without a blank line', async () => {
    expect(await decodeChunks(['data\n\ndata:x\n\ndata: tail'])).toEqual([
      { event: undefined, data: '' },
      { event: undefined, data: 'x' },
    ])
  })

  test('event names: without a space, empty, only the first space dropped, a longer field name, the name reset after each event', async () => {
    const text = 'event:a\ndata: 1\n\nevent:\ndata: 2\n\nevent:  b\ndata: 3\n\nevents: c\ndata: 4\n\nevent\ndata: 5\n\ndata: 6\n\n'
    const expected = [
      { event: 'a', data: '1' },
      { event: '', data: '2' },
      { event: ' b', data: '3' },
      { event: undefined, data: '4' },
      { event: '', data: '5' },
      { event: undefined, data: '6' },
    ]
    for (const events of await everySplit(text)) expect(events).toEqual(expected)
  })
})

describe('SseDecoder: an event past MAX_SSE_EVENT_CHARS', () => {
  const piece = new TextEncoder().encode('x'.repeat(64 * 1024))
  const pieces = MAX_SSE_EVENT_CHARS / piece.length

  test('one line that never ends throws once it passes the cap', () => {
    const decoder = new SseDecoder()
    const out: SseEvent[] = []
    decoder.push(new TextEncoder().encode('data: '), out)
    for (let index = 0; index < pieces - 1; index += 1) decoder.push(piece, out)
    expect(() => decoder.push(piece, out)).toThrow(SseEventTooLargeError)
    expect(out).toEqual([])
  })

  test('data lines without the blank line that ends their event count together', () => {
    const decoder = new SseDecoder()
    const out: SseEvent[] = []
    // Each line holds 64 KiB of data.
    const line = new TextEncoder().encode(`data: ${'y'.repeat(64 * 1024)}\n`)
    for (let index = 0; index < pieces; index += 1) decoder.push(line, out)
    expect(() => decoder.push(line, out)).toThrow(SseEventTooLargeError)
    expect(out).toEqual([])
  })

  test('events under the cap, one after another, never add up', () => {
    const decoder = new SseDecoder()
    const out: SseEvent[] = []
    const event = new TextEncoder().encode(`data: ${'z'.repeat(1024 * 1024)}\n\n`)
    for (let index = 0; index < 40; index += 1) decoder.push(event, out)
    expect(out).toHaveLength(40)
    expect(out[39]!.data).toHaveLength(1024 * 1024)
  })
})

describe('sseFrame', () => {
  test('frames data and names events', () => {
    const text = (bytes: Uint8Array) => new TextDecoder().decode(bytes)
    expect(text(sseFrame('{"a":1}'))).toBe('data: {"a":1}\n\n')
    expect(text(sseFrame('{}', 'message_stop'))).toBe('event: message_stop\ndata: {}\n\n')
    expect(text(sseFrame('a\nb'))).toBe('data: a\ndata: b\n\n')
  })
})
