import { describe, expect, test } from 'bun:test'
import type { Backend, ModelRoute } from '../../src/catalog/types'
import type { ProviderConfig } from '../../src/config/config'
import { ApiError } from '../../src/http/errors'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import { createProviders } from '../../src/providers/registry'
import { COOL_DOWN_MS, Router } from '../../src/providers/router'
import { UpstreamError, type Provider, type ProviderCall, type UpstreamErrorKind } from '../../src/providers/types'
import { FakeClock } from '../support/fake-clock'

/** What a fake provider does on its next call: open a stream, or reject before any event. */
type Outcome = 'ok' | UpstreamErrorKind | Error

/** A provider that follows a script (then keeps answering `fallback`) and records its calls. */
class FakeProvider implements Provider {
  readonly calls: ProviderCall[] = []
  private readonly script: Outcome[]
  constructor(
    readonly name: string,
    script: Outcome[] = [],
    private readonly fallback: Outcome = 'ok',
  ) {
    this.id = `fake:${name}`
    this.script = [...script]
  }
  readonly id: string
  async stream(call: ProviderCall): Promise<AsyncIterable<ChatEvent>> {
    this.calls.push(call)
    const outcome = this.script.shift() ?? this.fallback
    if (outcome instanceof Error) throw outcome
    if (outcome !== 'ok') throw new UpstreamError(outcome, `${this.name} ${outcome}`, this.id, call.upstreamModel, { status: 503 })
    const events: ChatEvent[] = [{ type: 'response-start', id: `from-${this.name}`, model: call.upstreamModel, createdAt: 0 }]
    return (async function* () {
      yield* events
    })()
  }
  /** The upstream models it was called with, in order. */
  get models(): string[] {
    return this.calls.map(call => call.upstreamModel)
  }
}

function backend(provider: string, model = `${provider}-model`, extra: Partial<Backend> = {}): Backend {
  return { provider, model, weight: 1, uncensored: false, thinking: 'budget', ...extra }
}

function route(backends: Backend[], routing: ModelRoute['routing'] = 'ordered', id = 'm'): ModelRoute {
  return {
    id,
    modelId: id,
    level: 'anonymous',
    backends,
    routing,
    price: { inputPerMillion: 1n, outputPerMillion: 1n },
    capabilities: { tools: false, reasoning: false, vision: false, fileInput: false, supportsWebFetch: false, supportsWebSearch: false },
    contextLength: 1000,
    maxOutputTokens: 100,
  }
}

function setup(...providers: FakeProvider[]) {
  const clock = new FakeClock()
  const router = new Router(new Map(providers.map(provider => [provider.name, provider])), clock)
  const request = { model: 'm', stream: true } as ChatRequest
  const open = (target: ModelRoute, options: { uncensored?: boolean; signal?: AbortSignal } = {}) =>
    router.open(target, request, { signal: options.signal ?? new AbortController().signal, requestId: 'req_1', uncensored: options.uncensored })
  /** Which provider served each of `count` successive requests. */
  const servedBy = async (target: ModelRoute, count: number, options: { uncensored?: boolean } = {}) => {
    const served: string[] = []
    for (let index = 0; index < count; index++) served.push((await open(target, options)).backend.provider)
    return served
  }
  return { clock, router, request, open, servedBy }
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error('expected a rejection')
}

async function firstEvent(events: AsyncIterable<ChatEvent>): Promise<ChatEvent> {
  for await (const event of events) return event
  throw new Error('no events')
}

describe('ordered routing', () => {
  test('the first backend serves, with the request, its upstream model, the signal and the request id', async () => {
    const a = new FakeProvider('a')
    const b = new FakeProvider('b')
    const { open, request } = setup(a, b)
    const controller = new AbortController()
    const opened = await open(route([backend('a', 'up-a'), backend('b')]), { signal: controller.signal })
    expect(opened.backend).toEqual(backend('a', 'up-a'))
    expect(opened.provider).toBe(a)
    expect(opened.failures).toEqual([])
    expect(await firstEvent(opened.events)).toMatchObject({ type: 'response-start', id: 'from-a', model: 'up-a' })
    expect(a.calls).toHaveLength(1)
    expect(a.calls[0]!.request).toBe(request)
    expect(a.calls[0]!.signal).toBe(controller.signal)
    expect(a.calls[0]!.requestId).toBe('req_1')
    expect(b.calls).toHaveLength(0)
  })

  test('weights do not change the order of an ordered route', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'))
    expect(await servedBy(route([backend('a'), backend('b', 'b-model', { weight: 100 })]), 4)).toEqual(['a', 'a', 'a', 'a'])
  })

  test.each(['connection', 'timeout', 'server', 'rate-limited'] as const)('%s before the first event falls back to the next backend', async kind => {
    const a = new FakeProvider('a', [kind])
    const b = new FakeProvider('b')
    const { open, router } = setup(a, b)
    const opened = await open(route([backend('a'), backend('b')]))
    expect(opened.backend.provider).toBe('b')
    expect(opened.provider).toBe(b)
    expect(await firstEvent(opened.events)).toMatchObject({ id: 'from-b' })
    expect(opened.failures.map(error => error.kind)).toEqual([kind])
    expect(router.isCoolingDown(backend('a'))).toBe(true)
    expect(router.isCoolingDown(backend('b'))).toBe(false)
  })

  test.each(['auth', 'bad-request', 'not-found', 'aborted'] as const)('%s is rethrown without trying another backend or cooling down', async kind => {
    const a = new FakeProvider('a', [kind])
    const b = new FakeProvider('b')
    const { open, router } = setup(a, b)
    const error = await rejection(open(route([backend('a'), backend('b')])))
    expect(error).toBeInstanceOf(UpstreamError)
    expect((error as UpstreamError).kind).toBe(kind)
    expect(b.calls).toHaveLength(0)
    expect(router.isCoolingDown(backend('a'))).toBe(false)
  })

  test('an error that is not an UpstreamError is rethrown as is, without fallback', async () => {
    const bug = new TypeError('adapter bug')
    const b = new FakeProvider('b')
    const { open } = setup(new FakeProvider('a', [bug]), b)
    expect(await rejection(open(route([backend('a'), backend('b')])))).toBe(bug)
    expect(b.calls).toHaveLength(0)
  })

  test('a cooling backend is passed over for 30 s on the injected clock, then first again', async () => {
    const a = new FakeProvider('a', ['server'])
    const b = new FakeProvider('b')
    const { clock, servedBy } = setup(a, b)
    const target = route([backend('a'), backend('b')])
    expect(await servedBy(target, 1)).toEqual(['b'])
    clock.advance(COOL_DOWN_MS - 1)
    expect(await servedBy(target, 2)).toEqual(['b', 'b'])
    expect(a.calls).toHaveLength(1)
    clock.advance(1)
    expect(await servedBy(target, 2)).toEqual(['a', 'a'])
    expect(COOL_DOWN_MS).toBe(30_000)
  })

  test('when every backend fails, the last error is rethrown; the last one tried does not cool down', async () => {
    const a = new FakeProvider('a', ['connection'])
    const b = new FakeProvider('b', ['timeout'])
    const c = new FakeProvider('c', ['server'])
    const { open, router } = setup(a, b, c)
    const error = (await rejection(open(route([backend('a'), backend('b'), backend('c')])))) as UpstreamError
    expect(error.message).toBe('c server')
    expect([a.calls.length, b.calls.length, c.calls.length]).toEqual([1, 1, 1])
    expect([router.isCoolingDown(backend('a')), router.isCoolingDown(backend('b')), router.isCoolingDown(backend('c'))]).toEqual([true, true, false])
  })

  test('a single backend never cools down', async () => {
    const a = new FakeProvider('a', ['server', 'server'])
    const { open, router, servedBy } = setup(a)
    const target = route([backend('a')])
    expect(((await rejection(open(target))) as UpstreamError).kind).toBe('server')
    expect(router.isCoolingDown(backend('a'))).toBe(false)
    expect(((await rejection(open(target))) as UpstreamError).kind).toBe('server')
    expect(await servedBy(target, 1)).toEqual(['a'])
  })

  test('cooling backends are still tried, in order, when nothing else is left', async () => {
    // First request: a and b fail (and cool down), c serves.
    const a = new FakeProvider('a', ['server', 'ok'])
    const b = new FakeProvider('b', ['server'])
    const c = new FakeProvider('c', ['ok', 'server'])
    const { open, router } = setup(a, b, c)
    const target = route([backend('a'), backend('b'), backend('c')])
    expect((await open(target)).backend.provider).toBe('c')
    // Second request: c goes first (not cooling); it fails, and cooling a is the next resort.
    const opened = await open(target)
    expect(opened.backend.provider).toBe('a')
    expect(opened.failures.map(error => error.provider)).toEqual(['fake:c'])
    expect(b.calls).toHaveLength(1)
    // A cooling backend that served is no longer cooling.
    expect(router.isCoolingDown(backend('a'))).toBe(false)
    expect(router.isCoolingDown(backend('c'))).toBe(true)
  })

  test('the cool-down belongs to the backend (provider and model), shared by every route that binds it', async () => {
    const a = new FakeProvider('a', ['server'])
    const b = new FakeProvider('b')
    const { servedBy } = setup(a, b)
    expect(await servedBy(route([backend('a', 'x'), backend('b')], 'ordered', 'one'), 1)).toEqual(['b'])
    // Another route on the same provider and model also passes it over…
    expect(await servedBy(route([backend('a', 'x'), backend('b')], 'ordered', 'two'), 1)).toEqual(['b'])
    // …but the same provider with another upstream model is a different backend.
    expect(await servedBy(route([backend('a', 'y'), backend('b')], 'ordered', 'three'), 1)).toEqual(['a'])
    expect(a.models).toEqual(['x', 'y'])
  })

  test('once the client has gone, nothing else is tried', async () => {
    const controller = new AbortController()
    const a = new FakeProvider('a')
    const b = new FakeProvider('b')
    a.stream = async call => {
      a.calls.push(call)
      controller.abort()
      // Even a retryable-looking failure is final once the signal is aborted.
      throw new UpstreamError('connection', 'socket closed', a.id, call.upstreamModel)
    }
    const { open, router } = setup(a, b)
    const error = (await rejection(open(route([backend('a'), backend('b')]), { signal: controller.signal }))) as UpstreamError
    expect(error.kind).toBe('connection')
    expect(b.calls).toHaveLength(0)
    expect(router.isCoolingDown(backend('a'))).toBe(false)
  })

  test("only the last attempt is lent the call's controller: an earlier one's deadline must not end the call", async () => {
    const controller = new AbortController()
    const a = new FakeProvider('a', ['timeout'])
    const b = new FakeProvider('b')
    const { router, request } = setup(a, b)
    const options = { signal: controller.signal, controller, requestId: 'req_1' }
    await router.open(route([backend('a'), backend('b')]), request, options)
    expect(a.calls[0]!.abortable).toBeUndefined()
    expect(b.calls[0]!.abortable).toBe(controller)
    // A single backend is its own last attempt.
    await router.open(route([backend('b')]), request, options)
    expect(b.calls[1]!.abortable).toBe(controller)
  })

  test('a backend whose provider is not registered is a wiring error', async () => {
    const { open } = setup(new FakeProvider('a'))
    const error = await rejection(open(route([backend('ghost'), backend('a')])))
    expect(error).toBeInstanceOf(Error)
    expect((error as Error).message).toContain('no provider "ghost"')
  })
})

describe('round-robin routing', () => {
  test('equal weights rotate the starting backend', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'), new FakeProvider('c'))
    expect(await servedBy(route([backend('a'), backend('b'), backend('c')], 'round-robin'), 7)).toEqual(['a', 'b', 'c', 'a', 'b', 'c', 'a'])
  })

  test('weights spread the start smoothly in proportion', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'))
    expect(await servedBy(route([backend('a', 'a-model', { weight: 2 }), backend('b')], 'round-robin'), 6)).toEqual(['a', 'b', 'a', 'a', 'b', 'a'])
    const { servedBy: servedBy3 } = setup(new FakeProvider('a'), new FakeProvider('b'), new FakeProvider('c'))
    const served = await servedBy3(route([backend('a', 'a-model', { weight: 5 }), backend('b', 'b-model', { weight: 3 }), backend('c', 'c-model', { weight: 2 })], 'round-robin'), 100)
    expect([served.filter(name => name === 'a').length, served.filter(name => name === 'b').length, served.filter(name => name === 'c').length]).toEqual([50, 30, 20])
    // Smooth: the heaviest backend never starts more than twice in a row at 5:3:2.
    expect(served.join('')).not.toContain('aaa')
  })

  test('a failed start falls back to the next backend in config order, wrapping around', async () => {
    const a = new FakeProvider('a')
    const b = new FakeProvider('b')
    const c = new FakeProvider('c', ['server'])
    const { open } = setup(a, b, c)
    const target = route([backend('a'), backend('b'), backend('c')], 'round-robin')
    expect((await open(target)).backend.provider).toBe('a')
    expect((await open(target)).backend.provider).toBe('b')
    // Third start is c: it fails, and the next after c is a.
    const opened = await open(target)
    expect(opened.backend.provider).toBe('a')
    expect(opened.failures.map(error => error.provider)).toEqual(['fake:c'])
  })

  test('a cooling start moves behind the others', async () => {
    const a = new FakeProvider('a', ['server'])
    const b = new FakeProvider('b')
    const { clock, servedBy } = setup(a, b)
    const target = route([backend('a'), backend('b')], 'round-robin')
    // a fails and cools; b serves every request while it does, whatever the rotation says.
    expect(await servedBy(target, 4)).toEqual(['b', 'b', 'b', 'b'])
    clock.advance(COOL_DOWN_MS)
    expect(await servedBy(target, 2)).toEqual(['a', 'b'])
  })

  test('each route has its own rotation', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'))
    const one = route([backend('a'), backend('b')], 'round-robin', 'one')
    const two = route([backend('a'), backend('b')], 'round-robin', 'two')
    expect(await servedBy(one, 1)).toEqual(['a'])
    expect(await servedBy(two, 1)).toEqual(['a'])
    expect(await servedBy(one, 1)).toEqual(['b'])
  })
})

describe('uncensored requests', () => {
  const bindings = [backend('a'), backend('b', 'b-model', { uncensored: true }), backend('c', 'c-model', { uncensored: true })]

  test('only bindings marked uncensored serve them; other requests may use any', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'), new FakeProvider('c'))
    expect(await servedBy(route(bindings), 2, { uncensored: true })).toEqual(['b', 'b'])
    expect(await servedBy(route(bindings), 1, { uncensored: false })).toEqual(['a'])
    expect(await servedBy(route(bindings), 1)).toEqual(['a'])
  })

  test('fallback stays among the uncensored bindings', async () => {
    const a = new FakeProvider('a')
    const { open } = setup(a, new FakeProvider('b', ['server']), new FakeProvider('c', ['server']))
    const error = (await rejection(open(route(bindings), { uncensored: true }))) as UpstreamError
    expect(error.message).toBe('c server')
    expect(a.calls).toHaveLength(0)
  })

  test('round-robin rotates among the uncensored bindings only', async () => {
    const { servedBy } = setup(new FakeProvider('a'), new FakeProvider('b'), new FakeProvider('c'))
    const target = route(bindings, 'round-robin')
    expect(await servedBy(target, 4, { uncensored: true })).toEqual(['b', 'c', 'b', 'c'])
    expect(await servedBy(target, 3)).toEqual(['a', 'b', 'c'])
  })

  test('a route without uncensored bindings is 400 invalid_request', async () => {
    const a = new FakeProvider('a')
    const { open } = setup(a)
    const error = (await rejection(open(route([backend('a')], 'ordered', 'plain'), { uncensored: true }))) as ApiError
    expect(error).toBeInstanceOf(ApiError)
    expect([error.status, error.code, error.param]).toEqual([400, 'invalid_request', 'uncensored'])
    expect(error.message).toContain('plain has no uncensored backend')
    expect(a.calls).toHaveLength(0)
  })
})

describe('createProviders', () => {
  const config = (id: string, type: ProviderConfig['type']): ProviderConfig => ({
    id,
    type,
    baseUrl: type === 'demo' ? undefined : 'http://x',
    apiKey: undefined,
    retention: 'unknown',
    connectTimeoutMs: 10_000,
    idleTimeoutMs: 60_000,
    responseTimeoutMs: 600_000,
  })

  test('one provider per config entry, keyed by config id, built by the factory of its type', () => {
    const seen: ProviderConfig[] = []
    const make = (type: string) => (entry: ProviderConfig) => {
      seen.push(entry)
      return new FakeProvider(`${type}/${entry.id}`)
    }
    const entries = [config('demo', 'demo'), config('vllm-a', 'openai-compatible'), config('claude', 'anthropic'), config('vllm-b', 'openai-compatible')]
    const providers = createProviders({ providers: entries }, { demo: make('demo'), 'openai-compatible': make('oai'), anthropic: make('ant') })
    expect([...providers.keys()]).toEqual(['demo', 'vllm-a', 'claude', 'vllm-b'])
    expect([...providers.values()].map(provider => provider.id)).toEqual(['fake:demo/demo', 'fake:oai/vllm-a', 'fake:ant/claude', 'fake:oai/vllm-b'])
    expect(seen).toEqual(entries)
  })

  test('a configured type without a factory fails, naming the provider', () => {
    expect(() => createProviders({ providers: [config('claude', 'anthropic')] }, { demo: () => new FakeProvider('d') })).toThrow(
      'provider "claude": no adapter for type anthropic in this build',
    )
    // Unused types need no factory.
    expect(createProviders({ providers: [] }, {}).size).toBe(0)
  })

  test('a duplicate id fails rather than shadowing', () => {
    expect(() => createProviders({ providers: [config('d', 'demo'), config('d', 'demo')] }, { demo: () => new FakeProvider('d') })).toThrow('configured twice')
  })
})
