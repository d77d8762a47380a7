import Anthropic from '@anthropic-ai/sdk'
import { afterAll, beforeAll } from 'bun:test'
import OpenAI from 'openai'
import type { DepsOverrides } from '../../src/deps'
import { FakeUpstream } from './fake-upstream'
import { buildConfiguredApp, type TestApp } from './harness'

// The gateway as the official SDKs see it: clients for an app served on a socket or reached
// through app.handle, and a configured gateway in front of (fake) HTTP upstreams with an
// organization and both SDKs ready (test/e2e/*, test/documents/*, test/inference/*).

/** The pay-as-you-go plan alone: no allowance, so every charge reaches the prepaid balance. */
export const PAYG_PLAN = 'plans: { payg: { monthly_allowance: "0", fusion: false } }'

/** A config of `providers` and `models` (indented YAML list lines) on the pay-as-you-go plan alone. */
export function paygConfig(providers: string[], models: string[]): string[] {
  return ['providers:', ...providers, 'models:', ...models, PAYG_PLAN]
}

export type UpstreamType = 'openai-compatible' | 'anthropic'

/** A `providers:` flow entry for an HTTP upstream at `baseUrl`, no retention, 5 s connect and idle timeouts. */
export function upstreamProvider(id: string, type: UpstreamType, baseUrl: string, keyEnv: string): string {
  return `  - { id: ${id}, type: ${type}, base_url: "${baseUrl}", api_key_env: ${keyEnv}, retention: none, connect_timeout_ms: 5000, idle_timeout_ms: 5000 }`
}

/** A fetch for an SDK client that hands each request to `t.app.handle`, with no socket. */
export function handleFetch(t: Pick<TestApp, 'app'>) {
  return (input: string | URL | Request, init?: RequestInit) => t.app.handle(input instanceof Request ? input : new Request(String(input), init))
}

type SdkFetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/** The official OpenAI SDK for the gateway at `baseUrl` (its origin; `/v1` is added), without retries. */
export function openAIClient(baseUrl: string, apiKey: string, fetch?: SdkFetch): OpenAI {
  return new OpenAI({ apiKey, baseURL: `${baseUrl}/v1`, maxRetries: 0, ...(fetch ? { fetch } : {}) })
}

/** The official Anthropic SDK for the gateway at `baseUrl` (its origin), without retries. */
export function anthropicClient(baseUrl: string, apiKey: string, fetch?: SdkFetch): Anthropic {
  return new Anthropic({ apiKey, baseURL: baseUrl, maxRetries: 0, ...(fetch ? { fetch } : {}) })
}

/** A Chat Completions stream's text up to the error that ends it (`failure` undefined when it ends cleanly). */
export async function readUntilFailure(stream: AsyncIterable<OpenAI.ChatCompletionChunk>): Promise<{ text: string; failure: unknown }> {
  let text = ''
  try {
    for await (const part of stream) text += part.choices[0]?.delta.content ?? ''
    return { text, failure: undefined }
  } catch (failure) {
    return { text, failure }
  }
}

export interface ServedGateway {
  t: TestApp
  /** Where the gateway listens (127.0.0.1:0). */
  baseUrl: string
  orgId: string
  /** The organization's admin key. */
  key: string
  openai: OpenAI
  anthropic: Anthropic
  /** Stops the socket and the app (not the upstreams: the test owns those). */
  close(): Promise<void>
}

/**
 * A gateway configured by `yaml`, served on a real socket, with an organization holding `credit`
 * nanos (default 10 USD) and both official SDKs using its admin key.
 */
export async function startServedGateway(
  yaml: string | string[],
  env: Record<string, string>,
  options: { credit?: bigint; overrides?: DepsOverrides } = {},
): Promise<ServedGateway> {
  const t = await buildConfiguredApp(yaml, env, options.overrides)
  const baseUrl = t.listen()
  const org = await t.createOrg('acme', options.credit ?? 10_000_000_000n)
  return {
    t, baseUrl, orgId: org.orgId, key: org.adminKey,
    openai: openAIClient(baseUrl, org.adminKey),
    anthropic: anthropicClient(baseUrl, org.adminKey),
    close: () => t.close(),
  }
}

/**
 * Before the calling file's (or describe's) tests, a served gateway whose one model `m` runs on a
 * fake `type` upstream (`up`, model `x`) at 1 USD per million tokens in and out, with
 * `limits` (context_length, max_output_tokens, capabilities…) as YAML pairs; after them, both closed.
 */
export function oneModelGateway(type: UpstreamType, limits: string): { readonly upstream: FakeUpstream; readonly gateway: ServedGateway } {
  const served = {} as { upstream: FakeUpstream; gateway: ServedGateway }
  beforeAll(async () => {
    served.upstream = await FakeUpstream.start()
    served.gateway = await startServedGateway(
      paygConfig(
        [upstreamProvider('up', type, `${served.upstream.url}/v1`, 'UP_KEY')],
        [`  - { id: m, backends: [{ provider: up, model: x }], price: { input_per_mtok: "1", output_per_mtok: "1" }, ${limits} }`],
      ),
      { UP_KEY: 'sk-up-0123456789' },
    )
  })
  afterAll(async () => {
    await served.gateway.close()
    await served.upstream.close()
  })
  return served
}
