import { describe, expect, test } from 'bun:test'
import type { Backend, ModelRoute } from '../../src/catalog/types'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { replay } from '../../src/providers/replay'
import { Router, type OpenedStream } from '../../src/providers/router'
import { UpstreamError, type Provider, type ProviderCall, type UpstreamErrorKind } from '../../src/providers/types'
import { FakeClock } from '../support/fake-clock'

// The router's fallback after a stream opened, before its first output (providers/before-output.ts).

const usage = { inputTokens: 1, outputTokens: 1, webSearchRequests: 0, webFetchRequests: 0 }
const start = (id: string): ChatEvent => ({ type: 'response-start', id, model: id, createdAt: 0 })
const failed = (kind: UpstreamErrorKind): ChatEvent => ({ type: 'error', error: new UpstreamError(kind, `${kind} after the opening`, 'fake', 'm') })
const answer = (id: string): ChatEvent[] => [
  start(id),
  { type: 'text-start', block: 0 },
  { type: 'text-delta', block: 0, delta: `hello from ${id}` },
  { type: 'text-end', block: 0 },
  { type: 'finish', reason: 'stop', usage },
]

/** A provider whose stream opens and then plays `events` (live, or read whole). */
class ScriptedProvider implements Provider {
  readonly id: string
  returned = 0
  constructor(
    readonly name: string,
    private readonly events: ChatEvent[],
    private readonly whole = false,
  ) {
    this.id = `fake:${name}`
  }
  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    if (this.whole) return replay(this.events, call.signal)
    const provider = this
    const events = this.events
    return (async function* () {
      try {
        yield* events
      } finally {
        provider.returned += 1
      }
    })()
  }
}

function route(...names: string[]): ModelRoute {
  const backends: Backend[] = names.map(name => ({ provider: name, model: `${name}-model`, weight: 1, uncensored: false, thinking: 'budget' }))
  return {
    id: 'm', modelId: 'm', level: 'anonymous', backends, routing: 'ordered',
    price: { inputPerMillion: 1n, outputPerMillion: 1n },
    capabilities: { tools: false, reasoning: false, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false },
    contextLength: 1000, maxOutputTokens: 100,
  }
}

function setup(...providers: ScriptedProvider[]) {
  const router = new Router(new Map(providers.map(provider => [provider.name, provider])), new FakeClock())
  const switched: OpenedStream[] = []
  const controller = new AbortController()
  const open = () => router.open(route(...providers.map(provider => provider.name)), { model: 'm', stream: true } as ChatRequest, { signal: controller.signal, requestId: 'req_1', onFallback: opened => switched.push(opened) })
  return { router, open, switched, controller }
}

/** Every event, read as the reply does (`iterator.next()` looked up each time). */
async function drain(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const iterator = events[Symbol.asyncIterator]()
  const out: ChatEvent[] = []
  for (let step = await iterator.next(); step.done !== true; step = await iterator.next()) out.push(step.value)
  return out
}

/** Every event, read with for await (which keeps the first `next`), as collect() does. */
async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const out: ChatEvent[] = []
  for await (const event of events) out.push(event)
  return out
}

describe('fallback before the first output', () => {
  test.each([
    ['the reply', drain],
    ['for await', collect],
  ] as const)('a retryable error after the opening moves to the next backend; read by %s, only its events arrive', async (_, read) => {
    const a = new ScriptedProvider('a', [start('a'), { type: 'text-start', block: 0 }, failed('server')])
    const b = new ScriptedProvider('b', answer('b'))
    const { open, router, switched } = setup(a, b)
    const opened = await open()
    expect(opened.backend.provider).toBe('a')
    expect(await read(opened.events)).toEqual(answer('b'))
    expect(a.returned).toBe(1)
    expect(router.isCoolingDown({ provider: 'a', model: 'a-model' })).toBe(true)
    expect(switched.map(next => [next.backend.provider, next.failures.map(error => error.kind)])).toEqual([['b', ['server']]])
  })

  test('each backend that fails after its opening passes the call on, until one answers', async () => {
    const a = new ScriptedProvider('a', [start('a'), failed('rate-limited')])
    const b = new ScriptedProvider('b', [start('b'), failed('timeout')])
    const c = new ScriptedProvider('c', answer('c'))
    const { open, switched } = setup(a, b, c)
    expect(await drain((await open()).events)).toEqual(answer('c'))
    expect(switched.map(next => next.backend.provider)).toEqual(['b', 'c'])
  })

  test('a failure that is not retryable, or after output, goes to the client as it came', async () => {
    const notRetryable = [start('a'), failed('bad-request')]
    const afterOutput = [start('a'), { type: 'text-start', block: 0 }, { type: 'text-delta', block: 0, delta: 'Once' }, failed('server')] as ChatEvent[]
    for (const events of [notRetryable, afterOutput]) {
      const b = new ScriptedProvider('b', answer('b'))
      const { open, switched } = setup(new ScriptedProvider('a', events), b)
      expect(await drain((await open()).events)).toEqual(events)
      expect(switched).toEqual([])
    }
  })

  test('once the client has gone, nothing else is tried', async () => {
    const { open, switched, controller } = setup(new ScriptedProvider('a', [start('a'), failed('server')]), new ScriptedProvider('b', answer('b')))
    const opened = await open()
    controller.abort()
    expect((await drain(opened.events)).map(event => event.type)).toEqual(['response-start', 'error'])
    expect(switched).toEqual([])
  })

  test('a stream read whole that failed after its opening falls back when opened', async () => {
    const { open } = setup(new ScriptedProvider('a', [start('a'), failed('server')], true), new ScriptedProvider('b', answer('b'), true))
    const opened = await open()
    expect([opened.backend.provider, opened.failures.map(error => error.kind)]).toEqual(['b', ['server']])
  })

  test("the last backend's stream is not wrapped: no cost where nothing is left to fall back to", async () => {
    const events = (async function* () {})()
    const only: Provider = { id: 'fake:only', stream: async () => events }
    const router = new Router(new Map([['only', only]]), new FakeClock())
    const opened = await router.open(route('only'), { model: 'm', stream: true } as ChatRequest, { signal: new AbortController().signal, requestId: 'req_1' })
    expect(opened.events).toBe(events)
  })
})
