// Shared plumbing of the golden translation tests (test/inference/*-golden.test.ts): the
// fixture compare-or-write step, the JSON form fixtures are stored in, and an upstream SSE body
// run through the backend's real decoder and translator into canonical events.

import { UnsupportedRequestError } from '../../src/providers/anthropic/to-upstream'
import { expect } from 'bun:test'
import { existsSync, mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { fileURLToPath } from 'node:url'
import type { ModelRoute } from '../../src/catalog/types'
import { decodeSse } from '../../src/http/sse'
import type { ChatEvent } from '../../src/inference/canonical'
import { AnthropicStreamTranslator } from '../../src/providers/anthropic/from-upstream-stream'
import { fromUpstreamStream } from '../../src/providers/openai-compatible/from-upstream-stream'

/** The HTTP backends every client format is translated to. */
export type Backend = 'openai-compatible' | 'anthropic'

/** Rewrite fixtures instead of comparing (after a deliberate change; review the diff). */
export const UPDATE_GOLDEN = process.env.UPDATE_GOLDEN === '1'

/** test/fixtures/, where every golden file lives. */
export const FIXTURES = new URL('../fixtures/', import.meta.url)

/** Compares `actual` with the stored fixture at `path` (relative to test/fixtures/), or writes it in update mode. */
export async function golden(path: string, actual: string): Promise<void> {
  const url = new URL(path, FIXTURES)
  if (UPDATE_GOLDEN) {
    mkdirSync(dirname(fileURLToPath(url)), { recursive: true })
    await Bun.write(url, actual)
    return
  }
  if (!existsSync(url)) throw new Error(`missing golden fixture ${path}: run with UPDATE_GOLDEN=1 and review it`)
  expect(actual).toBe(await Bun.file(url).text())
}

/** A fixture file's text (an input: a client request or a recorded upstream stream). */
export function fixture(path: string): Promise<string> {
  return Bun.file(new URL(path, FIXTURES)).text()
}

/** The stored JSON form: two-space indented, newline-terminated, through `goldenReplacer`. */
export const goldenJson = (value: unknown) => `${JSON.stringify(value, goldenReplacer, 2)}\n`

/** Bytes and URLs as readable JSON; the bound route by its id; errors with their class name. */
export function goldenReplacer(key: string, value: unknown): unknown {
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString('base64') }
  if (value instanceof URL) return { url: value.href }
  if (key === 'route' && typeof value === 'object' && value !== null) return (value as ModelRoute).id
  if (value instanceof Error) return { ...value, name: value.constructor.name, message: value.message }
  return value
}

/**
 * An upstream SSE body through the backend's real decoder and translator. The provider is named
 * `<backend>:<name>` and answers as `model`; `now` stamps Anthropic's response-start.
 */
export async function upstreamEvents(backend: Backend, sse: string, context: { name: string; model: string; now: number }): Promise<ChatEvent[]> {
  async function* bytes() {
    yield new TextEncoder().encode(sse)
  }
  const events: ChatEvent[] = []
  const provider = `${backend}:${context.name}`
  if (backend === 'openai-compatible') {
    for await (const event of fromUpstreamStream(decodeSse(bytes()), { provider, model: context.model, requestId: 'req_golden' })) events.push(event)
    return events
  }
  const translator = new AnthropicStreamTranslator({ provider, model: context.model }, () => context.now, 'req_golden')
  for await (const frame of decodeSse(bytes())) {
    events.push(...translator.push(frame))
    if (translator.done) return events
  }
  events.push(...translator.end())
  return events
}

/** Recorded events as the provider stream a collector or the pipeline reads. */
export async function* replay(events: ChatEvent[]): AsyncGenerator<ChatEvent> {
  yield* events
}

/** The Anthropic upstream body, or the refusal for what that wire cannot carry (recorded in the fixture). */
export function anthropicBodyOrRefusal(build: () => unknown): unknown {
  try {
    return build()
  } catch (error) {
    if (error instanceof UnsupportedRequestError) return { refused: error.message }
    throw error
  }
}

/** The clock every golden fixture was recorded at. */
export const GOLDEN_NOW = Date.UTC(2026, 0, 15, 12, 0, 0)

/** The catalog route the golden requests are decoded against. */
export const GOLDEN_ROUTE: ModelRoute = {
  id: 'golden', modelId: 'golden', level: 'private', routing: 'ordered', contextLength: 200_000, maxOutputTokens: 8192,
  price: { inputPerMillion: 1_000n, outputPerMillion: 2_000n },
  backends: [{ provider: 'golden', model: 'golden-upstream', weight: 1, uncensored: false, thinking: 'budget' }],
  capabilities: { tools: true, reasoning: true, vision: true, supportsWebFetch: false, supportsWebSearch: false, fileInput: false },
}

/** One golden case: a fixture folder and the upstream stream each backend answers with (test/fixtures/upstream/<backend>/<name>.sse). */
export interface GoldenCase {
  readonly name: string
  readonly streams: Partial<Record<Backend, string>>
}
