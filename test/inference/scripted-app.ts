import { afterEach } from 'bun:test'
import { Elysia } from 'elysia'
import OpenAI from 'openai'
import type { ModelRoute } from '../../src/catalog/types'
import { ApiError } from '../../src/http/errors'
import { requestContext } from '../../src/http/request-context'
import { decodeSse } from '../../src/http/sse'
import type { ChatEvent, ChatRequest } from '../../src/inference/canonical'
import type { ChatRouter } from '../../src/inference/pipeline'
import { inferenceRoutes } from '../../src/inference/routes'
import { silentLogger } from '../../src/observability/logger'
import { buildTestApp, type TestApp } from '../support/harness'

// The inference routes over a scripted router (no provider): what a test's script yields is what
// the dialect encodes. `seen` holds every canonical request the router was asked to open.

export const PRICE = { inputPerMillion: 1_000_000_000n, outputPerMillion: 2_000_000_000n }
const capabilities = { tools: true, reasoning: true, vision: true, supportsWebFetch: false, supportsWebSearch: false, fileInput: true }
export const ROUTE: ModelRoute = {
  id: 'scripted', modelId: 'scripted', level: 'anonymous', routing: 'ordered', price: PRICE, contextLength: 8192, maxOutputTokens: 1024,
  backends: [{ provider: 'fake', model: 'upstream-model', weight: 1, uncensored: false, thinking: 'budget' }], capabilities,
}
export const CREDIT = 10_000_000_000n

export type Script = (request: ChatRequest, signal: AbortSignal) => AsyncIterable<ChatEvent> | Promise<never>

export let t: TestApp
let current: ReturnType<typeof Bun.serve> | undefined
/** The scripted app's HTTP server. */
export const server = () => current
export let seen: ChatRequest[] = []
afterEach(async () => {
  current?.stop(true)
  current = undefined
  await t?.close()
  t = undefined as unknown as TestApp
})

/**
 * A fresh app whose model `scripted` (and `scripted:encrypted`) answers with `script`, and a
 * pay-as-you-go org with CREDIT. `capabilities` narrows the model's (e.g. no vision); `post`
 * sends a raw request to `path` (default /v1/responses).
 */
export async function setup(script: Script, options: { capabilities?: Partial<ModelRoute['capabilities']>; path?: string } = {}) {
  const route: ModelRoute = options.capabilities ? { ...ROUTE, capabilities: { ...ROUTE.capabilities, ...options.capabilities } } : ROUTE
  const encrypted: ModelRoute = { ...route, id: 'scripted:encrypted', level: 'encrypted' }
  t = await buildTestApp()
  seen = []
  const router: ChatRouter = {
    async open(_route, request, options) {
      seen.push(request)
      const events = await script(request, options.signal)
      return { events, backend: ROUTE.backends[0]!, provider: { id: 'fake', stream: async () => events } }
    },
  }
  const catalog = {
    resolve(id: string) {
      if (id === 'scripted') return route
      if (id === 'scripted:encrypted') return encrypted
      throw new ApiError('invalid_request', `unknown model ${id}`, 'model')
    },
  }
  const app = new Elysia({ normalize: false })
    .use(requestContext(silentLogger))
    .use(inferenceRoutes(t.deps.keys, t.deps.limits, catalog, { metering: t.deps.metering, router, logger: silentLogger, clock: t.clock, lifecycle: t.deps.lifecycle }))
  current = Bun.serve({ port: 0, fetch: app.fetch })
  const org = await t.createOrg('acme', CREDIT)
  await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [org.orgId] })
  const client = new OpenAI({ apiKey: org.adminKey, baseURL: `http://127.0.0.1:${current.port}/v1`, maxRetries: 0 })
  const charged = async () => CREDIT - (await t.deps.balance(org.orgId)).prepaidNanos
  const post = (body: unknown, signal?: AbortSignal) =>
    fetch(`http://127.0.0.1:${current!.port}${options.path ?? '/v1/responses'}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    })
  /** In process, without a socket: the request's signal is the caller's own. */
  const handle = (request: Request) => app.handle(request)
  return { org, client, charged, post, handle }
}

/** A plain text answer ("Hello, world") with 100 input and 50 output tokens, and what it costs at PRICE. */
export const usage = { inputTokens: 100, outputTokens: 50, webSearchRequests: 0, webFetchRequests: 0 }
export const textReply: ChatEvent[] = [
  { type: 'response-start', id: 'up-1', model: 'upstream-model', createdAt: 0 },
  { type: 'text-start', block: 0 },
  { type: 'text-delta', block: 0, delta: 'Hello' },
  { type: 'text-delta', block: 0, delta: ', world' },
  { type: 'text-end', block: 0 },
  { type: 'finish', reason: 'stop', usage },
]
export const EXPECTED_CHARGE = 100n * 1000n + 50n * 2000n

export async function* events(list: ChatEvent[], hang?: AbortSignal): AsyncGenerator<ChatEvent> {
  for (const event of list) yield event
  if (hang) await new Promise((_, reject) => hang.addEventListener('abort', () => reject(hang.reason), { once: true }))
}

/** Every SSE event of a raw stream: its `event:` name and parsed data. */
export async function sseEvents(response: Response): Promise<Array<{ event: string | undefined; data: any }>> {
  const all = []
  for await (const frame of decodeSse(response.body!)) all.push({ event: frame.event, data: JSON.parse(frame.data) })
  return all
}

