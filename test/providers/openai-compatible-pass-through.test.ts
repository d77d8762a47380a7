import { describe, expect, test } from 'bun:test'
import { SseDecoder, type SseEvent } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { Meter } from '../../src/inference/meter'
import { toApiError } from '../../src/inference/upstream-errors'
import { ChunkTranslator } from '../../src/providers/openai-compatible/from-upstream-stream'
import { PassThroughTranslator } from '../../src/providers/openai-compatible/pass-through'
import { chunk, DONE, fragments, frame, openAIUsage } from './openai-wire'

// Same-format pass-through (src/providers/openai-compatible/pass-through.ts): for any upstream
// stream, what a Chat Completions client receives and what the meter counts must be exactly
// what the re-encoding path (ChunkTranslator → canonical events → encoder) gives. Each stream is
// fed in one push, cut into small network pieces, and read whole as a declared-length body is
// (PassThroughTranslator.whole): batches of frames differ, bytes must not.

const context = { provider: 'openai-compatible:up', model: 'upstream-model-2025', requestId: 'req-1' }
const HEAD = '"id":"chatcmpl-test123","object":"chat.completion.chunk","created":1700000000,"model":"upstream-model-2025","system_fingerprint":"fp_test"'
const usageFrame = (input = 11, output = 7) => frame({ id: 'chatcmpl-test123', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'upstream-model-2025', system_fingerprint: 'fp_test', choices: [], usage: openAIUsage({ inputTokens: input, outputTokens: output }) })
/** A chunk written by hand: `choice` is the raw text of choice 0's fields after `"index":0,`. */
const raw = (choice: string, head = HEAD) => `data: {${head},"choices":[{"index":0,${choice}}]}\n\n`
const content = (literal: string) => raw(`"delta":{"content":"${literal}"},"logprobs":null,"finish_reason":null`)

interface Run {
  client: string
  events: ChatEvent[]
  usage: ReturnType<Meter['usage']>
  produced: boolean
  /** The UTF-8 bytes of text the meter was told of (what it estimates from when no usage comes). */
  textBytes: number
}

/** One upstream stream through the provider's frame loop (as provider.ts fromSse) and the client's encoder. */
/** How many times `JSON.parse` ran during `work`. */
function parseCallsOf(work: () => void): number {
  const parse = JSON.parse
  let calls = 0
  JSON.parse = ((text: string, reviver?: never) => (calls++, parse(text, reviver))) as typeof JSON.parse
  try {
    work()
  } finally {
    JSON.parse = parse
  }
  return calls
}

/** `pieceBytes` 0: the stream read whole (PassThroughTranslator.whole, as provider.ts does for a declared length). */
function run(sse: string, passThrough: boolean, pieceBytes = Infinity, includeUsage = true): Run {
  const translator = passThrough ? new PassThroughTranslator(context) : new ChunkTranslator(context)
  const encoder = new ChatCompletionsStreamEncoder({ id: 'chatcmpl-gw', model: 'client-model', createdAt: 1_800_000_000, includeUsage, estimatedInputTokens: 5 })
  const meter = new Meter(5, { maxInputTokens: 1_000_000, maxOutputTokens: 1_000_000 })
  const decoder = new SseDecoder()
  const bytes = new TextEncoder().encode(sse)
  const events: ChatEvent[] = []
  let client = encoder.start().join('')
  const consume = (out: ChatEvent[]) => {
    for (const event of out) {
      events.push(event)
      meter.observe(event)
      if (event.type === 'finish') client += encoder.finish(event.reason, event.usage).join('')
      else if (event.type === 'error') client += encoder.fail(toApiError(event.error)).join('')
      else client += encoder.push(event).join('')
    }
    out.length = 0
  }
  const out: ChatEvent[] = []
  const sseEvents: SseEvent[] = []
  if (pieceBytes === 0) (translator as PassThroughTranslator).whole(sse, out)
  const step = pieceBytes === 0 ? Infinity : Math.min(pieceBytes, bytes.length)
  for (let at = 0; pieceBytes !== 0 && at < bytes.length && !translator.ended; at += step) {
    decoder.push(bytes.subarray(at, at + step), sseEvents)
    for (const event of sseEvents) {
      translator.event(event, out)
      if (translator.ended) break
    }
    sseEvents.length = 0
    consume(out)
  }
  if (!translator.ended) translator.end(out)
  consume(out)
  let textBytes = 0
  for (const event of events) {
    if (event.type === 'passthrough') textBytes += event.textBytes
    else if (event.type === 'text-delta') textBytes += Buffer.byteLength(event.delta)
  }
  return { client, events, usage: meter.usage(), produced: meter.producedOutput, textBytes }
}

/** Pass-through equals re-encoding (in one push, in 7- and 61-byte pieces, and read whole), with and without include_usage; returns the pass-through run. */
function same(sse: string): Run {
  const passed = run(sse, true)
  for (const includeUsage of [true, false]) {
    const expected = run(sse, false, Infinity, includeUsage)
    for (const pieces of [Infinity, 7, 61, 0]) {
      const actual = run(sse, true, pieces, includeUsage)
      expect(actual.client).toBe(expected.client)
      expect(actual.usage).toEqual(expected.usage)
      expect(actual.produced).toBe(expected.produced)
      expect(actual.textBytes).toBe(expected.textBytes)
    }
  }
  expect(passed.client).not.toContain('upstream-model-2025')
  expect(passed.client).not.toContain('chatcmpl-test123')
  return passed
}

// A pass-through stream starts with its first chunk's response-start (the provider opens at the first event).
const types = (events: ChatEvent[]) => events.map(event => event.type)
const words = (text: string) => text.match(/\S+\s*/g)!

describe('openai-compatible pass-through', () => {
  test('a plain text stream passes through; the finish, usage and [DONE] still come from the translator', () => {
    const sse = chunk({ role: 'assistant', content: '' }) + words('The quick brown fox jumps over the lazy dog.').map(word => chunk({ content: word })).join('') + chunk({}, 'stop') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events)).toEqual(['response-start', 'passthrough', 'finish'])
    expect(result.events[1]).toMatchObject({ textBytes: 44, reasoningBytes: 0, toolBytes: 0 })
    expect(result.client).toContain('"model":"client-model"')
    expect(result.usage).toMatchObject({ inputTokens: 11, outputTokens: 7 })
  })

  test('content chunks after the first are read without JSON.parse', () => {
    const sse = chunk({ role: 'assistant', content: '' }) + Array.from({ length: 20 }, (_, i) => chunk({ content: ` w${i}` })).join('') + chunk({}, 'stop') + usageFrame() + DONE
    const calls = parseCallsOf(() => run(sse, true))
    // The role chunk, the first content chunk (the template), the finish chunk and the usage chunk.
    expect(calls).toBe(4)
  })

  test('escaped quotes, backslashes, newlines, unicode and non-canonical escapes', () => {
    const sse =
      chunk({ role: 'assistant', content: '' }) +
      chunk({ content: 'plain ' }) +
      content('say \\"hi\\" ') + // escaped quotes
      content('back\\\\slash\\n') + // a backslash, a newline
      content('caf\\u00e9 ') + // Python's ensure_ascii: \u00e9 is é (the client gets é, as when re-encoded)
      content('\\u2028\\ud83d\\ude00 ') + // a line separator, a surrogate pair
      content('日本語 😀 ') + // raw UTF-8
      content('\\/slash ') + // an escaped solidus
      content('a\\"},\\"x\\":\\"b') + // a string that looks like structure
      chunk({}, 'stop') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events)).toEqual(['response-start', 'passthrough', 'finish'])
    expect(result.client).toContain('"content":"café "')
    expect(result.client).toContain('"content":"a\\"},\\"x\\":\\"b"')
  })

  test('a chunk that only looks like the template is parsed (quotes and raw control characters in the literal)', () => {
    // Same prefix and suffix, but the "content" closes early and a second field follows: not plain.
    const sse = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + content('two","reasoning":"x') + chunk({}, 'stop') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events)).toContain('reasoning-delta')
    // A raw tab inside a string is malformed JSON: the same in-band error either way.
    const malformed = same(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + content('a\tb') + chunk({}, 'stop') + DONE)
    expect(types(malformed.events).at(-1)).toBe('error')
    // The last control character, between literals that are read in place.
    expect(types(same(chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + content('two ') + content('a\u001fb') + content('c') + chunk({}, 'stop') + DONE).events).at(-1)).toBe('error')
  })

  test('parallel tool calls with ids pass through; stop after tools is tool_calls', () => {
    const args = '{"city":"Paris","unit":"c"}'
    let sse = chunk({ role: 'assistant', content: null }) + chunk({ content: 'Checking. ' })
    sse += chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }] })
    for (const piece of fragments(args, 4)) sse += chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] })
    sse += chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'time', arguments: '{"tz":' } }] })
    sse += chunk({ tool_calls: [{ index: 1, function: { arguments: '"CET"}' } }] })
    sse += chunk({}, 'stop') + usageFrame() + DONE
    const result = same(sse)
    // The translator ends the forwarded calls' blocks at the finish (no frames for this client).
    expect(types(result.events)).toEqual(['response-start', 'passthrough', 'tool-call-end', 'tool-call-end', 'finish'])
    // The calls' names count as output with their arguments (the meter's count, when no usage comes).
    expect(result.events[1]).toMatchObject({ toolBlocks: [0, 1], toolBytes: 'weather'.length + args.length + 'time'.length + '{"tz":"CET"}'.length })
    expect(result.client).toContain('"finish_reason":"tool_calls"')
  })

  test('a call that got no argument text gets "{}" at the finish, passed through or not (a client cannot JSON.parse "")', () => {
    // Before: the client got `arguments: ""` (some vLLM builds send it for a call without
    // parameters), and the SDK's helpers threw "invalid structured output JSON" on a strict call.
    const call = (index: number, id: string, args: string) => chunk({ tool_calls: [{ index, id, type: 'function', function: { name: 'get_w', arguments: args } }] })
    const argumentsSeen = (client: string) =>
      client.split('\n\n').filter(line => line.startsWith('data: {')).flatMap(line => JSON.parse(line.slice(6)).choices[0]?.delta.tool_calls ?? []).map((delta: { index: number; function: { arguments: string } }) => [delta.index, delta.function.arguments])
    const alone = same(chunk({ role: 'assistant', content: null }) + call(0, 'call_a', '') + chunk({}, 'tool_calls') + usageFrame() + DONE)
    expect(types(alone.events)).toEqual(['response-start', 'passthrough', 'tool-call-delta', 'tool-call-end', 'finish'])
    expect(argumentsSeen(alone.client)).toEqual([[0, ''], [0, '{}']])
    // Before a call with arguments: the next call waits for it, which ends with its "{}".
    const two = same(chunk({ role: 'assistant', content: null }) + call(0, 'call_a', '') + call(1, 'call_b', '{"c":1}') + chunk({}, 'tool_calls') + usageFrame() + DONE)
    expect(argumentsSeen(two.client)).toEqual([[0, ''], [0, '{}'], [1, ''], [1, '{"c":1}']])
    // A finish that never came (the stream ended at [DONE]) ends the call the same way.
    expect(argumentsSeen(same(chunk({ role: 'assistant', content: null }) + call(0, 'call_a', '') + DONE).client)).toEqual([[0, ''], [0, '{}']])
  })

  test('interleaved parallel calls hand over where the next call starts before the last is whole; the client gets each call contiguous', () => {
    const args = '{"city":"Paris","unit":"c"}'
    let sse = chunk({ role: 'assistant', content: null }) + chunk({ content: 'Checking. ' })
    sse += chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '' } }] })
    sse += chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'time', arguments: '{"tz":' } }] })
    for (const piece of fragments(args, 4)) sse += chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] })
    sse += chunk({ content: 'More. ' })
    sse += chunk({ tool_calls: [{ index: 1, function: { arguments: '"CET"}' } }] })
    sse += chunk({}, 'stop') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events).slice(0, 3)).toEqual(['response-start', 'passthrough', 'tool-call-start'])
    expect(result.events[1]).toMatchObject({ toolBlocks: [0] })
    // Chunk by chunk, as the client sees them: call 0 whole, then call 1 and what came after its start.
    const deltas = result.client.split('\n\n').filter(line => line.startsWith('data: {')).map(line => JSON.parse(line.slice(6)).choices[0]?.delta)
    const seen = deltas.flatMap(delta => (delta?.tool_calls ?? []).map((call: { index: number; function: { arguments: string } }) => [call.index, call.function.arguments]))
    expect(seen).toEqual([[0, ''], ...fragments(args, 4).map(piece => [0, piece]), [1, ''], [1, '{"tz":'], [1, '"CET"}']])
    expect(deltas.filter(delta => delta?.content).map(delta => delta.content)).toEqual(['Checking. ', 'More. '])
    expect(result.client).toContain('"finish_reason":"tool_calls"')
  })

  test('a call whose arguments are never whole JSON (a Python-style dict): the next call waits for the finish, order unchanged', () => {
    let sse = chunk({ role: 'assistant', content: null })
    sse += chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: "{'city': " } }] })
    sse += chunk({ tool_calls: [{ index: 0, function: { arguments: "'Oslo'}" } }] })
    sse += chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: 'time', arguments: '{"tz":"CET"}' } }] })
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    const result = same(sse)
    const calls = result.client.split('\n\n').filter(line => line.startsWith('data: {')).flatMap(line => JSON.parse(line.slice(6)).choices[0]?.delta.tool_calls ?? [])
    expect(calls.map((call: { index: number }) => call.index)).toEqual([0, 0, 0, 1, 1])
  })

  test('Ollama: another id at index 0 is another call; it hands over and the client gets it at index 1', () => {
    let sse = chunk({ role: 'assistant', content: '' })
    sse += chunk({ tool_calls: [{ index: 0, id: 'call_AAA111', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] })
    sse += chunk({ tool_calls: [{ index: 0, id: 'call_BBB222', type: 'function', function: { name: 'weather', arguments: '{"city":"Paris"}' } }] })
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    const result = same(sse)
    const calls = result.client.split('\n\n').filter(line => line.startsWith('data: {')).flatMap(line => JSON.parse(line.slice(6)).choices[0]?.delta.tool_calls ?? [])
    expect(calls.map((call: { index: number; id?: string }) => [call.index, call.id])).toEqual([
      [0, 'call_AAA111'],
      [0, undefined],
      [1, 'call_BBB222'],
      [1, undefined],
    ])
  })

  /** The client's tool calls: [index, id, name, arguments] each, from their deltas. */
  const clientCalls = (client: string) => {
    const calls: Array<[number, string, string, string]> = []
    for (const line of client.split('\n\n').filter(line => line.startsWith('data: {'))) {
      for (const call of JSON.parse(line.slice(6)).choices[0]?.delta.tool_calls ?? []) {
        if (call.id !== undefined) calls.push([call.index, call.id, call.function.name, ''])
        calls.find(([index]) => index === call.index)![3] += call.function.arguments
      }
    }
    return calls
  }

  test('a call with an id another call of the answer has hands over: the translator gives it one of its own', () => {
    let sse = chunk({ role: 'assistant', content: '' }) + chunk({ tool_calls: [{ index: 0, id: 'call_0', type: 'function', function: { name: 'weather', arguments: '{"city":"Oslo"}' } }] })
    sse += chunk({ tool_calls: [{ index: 1, id: 'call_0', type: 'function', function: { name: 'time', arguments: '{}' } }] })
    sse += chunk({ tool_calls: [{ index: 1, id: 'call_0', function: { arguments: '' } }] }) // its id again: the same call
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events).slice(0, 2)).toEqual(['response-start', 'passthrough'])
    expect(clientCalls(result.client)).toEqual([
      [0, 'call_0', 'weather', '{"city":"Oslo"}'],
      [1, 'call_req-1_1', 'time', '{}'],
    ])
  })

  test('a named delta without id at the index of a whole call is another call: it hands over, and the translator starts it', () => {
    let sse = chunk({ role: 'assistant', content: '' }) + chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"city":' } }] })
    // The name repeated mid-call (the text is not whole yet) is the same call, still passed through.
    sse += chunk({ tool_calls: [{ index: 0, function: { name: 'weather', arguments: '"Oslo"}' } }] })
    sse += chunk({ tool_calls: [{ index: 0, function: { name: 'time', arguments: '{"tz":"CET"}' } }] })
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events).slice(0, 3)).toEqual(['response-start', 'passthrough', 'tool-call-start'])
    expect(clientCalls(result.client)).toEqual([
      [0, 'call_a', 'weather', '{"city":"Oslo"}'],
      [1, 'call_req-1_0', 'time', '{"tz":"CET"}'],
    ])
  })

  test('a chunk handed over midway gives the translator the forwarded calls\' text from before it, not what the chunk added', () => {
    let sse = chunk({ role: 'assistant', content: '' }) + chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"c' } }] })
    // Ends call_a's text, then starts a call without id: not plain, so the translator reads the whole chunk.
    sse += chunk({ tool_calls: [{ index: 0, function: { arguments: 'ity":"Oslo"}' } }, { index: 1, type: 'function', function: { name: 'time', arguments: '{}' } }] })
    sse += chunk({ tool_calls: [{ index: 0, function: { name: 'weather', arguments: '{"city":"Paris"}' } }] })
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    expect(clientCalls(same(sse).client).map(([, , name, args]) => [name, args])).toEqual([
      ['weather', '{"city":"Oslo"}'],
      ['time', '{}'],
      ['weather', '{"city":"Paris"}'],
    ])
  })

  test('a tool call without id hands over mid-stream; forwarded calls continue under the translator', () => {
    let sse = chunk({ role: 'assistant', content: '' }) + chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: 'weather', arguments: '{"c' } }] })
    sse += chunk({ tool_calls: [{ index: 1, type: 'function', function: { name: 'time', arguments: '{}' } }] }) // no id: the translator makes one
    sse += chunk({ tool_calls: [{ index: 0, function: { arguments: 'ity":"Oslo"}' } }] }) // the forwarded call, continued
    sse += chunk({}, 'tool_calls') + usageFrame() + DONE
    const result = same(sse)
    expect(types(result.events).slice(0, 2)).toEqual(['response-start', 'passthrough'])
    expect(types(result.events)).toContain('tool-call-start')
    expect(result.client).toContain('call_req-1_1')
  })

  test('reasoning_content passes through; `reasoning` and function_call hand over', () => {
    const thinking = chunk({ role: 'assistant', content: '' }) + chunk({ reasoning_content: 'Think. ' }) + chunk({ reasoning_content: 'More. ' }) + chunk({ content: 'Answer.' })
    expect(types(same(thinking + chunk({}, 'stop') + usageFrame() + DONE).events)).toEqual(['response-start', 'passthrough', 'finish'])
    const ollama = same(thinking + chunk({ reasoning: 'late thought' }) + chunk({ content: ' More.' }) + chunk({}, 'stop') + usageFrame() + DONE)
    expect(types(ollama.events)).toContain('reasoning-delta')
    expect(ollama.usage.outputTokens).toBe(7)
    same(thinking + chunk({ function_call: { name: 'f', arguments: '{}' } }) + chunk({}, 'function_call') + usageFrame() + DONE)
  })

  test('an error chunk mid-stream ends with the in-band error, output still metered', () => {
    const sse = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'partial ' }) + chunk({ content: 'answer' }) + frame({ error: { message: 'model crashed', type: 'server_error' } }) + DONE
    const result = same(sse)
    expect(types(result.events)).toEqual(['response-start', 'passthrough', 'error'])
    expect(result.produced).toBe(true)
    expect(result.client).toContain('"code":"provider_error"')
  })

  test('extra fields (service_tier, obfuscation), a changed head, continuous usage and unknown finish reasons are re-encoded', () => {
    const start = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' })
    const tail = chunk({}, 'stop') + usageFrame() + DONE
    expect(types(same(chunk({ role: 'assistant', content: '' }, null, { service_tier: 'default' }) + chunk({ content: 'x' }, null, { obfuscation: 'abc' }) + tail).events)).not.toContain('passthrough')
    expect(types(same(start + chunk({ content: 'two ' }, null, { obfuscation: 'abc' }) + tail).events)).toEqual(['response-start', 'passthrough', 'text-start', 'text-delta', 'text-end', 'finish'])
    expect(types(same(start + chunk({ content: 'two ' }, null, { id: 'chatcmpl-other' }) + tail).events)).toContain('text-delta')
    expect(types(same(start + chunk({ content: 'two ' }, null, { usage: openAIUsage({ inputTokens: 3, outputTokens: 2 }) }) + tail).events)).toContain('text-delta')
    expect(same(start + chunk({}, 'weird_reason') + usageFrame() + DONE).client).toContain('"finish_reason":"stop"')
    // OpenAI's `"usage":null` on every chunk (include_usage) is plain.
    expect(types(same(start + chunk({ content: 'two' }, null, { usage: null }) + tail).events)).toEqual(['response-start', 'passthrough', 'finish'])
  })

  test('other key orders (llama.cpp) and choice shapes without logprobs are parsed but still plain', () => {
    const llama = (delta: object, finish: string | null = null) => frame({ choices: [{ finish_reason: finish, index: 0, delta }], created: 1, id: 'c', model: 'gguf', object: 'chat.completion.chunk', system_fingerprint: 'b1' })
    const result = same(llama({ role: 'assistant', content: null }) + llama({ content: 'Hello' }) + llama({ content: ' there' }) + llama({}, 'stop') + usageFrame() + DONE)
    expect(types(result.events)).toEqual(['response-start', 'passthrough', 'finish'])
    expect(result.client).not.toContain('gguf')
  })

  test("Ollama's role in every delta is part of the template", () => {
    const ollama = (delta: object, finish: string | null = null) => frame({ id: 'chatcmpl-1', object: 'chat.completion.chunk', created: 1, model: 'llama3', system_fingerprint: 'fp_ollama', choices: [{ index: 0, delta: { role: 'assistant', ...delta }, finish_reason: finish }] })
    const sse = ollama({ content: 'Hel' }) + ollama({ content: 'lo \\ "you"' }) + ollama({ content: ' ' }) + ollama({ content: '' }, 'stop') + usageFrame() + DONE
    const calls = parseCallsOf(() => run(sse, true))
    // The template chunk, the escaped literal, the finish and the usage chunk.
    expect(calls).toBe(4)
    expect(types(same(sse).events)).toEqual(['response-start', 'passthrough', 'finish'])
  })

  test('a stream read whole: content in place, non-ASCII and surrogate pairs counted in UTF-8 bytes, JSON.parse only where needed', () => {
    const literals = ['one ', 'café ', '日本 ', '😀 ', 'x\\"y ', 'three ', '\\u00e9', 'four']
    const sse = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'Hi ' }) + literals.map(literal => content(literal)).join('') + chunk({}, 'stop') + DONE
    const result = same(sse)
    expect(result.client).toContain('"content":"😀 "')
    expect(result.client).toContain('"content":"é"')
    // No usage chunk: the meter's estimate from the bytes is what is billed.
    expect(run(sse, true, 0).textBytes).toBe(Buffer.byteLength('Hi ' + literals.join('').replace('\\"', '"').replace('\\u00e9', 'é')))
    // The role chunk, the template, the two escaped literals and the finish chunk.
    expect(parseCallsOf(() => run(sse, true, 0))).toBe(5)
  })

  test('framing a whole read must leave to the SSE decoder: CRLF, comments, id and event fields, no space, multi-line data', () => {
    const start = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' })
    const tail = chunk({}, 'stop') + usageFrame() + DONE
    const two = content('two ')
    const variants = [
      two.replaceAll('\n', '\r\n'), // CRLF line ends: no blank line of two LFs
      two.replace('\n\n', '\r\n\n'), // a CR before the blank line
      `: keep-alive\n${two}`, // a comment line first
      `id: 7\n${two}`, // an id field first
      `event: message\n${two}`, // the default event, named
      two.replace('data: ', 'data:'), // no space after the colon
      two.replace('data: ', 'data:  '), // two spaces: the second is the data's
      two.replace('{"content":', '\ndata: {"content":'), // the data in two lines
    ]
    for (const variant of variants) {
      const result = same(start + variant + content('three') + tail)
      expect(result.client).toContain('"content":"two "')
      expect(result.client).toContain('"content":"three"')
    }
    // No template is learned from several data lines: its line break would match a frame whose
    // second line is not data (an unknown field, ignored), which the decoder reads as malformed.
    const twoLines = (literal: string, field: string) => content(literal).replace('"delta":', `\n${field}"delta":`)
    const unknownField = same(chunk({ role: 'assistant', content: '' }) + twoLines('one ', 'data: ') + twoLines('two', '') + tail)
    expect(types(unknownField.events).at(-1)).toBe('error')
    // An event named otherwise is the translator's to judge, whole or not.
    same(start + `event: error\n${two}` + tail)
    // A CR before a blank line ends the line: `[DONE]\r` is still the terminator.
    const crTail = chunk({}, 'stop') + usageFrame().replace('\n\n', '\r\n\n') + 'data: [DONE]\r\n\n'
    expect(types(same(start + two + crTail).events).at(-1)).toBe('finish')
  })

  test('truncated streams, malformed JSON, a finish chunk with content and no [DONE]', () => {
    const start = chunk({ role: 'assistant', content: '' }) + chunk({ content: 'one ' }) + chunk({ content: 'two ' })
    expect(types(same(start).events).at(-1)).toBe('error')
    expect(types(same(start + 'data: {not json\n\n' + chunk({}, 'stop') + DONE).events).at(-1)).toBe('error')
    expect(same(start + chunk({ content: 'last' }, 'length') + usageFrame()).client).toContain('"finish_reason":"length"')
    expect(types(same(DONE).events)).toEqual(['error'])
    expect(types(same(frame({ error: { message: 'at once' } })).events)).toEqual(['error'])
  })
})
