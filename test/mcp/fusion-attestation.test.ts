import { afterEach, beforeEach, expect, test } from 'bun:test'
import type { ModelRoute, PrivacyLevel } from '../../src/catalog/types'
import type { ProviderConfig } from '../../src/config/config'
import type { FusionDeps } from '../../src/fusion/service'
import { ApiError } from '../../src/http/errors'
import type { ChatRouter } from '../../src/inference/pipeline'
import { chatFusionTool } from '../../src/mcp/tools/chat-fusion'
import { DemoProvider } from '../../src/providers/demo/provider'
import { buildTestApp, type TestApp } from '../support/harness'

// svc.chat_fusion on Confidential participants: the tool's structured content carries the same
// attestation fields as the HTTP result (per participant and the judge), from a router that
// reports the attestation each Confidential call was bound to. And web defaults are only
// applied to models that support them (here: tee-a only).

function route(id: string, level: PrivacyLevel, web = false): ModelRoute {
  return {
    id, modelId: id.split(':')[0]!, level, backends: [{ provider: 'demo', model: 'demo', weight: 1, uncensored: false, thinking: 'budget' }], routing: 'ordered',
    price: { inputPerMillion: 100_000_000n, outputPerMillion: 400_000_000n },
    capabilities: { tools: false, reasoning: false, vision: false, supportsWebFetch: web, supportsWebSearch: false, fileInput: false },
    contextLength: 32768, maxOutputTokens: 1024,
  }
}
const ROUTES = new Map([route('tee-a:confidential', 'confidential', true), route('tee-b:confidential', 'confidential'), route('judge:confidential', 'confidential')].map(entry => [entry.id, entry]))
const catalog = { resolve: (id: string) => ROUTES.get(id) ?? (() => { throw new ApiError('invalid_request', `model "${id}" is not in the catalog`, 'model') })() }

const demo = new DemoProvider({ id: 'demo' } as ProviderConfig)
const attestationOf = (id: string) => ({ nonce: 'cd'.repeat(32), signingAddress: `0xsigner-${id}`, signingAlgo: 'ecdsa', proofFormat: 'test-format.v1' })
const router: ChatRouter = {
  async open(target, request, options) {
    const events = await demo.stream({ request, upstreamModel: 'demo', signal: options.signal, requestId: options.requestId })
    return { events, backend: target.backends[0]!, provider: demo, attestation: attestationOf(target.id) }
  },
}

let t: TestApp
let deps: FusionDeps
beforeEach(async () => {
  t = await buildTestApp()
  deps = { pipeline: { ...t.deps.pipeline, router }, catalog, config: { judge: 'judge:confidential', participantTimeoutMs: 1000, judgeTimeoutMs: 1000 }, planOf: async () => ({ planId: 'pro', fusion: true }), billedOutside: t.deps.fusion.billedOutside }
})
afterEach(() => t.close())

test('Confidential participants: attestation per participant and for the judge, as on the route; web defaults only where supported', async () => {
  const org = await t.createOrg()
  const verified = await t.deps.keys.verify(org.adminKey)
  if (!verified.ok) throw new Error('key does not verify')
  const tool = chatFusionTool(catalog, deps, t.deps.web.searchBackend !== null)
  const result = await tool.run(
    { models: ['tee-a:confidential', 'tee-b:confidential'], request_id: crypto.randomUUID(), prompt: 'Attest this.', web_search: false } as never,
    { principal: verified.principal, requestId: 'req-1', httpRequest: new Request('http://localhost/mcp'), signal: new AbortController().signal },
  )
  const structured = result.structured as any
  expect(structured.status).toBe('complete')
  expect(structured.judge).toBe('judge:confidential')
  for (const entry of structured.models) {
    expect(entry.attestation).toEqual({ model: entry.model, nonce: 'cd'.repeat(32), signing_address: `0xsigner-${entry.model}`, signing_algo: 'ecdsa', proof_format: 'test-format.v1' })
  }
  expect(structured.judge_attestation.model).toBe('judge:confidential')
  // web_fetch defaulted on for tee-a (it supports it; no URL in the prompt, so nothing fetched), off for tee-b; web_search opted out.
  expect(structured.models.map((entry: any) => [entry.web_search, entry.web_fetch])).toEqual([[false, true], [false, false]])
})
