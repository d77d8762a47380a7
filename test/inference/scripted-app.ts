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
  backends: [{ provider: 'fake', model: 'upstream-model', weight: 1, uncensored: false }], capabilities,
}
const ENCRYPTED: ModelRoute = { ...ROUTE, id: 'scripted:encrypted', level: 'encrypted' }
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

export async function setup(script: Script) {
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
      if (id === 'scripted') return ROUTE
      if (id === 'scripted:encrypted') return ENCRYPTED
      throw new ApiError('invalid_request', `unknown model ${id}`, 'model')
    },
  }
  const app = new Elysia({ normalize: false })
    .use(requestContext(silentLogger))
    .use(inferenceRoutes(t.deps.keys, t.deps.limits, catalog, { metering: t.deps.metering, router, logger: silentLogger, clock: t.clock }))
  current = Bun.serve({ port: 0, fetch: app.fetch })
  const org = await t.createOrg('acme', CREDIT)
  await t.deps.database.client.execute({ sql: "UPDATE orgs SET plan_id = 'payg' WHERE id = ?", args: [org.orgId] })
  const client = new OpenAI({ apiKey: org.adminKey, baseURL: `http://127.0.0.1:${current.port}/v1`, maxRetries: 0 })
  const charged = async () => CREDIT - (await t.deps.balance(org.orgId)).prepaidNanos
  const post = (body: unknown, signal?: AbortSignal) =>
    fetch(`http://127.0.0.1:${current!.port}/v1/responses`, {
      method: 'POST',
      headers: { authorization: `Bearer ${org.adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal,
    })
  return { org, client, charged, post }
}

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

