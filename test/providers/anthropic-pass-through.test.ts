import { describe, expect, test } from 'bun:test'
import { SseDecoder, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { MessagesStreamEncoder } from '../../src/inference/dialects/messages/encode-stream'
import { Meter } from '../../src/inference/meter'
import { toApiError } from '../../src/inference/upstream-errors'
import { canonicalLiteralBytes } from '../../src/lib/json-literal'
import { AnthropicStreamTranslator } from '../../src/providers/anthropic/from-upstream-stream'
import { MessagesPassThrough } from '../../src/providers/anthropic/pass-through'

// Same-format pass-through for Messages (src/providers/anthropic/pass-through.ts): for any
// upstream stream, what a Messages client receives and what the meter counts must be exactly what
// the re-encoding path (translator → canonical events → encoder) gives. Each stream is fed in one
// push, cut into small network pieces, and read whole as a declared-length body is.

const NOW = Date.UTC(2026, 0, 15, 12, 0, 0)
const CONTEXT = { provider: 'anthropic:claude', model: 'claude-sonnet-4-5-20250929' }
const fixture = (name: string) => Bun.file(new URL(`../fixtures/upstream/anthropic/${name}`, import.meta.url)).text()

/** One SSE event as Anthropic frames it: the event name repeats the data's `type`. */
const event = (data: { type: string } & Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
/** A delta frame written by hand: `delta` is the raw JSON text of the delta object. */
const rawDelta = (index: number, delta: string) => `event: content_block_delta\ndata: {"type":"content_block_delta","index":${index},"delta":${delta}}\n\n`
const text = (index: number, literal: string) => rawDelta(index, `{"type":"text_delta","text":"${literal}"}`)

const START = event({
  type: 'message_start',
  message: { id: 'msg_upstream1', type: 'message', role: 'assistant', model: 'claude-upstream', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 11, output_tokens: 1 } },
})
const blockStart = (index: number, block: Record<string, unknown>) => event({ type: 'content_block_start', index, content_block: block })
const blockStop = (index: number) => event({ type: 'content_block_stop', index })
const END = event({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 7 } }) + event({ type: 'message_stop' })
const textBlock = (index: number, ...pieces: string[]) =>
  blockStart(index, { type: 'text', text: '' }) + pieces.map(piece => event({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: piece } })).join('') + blockStop(index)

interface Run {
  client: string
  events: ChatEvent[]
  usage: ReturnType<Meter['usage']>
  produced: boolean
  parses: number
  /** The UTF-8 bytes of text, reasoning and tool arguments the meter was told of (what it estimates from when no usage comes). */
  bytes: { text: number; reasoning: number; tool: number }
}

/** `pieceBytes` 0: the stream read whole (MessagesPassThrough.whole, as provider.ts does for a declared length). */
function run(sse: string, passThrough: boolean, pieceBytes = Infinity): Run {
  const translator = new AnthropicStreamTranslator(CONTEXT, () => NOW, 'req_1')
  const pass = passThrough ? new MessagesPassThrough(translator) : undefined
  const encoder = new MessagesStreamEncoder({ id: 'msg_gateway', model: 'client-model', createdAt: NOW, includeUsage: false, estimatedInputTokens: 5 })
  const meter = new Meter(5, { maxInputTokens: 1_000_000, maxOutputTokens: 1_000_000 })
  const events: ChatEvent[] = []
  let client = encoder.start().join('')
  const out: ChatEvent[] = []
  const parse = JSON.parse
  let parses = 0
  JSON.parse = ((text: string, reviver?: never) => (parses++, parse(text, reviver))) as typeof JSON.parse
  try {
    const translate = (sseEvents: SseEvent[]) => {
      if (pass !== undefined) return pass.events(sseEvents, out)
      for (const sseEvent of sseEvents) {
        out.push(...translator.push(sseEvent))
        if (translator.done) return
      }
    }
    const decoder = new SseDecoder()
    const sseEvents: SseEvent[] = []
    if (pieceBytes === 0 && pass !== undefined) pass.whole(sse, out)
    else if (pieceBytes === 0) {
      decoder.pushText(sse, sseEvents)
      translate(sseEvents)
    } else {
      const bytes = new TextEncoder().encode(sse)
      const step = Math.min(pieceBytes, bytes.length)
      for (let at = 0; at < bytes.length && !translator.done; at += step) {
        decoder.push(bytes.subarray(at, at + step), sseEvents)
        translate(sseEvents)
        sseEvents.length = 0
        // A network read's events go out before the next read (the provider's frame loop).
        consume()
      }
    }
    if (!translator.done) out.push(...translator.end())
    consume()
  } finally {
    JSON.parse = parse
  }
  const bytes = { text: 0, reasoning: 0, tool: 0 }
  for (const item of events) {
    if (item.type === 'passthrough') {
      bytes.text += item.textBytes
      bytes.reasoning += item.reasoningBytes
      bytes.tool += item.toolBytes
    } else if (item.type === 'text-delta') bytes.text += Buffer.byteLength(item.delta)
    else if (item.type === 'reasoning-delta') bytes.reasoning += Buffer.byteLength(item.delta)
    else if (item.type === 'tool-call-delta') bytes.tool += Buffer.byteLength(item.argumentsDelta)
  }
  return { client, events, usage: meter.usage(), produced: meter.producedOutput, parses, bytes }

  function consume() {
    for (const item of out) {
      events.push(item)
      meter.observe(item)
      if (item.type === 'finish') client += encoder.finish(item.reason, item.usage, item).join('')
      else if (item.type === 'error') client += encoder.fail(toApiError(item.error)).join('')
      else client += encoder.push(item).join('')
    }
    out.length = 0
  }
}

/** Pass-through equals re-encoding, in one push, in 7- and 61-byte pieces and read whole; returns the whole run. */
function same(sse: string): Run {
  const expected = run(sse, false)
  for (const pieces of [Infinity, 7, 61]) {
    const actual = run(sse, true, pieces)
    expect(actual.client).toBe(expected.client)
    expect(actual.usage).toEqual(expected.usage)
    expect(actual.produced).toBe(expected.produced)
    expect(actual.bytes).toEqual(expected.bytes)
  }
  const whole = run(sse, true, 0)
  expect(whole.client).toBe(expected.client)
  expect(whole.usage).toEqual(expected.usage)
  expect(whole.produced).toBe(expected.produced)
  expect(whole.bytes).toEqual(expected.bytes)
  expect(whole.client).not.toContain('msg_upstream1')
  return whole
}

const types = (events: ChatEvent[]) => events.map(item => item.type)
const passthroughs = (events: ChatEvent[]) => events.filter(item => item.type === 'passthrough')

describe('Messages pass-through', () => {
  test('a text stream: its deltas pass through in one event, read without JSON.parse', () => {
    const words = Array.from({ length: 20 }, (_, i) => ` w${i}`)
    const sse = START + textBlock(0, ...words) + END
    const result = same(sse)
    expect(types(result.events)).toEqual(['response-start', 'text-start', 'passthrough', 'text-end', 'usage', 'finish'])
    expect(passthroughs(result.events)[0]).toMatchObject({ format: 'messages', kind: 'text', count: 20, textBytes: words.join('').length })
    // message_start, the block's start and stop, message_delta and message_stop.
    expect(result.parses).toBe(5)
    expect(run(sse, false).parses).toBe(25)
    expect(result.client).toContain('"model":"client-model"')
  })

  for (const name of ['text.sse', 'cached-thinking.sse', 'thinking-tool.sse', 'parallel-tools.sse', 'redacted-thinking.sse', 'json.sse', 'error-mid-stream.sse', 'rate-limited-mid-stream.sse']) {
    test(`fixture ${name}: the same bytes and usage as re-encoded`, async () => {
      same(await fixture(name))
    })
  }

  test('thinking and tool-argument deltas pass through; signatures still ride on the block end', async () => {
    const result = same(await fixture('thinking-tool.sse'))
    const kinds = passthroughs(result.events).map(item => (item.type === 'passthrough' && item.format === 'messages' ? item.kind : ''))
    expect(kinds).toContain('reasoning')
    expect(kinds).toContain('tool')
    expect(result.client).toContain('"type":"signature_delta"')
  })

  test('escapes JSON.stringify writes pass through; others are re-encoded', () => {
    const sse =
      START +
      blockStart(0, { type: 'text', text: '' }) +
      text(0, 'plain ') +
      text(0, 'say \\"hi\\" \\\\ back\\nslash\\t') + // canonical escapes
      text(0, '日本語 😀 ') + // raw UTF-8
      text(0, 'caf\\u00e9 ') + // not JSON.stringify's: the client gets é
      text(0, '\\/solidus ') + // not JSON.stringify's either
      text(0, '\\ud83d\\ude00 ') + // a surrogate pair escaped: re-encoded raw
      text(0, '\\u0001 ') + // a control character, as JSON.stringify writes it
      text(0, 'a\\"},\\"x\\":\\"b') + // a string that looks like structure
      blockStop(0) +
      END
    const result = same(sse)
    expect(result.client).toContain('"text":"café "')
    expect(result.client).toContain('"text":"/solidus "')
    expect(result.client).toContain('"text":"😀 "')
    expect(passthroughs(result.events).length).toBeGreaterThanOrEqual(2)
  })

  test('frames that only look like deltas, or differ in form, are parsed', () => {
    const sse =
      START +
      blockStart(0, { type: 'text', text: '' }) +
      text(0, 'one ') +
      text(0, 'two","extra":"x') + // closes early: extra field
      rawDelta(0, '{"type":"text_delta","text":"three ","citations":[]}') + // an extra field after the literal
      `event: content_block_delta\ndata: {"type":"content_block_delta", "index":0,"delta":{"type":"text_delta","text":"four "}}\n\n` + // other spacing
      `data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"five "}}\n\n` + // no event line
      `event: content_block_delta\r\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"six "}}\r\n\r\n` + // CRLF
      text(0, '') + // empty: nothing
      text(3, 'no such block ') +
      rawDelta(0, '{"type":"thinking_delta","thinking":"wrong kind"}') +
      rawDelta(0, '{"type":"citations_delta","citation":{"type":"char_location"}}') +
      text(0, 'end.') +
      blockStop(0) +
      END
    const result = same(sse)
    expect(types(result.events).at(-1)).toBe('finish')
    expect(result.client).not.toContain('wrong kind')
    expect(passthroughs(result.events).length).toBeGreaterThanOrEqual(2)
    // Not JSON (a leading zero; a raw tab in a string): the same in-band error either way.
    const head = START + blockStart(0, { type: 'text', text: '' }) + text(0, 'one ')
    for (const bad of [`event: content_block_delta\ndata: {"type":"content_block_delta","index":00,"delta":{"type":"text_delta","text":"two "}}\n\n`, text(0, 'a\tb')]) {
      expect(types(same(head + bad + blockStop(0) + END).events).at(-1)).toBe('error')
    }
  })

  test('a literal is forwarded only as JSON.stringify writes it', () => {
    expect(canonicalLiteralBytes('plain')).toBe(5)
    expect(canonicalLiteralBytes('日本')).toBe(6)
    expect(canonicalLiteralBytes('say \\"hi\\"')).toBe(8)
    expect(canonicalLiteralBytes('\\u00e9')).toBeUndefined()
    expect(canonicalLiteralBytes('\\/')).toBeUndefined()
    expect(canonicalLiteralBytes('a"b')).toBeUndefined()
    // A lone surrogate (never in decoded UTF-8): JSON.stringify escapes it.
    expect(canonicalLiteralBytes('\ud800')).toBeUndefined()
  })

  test('a block the translator leaves out shifts the index: the frames are written with the encoder’s', () => {
    const sse =
      START +
      blockStart(0, { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: {} }) +
      blockStop(0) +
      textBlock(1, 'Found ', 'it.') +
      textBlock(12, 'Twelve ', 'more.') +
      END
    const result = same(sse)
    expect(passthroughs(result.events)).toHaveLength(2)
    expect(result.client).toContain('"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Found "}')
    expect(result.client).toContain('"type":"content_block_delta","index":1,"delta":{"type":"text_delta","text":"more."}')
    expect(result.client).not.toContain('"index":12')
  })

  test('a thinking block passed through starts at its first delta; a ping, an error and a cut stream come through the translator', () => {
    const thinking = START + blockStart(0, { type: 'thinking', thinking: '', signature: '' }) + event({ type: 'ping' }) + rawDelta(0, '{"type":"thinking_delta","thinking":"Hmm. "}')
    const signed = same(thinking + rawDelta(0, '{"type":"signature_delta","signature":"c2ln"}') + blockStop(0) + textBlock(1, 'Yes.') + END)
    expect(signed.client).toContain('"content_block":{"type":"thinking","thinking":"","signature":""}')
    const failed = same(thinking + event({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } }))
    expect(types(failed.events).at(-1)).toBe('error')
    expect(failed.produced).toBe(true)
    const cut = same(thinking + rawDelta(0, '{"type":"thinking_delta","thinking":"More. "}'))
    expect(types(cut.events).at(-1)).toBe('error')
  })

  test('a tool call whose argument text is only whitespace still ends in {}; whitespace before the JSON stays before it', () => {
    // Anthropic starts a tool_use with input {} and may send a no-argument call's "input" as one
    // whitespace delta; the re-encoding path adds "{}" at the block's end for it. Forwarded as
    // input, the whitespace left the client (the SDK's finalMessage) with no JSON to parse.
    const tool = (index: number, ...pieces: string[]) =>
      blockStart(index, { type: 'tool_use', id: `toolu_${index}`, name: 'now', input: {} }) +
      pieces.map(piece => event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: piece } })).join('') +
      blockStop(index)
    /** The argument text the client assembles per block index, from the frames it received. */
    const argumentsOf = (client: string) => {
      const texts: string[] = []
      for (const [, data] of client.matchAll(/^data: ([^\n]*)$/gm)) {
        const frame = JSON.parse(data!)
        if (frame.type === 'content_block_delta' && frame.delta.type === 'input_json_delta') texts[frame.index] = (texts[frame.index] ?? '') + frame.delta.partial_json
      }
      return texts
    }
    for (const blank of [' ', '\n', ' \t\r\n ']) {
      const result = same(START + tool(0, blank) + END)
      expect(argumentsOf(result.client)).toEqual([`${blank}{}`])
      expect(result.bytes.tool).toBe(blank.length + 2)
    }
    const spaced = same(START + tool(0, ' ', '{"a":', ' ', '1}') + tool(1, '\n') + tool(2, '{}', ' ') + END)
    expect(argumentsOf(spaced.client)).toEqual([' {"a": 1}', '\n{}', '{} '])
    expect(argumentsOf(spaced.client).map(text => JSON.parse(text))).toEqual([{ a: 1 }, {}, {}])
    // Other whitespace is input on both paths (no "{}" added), so both send the same bytes.
    for (const other of ['\f', '\v', '\u00a0', '\u2028', '\ufeff', ' \f']) expect(argumentsOf(same(START + tool(0, other) + END).client)).toEqual([other])
    // The JSON pieces still pass through.
    expect(passthroughs(spaced.events).some(item => item.type === 'passthrough' && item.format === 'messages' && item.kind === 'tool')).toBe(true)
  })

  test('nothing after message_stop is read', () => {
    const result = same(START + textBlock(0, 'Done.') + END + text(0, 'late '))
    expect(result.client).not.toContain('late')
  })
})
