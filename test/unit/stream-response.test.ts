import { describe, expect, test } from 'bun:test'
import { ApiError } from '../../src/http/errors'
import type { ChatEvent } from '../../src/inference/canonical'
import { ChatCompletionsStreamEncoder } from '../../src/inference/dialects/chat-completions/encode-stream'
import { streamResponse, type StreamOutcome } from '../../src/inference/stream-response'
import { ReplayedEvents } from '../../src/providers/replay'

// streamResponse encodes the events at hand before it makes the reply: an answer that came whole
// within one turn of the event loop is settled and sent as one body; otherwise the reply streams
// from the first events on, and the rest as they come.

const meta = { id: 'chatcmpl-test', model: 'm', createdAt: 1, includeUsage: false, estimatedInputTokens: 1 }
const finish = { type: 'finish', reason: 'stop', usage: { inputTokens: 1, outputTokens: 2 } } as ChatEvent
const delta = (text: string): ChatEvent => ({ type: 'text-delta', block: 0, delta: text })

/** Events from a list; `gate` holds back the events from that index until it is opened. */
function events(list: ChatEvent[], gateAt = Infinity) {
  let open: () => void = () => {}
  const gate = new Promise<void>(resolve => (open = resolve))
  const state = { returned: 0 }
  async function* generate(): AsyncGenerator<ChatEvent> {
    for (let index = 0; index < list.length; index++) {
      if (index === gateAt) await gate
      yield list[index]!
    }
  }
  const iterator = generate()
  const iterable: AsyncIterable<ChatEvent> = {
    [Symbol.asyncIterator]: () => ({
      next: () => iterator.next(),
      return: async () => {
        state.returned += 1
        return iterator.return(undefined)
      },
    }),
  }
  return { iterable, open, state }
}

function recorder(result: ApiError | undefined = undefined) {
  const outcomes: StreamOutcome[] = []
  return { outcomes, complete: async (outcome: StreamOutcome) => (outcomes.push(outcome), result) }
}

const dataLines = (text: string) => text.split('\n\n').filter(Boolean)

describe('streamResponse', () => {
  test('an answer whose events are all at hand is settled before the reply exists, and sent as one body', async () => {
    const { iterable, state } = events([delta('Hel'), delta('lo'), finish])
    const { outcomes, complete } = recorder()
    const seen: string[] = []
    const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: event => seen.push(event.type), complete })
    // Settled exactly once before the reply was made; the provider's iterator was ended.
    expect(outcomes).toEqual(['finished'])
    expect(state.returned).toBe(1)
    expect(seen).toEqual(['text-delta', 'text-delta', 'finish'])
    expect(response.headers.get('content-type')).toBe('text/event-stream; charset=utf-8')
    const reader = response.body!.getReader()
    const first = new TextDecoder().decode((await reader.read()).value)
    expect((await reader.read()).done).toBe(true) // one chunk: the whole stream
    const frames = dataLines(first)
    expect(frames[0]).toContain('"role":"assistant"')
    expect(frames[1]).toContain('"content":"Hel"')
    expect(frames[2]).toContain('"content":"lo"')
    expect(frames[3]).toContain('"finish_reason":"stop"')
    expect(frames.at(-1)).toBe('data: [DONE]')
  })

  test('a failed settlement replaces the terminal frames with the in-band error, also in one body', async () => {
    const { iterable } = events([delta('Hi'), finish])
    const { outcomes, complete } = recorder(new ApiError('unavailable', 'the ledger could not record this charge'))
    const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete })
    const text = await response.text()
    expect(outcomes).toEqual(['finished'])
    expect(text).toContain('"content":"Hi"')
    expect(text).toContain('the ledger could not record this charge')
    expect(text).not.toContain('finish_reason":"stop"')
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true)
  })

  test('events not at hand: the reply starts with what was, before the rest arrives, and settles at its end', async () => {
    const { iterable, open } = events([delta('first'), delta('second'), finish], 1)
    const { outcomes, complete } = recorder()
    const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete })
    expect(outcomes).toEqual([]) // the reply exists before the answer is complete
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    const first = decoder.decode((await reader.read()).value)
    // The start frame and the first event go out together, in the first chunk.
    expect(dataLines(first).length).toBe(2)
    expect(first).toContain('"role":"assistant"')
    expect(first).toContain('"content":"first"')
    open()
    let rest = ''
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += decoder.decode(chunk.value)
    expect(rest).toContain('"content":"second"')
    expect(rest.endsWith('data: [DONE]\n\n')).toBe(true)
    expect(outcomes).toEqual(['finished'])
  })

  test('an iterator that throws before the reply ends it as failed, once, with the in-band error', async () => {
    const iterable: AsyncIterable<ChatEvent> = {
      [Symbol.asyncIterator]: () => ({ next: async () => Promise.reject(new Error('socket reset')) }),
    }
    const { outcomes, complete } = recorder()
    const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete })
    const text = await response.text()
    expect(outcomes).toEqual(['failed'])
    expect(text).toContain('"error"')
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true)
  })

  test('an event whose handling throws before the reply still ends the stream as failed, settled once', async () => {
    const { iterable, state } = events([delta('boom'), finish])
    const { outcomes, complete } = recorder()
    const observe = () => {
      throw new TypeError('a bug in an observer')
    }
    const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe, complete })
    const text = await response.text()
    expect(outcomes).toEqual(['failed'])
    expect(state.returned).toBe(1)
    expect(text).toContain('"error"')
    expect(text.endsWith('data: [DONE]\n\n')).toBe(true)
  })

  test('replayed events (read whole by the provider) are encoded in one pass, never iterated, into the bytes they would stream as', async () => {
    const list = [delta('Hel'), delta('lo'), finish, delta('after the end')]
    let nexts = 0
    class Counted extends ReplayedEvents {
      override [Symbol.asyncIterator]() {
        const iterator = super[Symbol.asyncIterator]()
        const next = iterator.next.bind(iterator)
        iterator.next = () => (nexts++, next())
        return iterator
      }
    }
    const replayed = recorder()
    const seen: string[] = []
    const body = await (await streamResponse({ events: new Counted(list, new AbortController().signal), encoder: new ChatCompletionsStreamEncoder(meta), observe: event => seen.push(event.type), complete: replayed.complete })).text()
    expect(nexts).toBe(0)
    expect(replayed.outcomes).toEqual(['finished'])
    expect(seen).toEqual(['text-delta', 'text-delta', 'finish'])
    const streamed = recorder()
    const same = await (await streamResponse({ events: events(list).iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete: streamed.complete })).text()
    expect(body).toBe(same)
    expect(streamed.outcomes).toEqual(['finished'])
  })

  test('replayed events stop where the call was aborted (a cancel when the client has left) or where handling one throws, settled once', async () => {
    const aborted = new AbortController()
    aborted.abort()
    const cancelled = recorder()
    const text = await (await streamResponse({ events: new ReplayedEvents([delta('never'), finish], aborted.signal), encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete: cancelled.complete, clientGone: () => true })).text()
    expect(cancelled.outcomes).toEqual(['cancelled'])
    expect(text).not.toContain('never')
    const failed = recorder()
    const observe = () => {
      throw new TypeError('a bug in an observer')
    }
    const failing = await (await streamResponse({ events: new ReplayedEvents([delta('boom'), finish], new AbortController().signal), encoder: new ChatCompletionsStreamEncoder(meta), observe, complete: failed.complete })).text()
    expect(failed.outcomes).toEqual(['failed'])
    expect(failing).toContain('"error"')
    expect(failing.endsWith('data: [DONE]\n\n')).toBe(true)
  })

  test('events that stop early are a failure, or a cancel when the client has left', async () => {
    for (const [gone, outcome] of [[false, 'failed'], [true, 'cancelled']] as const) {
      const { iterable } = events([delta('cut')])
      const { outcomes, complete } = recorder()
      const response = await streamResponse({ events: iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete, clientGone: () => gone })
      await response.text()
      expect(outcomes).toEqual([outcome])
    }
  })

  describe('sendBeforeSettling (an idle gateway)', () => {
    /** A settlement held until `settle` is called, resolving with `result`. */
    function heldSettlement(result: ApiError | undefined = undefined) {
      const outcomes: StreamOutcome[] = []
      let settle: () => void = () => {}
      const settled = new Promise<void>(resolve => (settle = resolve))
      return { outcomes, settle, complete: async (outcome: StreamOutcome) => (outcomes.push(outcome), await settled, result) }
    }

    for (const [name, source] of [
      ['events read whole', () => new ReplayedEvents([delta('Hel'), delta('lo'), finish], new AbortController().signal)],
      ['events at hand within the turn', () => events([delta('Hel'), delta('lo'), finish]).iterable],
    ] as const) {
      test(`${name}: the answer is readable before the settlement ends, the terminal frames only after it`, async () => {
        const held = heldSettlement()
        const asked: number[] = []
        const response = await streamResponse({ events: source(), encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete: held.complete, sendBeforeSettling: () => (asked.push(1), true) })
        expect(asked).toHaveLength(1)
        // The settlement starts once the answer is written (the reader's first pull), or, when
        // nothing pulls, on the event loop's next turn: never before the server has the answer.
        await Promise.resolve()
        expect(held.outcomes).toEqual([])
        await new Promise(resolve => setImmediate(resolve))
        // It began (exactly once) but has not ended: the answer is out all the same.
        expect(held.outcomes).toEqual(['finished'])
        const reader = response.body!.getReader()
        const first = dataLines(new TextDecoder().decode((await reader.read()).value))
        expect(first[0]).toContain('"role":"assistant"')
        expect(first.at(-1)).toContain('"content":"lo"')
        expect(first.join('\n')).not.toContain('finish_reason":"stop"')
        let rest = ''
        const reading = (async () => {
          for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) rest += new TextDecoder().decode(chunk.value)
        })()
        await Bun.sleep(0)
        expect(rest).toBe('')
        held.settle()
        await reading
        expect(rest).toContain('"finish_reason":"stop"')
        expect(rest.endsWith('data: [DONE]\n\n')).toBe(true)
        expect(held.outcomes).toEqual(['finished'])
      })
    }

    test('a failed settlement still ends the stream with the in-band error after the answer', async () => {
      const held = heldSettlement(new ApiError('unavailable', 'the ledger could not record this charge'))
      held.settle()
      const response = await streamResponse({ events: events([delta('Hi'), finish]).iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete: held.complete, sendBeforeSettling: () => true })
      const text = await response.text()
      expect(text.indexOf('"content":"Hi"')).toBeLessThan(text.indexOf('the ledger could not record this charge'))
      expect(text).not.toContain('finish_reason":"stop"')
      expect(text.endsWith('data: [DONE]\n\n')).toBe(true)
    })

    test('a client that leaves before the terminal frames leaves no unhandled rejection behind, even if the settlement throws', async () => {
      let fail: (error: Error) => void = () => {}
      const failing = new Promise<never>((_, reject) => (fail = reject))
      const response = await streamResponse({ events: events([delta('Hi'), finish]).iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete: () => failing, sendBeforeSettling: () => true })
      // Gone before reading anything: the reply stream never pulls for the terminal frames.
      await response.body!.cancel()
      // The settlement starts on the next turn, the client gone or not; then it fails.
      await new Promise(resolve => setImmediate(resolve))
      fail(new Error('a bug in the settlement'))
      await new Promise(resolve => setImmediate(resolve))
    })

    test('a stream that failed or was cut is not sent early: it settles (or releases) first, as before', async () => {
      const asked: number[] = []
      const { outcomes, complete } = recorder()
      const response = await streamResponse({ events: events([delta('cut')]).iterable, encoder: new ChatCompletionsStreamEncoder(meta), observe: () => {}, complete, sendBeforeSettling: () => (asked.push(1), true) })
      expect(outcomes).toEqual(['failed'])
      expect(asked).toHaveLength(0)
      expect(await response.text()).toContain('"error"')
    })
  })
})
