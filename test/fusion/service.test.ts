import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import type { ModelRoute, PrivacyLevel } from '../../src/catalog/types'
import type { ProviderConfig } from '../../src/config/config'
import { runFusion, type FusionDeps, type FusionProgress } from '../../src/fusion/service'
import { ApiError } from '../../src/http/errors'
import type { Principal } from '../../src/keys/principal'
import type { ChatEvent } from '../../src/inference/canonical'
import type { ChatRouter } from '../../src/inference/pipeline'
import { DemoProvider } from '../../src/providers/demo/provider'
import { UpstreamError } from '../../src/providers/types'
import { buildTestApp, type TestApp } from '../support/harness'

// runFusion as a plain function (what the MCP tool svc.chat_fusion calls), on a catalog that
// offers the Confidential level and a router that reports the attestation each Confidential call
// was bound to: the level rules and the attestation fields of the result, without HTTP. The
// same over HTTP against the simulated TEE backend is test/tee/fusion-confidential.test.ts.

function route(id: string, level: PrivacyLevel): ModelRoute {
  return {
    id, modelId: id.split(':')[0]!, level, backends: [{ provider: 'demo', model: 'demo', weight: 1, uncensored: false }], routing: 'ordered',
    price: { inputPerMillion: 100_000_000n, outputPerMillion: 400_000_000n },
    capabilities: { tools: false, reasoning: false, vision: false, supportsWebFetch: false, supportsWebSearch: false, fileInput: false },
    contextLength: 32768, maxOutputTokens: 1024,
  }
}
const ROUTES = new Map([route('tee-a:confidential', 'confidential'), route('tee-b:confidential', 'confidential'), route('judge', 'private'), route('judge:confidential', 'confidential'), route('open-a', 'anonymous'), route('open-b', 'private')].map(entry => [entry.id, entry]))

const demo = new DemoProvider({ id: 'demo' } as ProviderConfig)
const attestationOf = (id: string) => ({ nonce: `${'ab'.repeat(31)}${id.length.toString(16).padStart(2, '0')}`, signingAddress: `0xsigner-${id}`, signingAlgo: 'ecdsa', proofFormat: 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2' })
const router: ChatRouter = {
  async open(target, request, options) {
    const events = await demo.stream({ request, upstreamModel: 'demo', signal: options.signal, requestId: options.requestId })
    return { events, backend: target.backends[0]!, provider: demo, ...(target.level === 'confidential' ? { attestation: attestationOf(target.id) } : {}) }
  },
}

let t: TestApp
let deps: FusionDeps
let principal: Principal
beforeEach(async () => {
  t = await buildTestApp()
  const org = await t.createOrg()
  const verified = await t.deps.keys.verify(org.adminKey)
  if (!verified.ok) throw new Error('key does not verify')
  principal = verified.principal
  deps = {
    pipeline: { ...t.deps.pipeline, router },
    catalog: { resolve: id => ROUTES.get(id) ?? (() => { throw new ApiError('invalid_request', `model "${id}" is not in the catalog`, 'model') })() },
    config: { judge: 'judge', participantTimeoutMs: 1000, judgeTimeoutMs: 1000 },
    planOf: async () => ({ planId: 'pro', fusion: true }),
    billedOutside: t.deps.fusion.billedOutside,
  }
})
afterEach(async () => {
  await t.close()
})

const messages = [{ role: 'user' as const, content: 'Attest this.' }]

describe('runFusion, the service behind the route and the MCP tool', () => {
  test('Confidential participants: the judge runs Confidential and every part carries its attestation fields', async () => {
    const progress: FusionProgress['type'][] = []
    const result = await runFusion(deps, {
      principal, request: { models: ['tee-a:confidential', 'tee-b:confidential'], messages }, requestId: 'req-1', signal: new AbortController().signal,
      onProgress: event => progress.push(event.type),
    })
    expect(result.status).toBe('complete')
    expect(result.judge).toBe('judge:confidential')
    for (const entry of result.models) {
      const expected = attestationOf(entry.id)
      expect(entry.attestation).toEqual({ model: entry.id, nonce: expected.nonce, signing_address: expected.signingAddress, signing_algo: 'ecdsa', proof_format: expected.proofFormat })
    }
    expect(result.judge_attestation).toEqual({
      model: 'judge:confidential', nonce: attestationOf('judge:confidential').nonce, signing_address: '0xsigner-judge:confidential', signing_algo: 'ecdsa',
      proof_format: 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2',
    })
    // Synthesis deltas go to onSynthesisDelta (the event stream's), not to progress.
    expect(progress).toEqual(['participant.started', 'participant.started', 'participant.finished', 'participant.finished', 'synthesis.started'])
  })

  test('a participant its model refuses is announced started and failed: MCP progress reaches its total', async () => {
    // QA: a refused participant had no "started" step, so progress stopped one short of 2n + 1.
    const small = { ...ROUTES.get('open-b')!, id: 'small', modelId: 'small', maxOutputTokens: 10 }
    deps.catalog = { resolve: id => (id === 'small' ? small : ROUTES.get(id)!) }
    const progress: string[] = []
    const result = await runFusion(deps, {
      principal, request: { models: ['open-a', 'small'], messages, max_tokens: 100 }, requestId: 'req-refused', signal: new AbortController().signal,
      onProgress: event => progress.push(event.type),
    })
    expect(result.status).toBe('partial')
    expect(progress.sort()).toEqual(['participant.failed', 'participant.finished', 'participant.started', 'participant.started', 'synthesis.started'])
  })

  test('a client that leaves: nothing more is announced, and no judge starts', async () => {
    // QA: after an MCP cancel the progress went on ("b: failed (provider_error) … aborted", then
    // "judge: writing the synthesis"), and a judge that was never called was logged.
    const opened: string[] = []
    deps.pipeline = {
      ...deps.pipeline,
      router: {
        async open(target, request, options) {
          opened.push(target.id)
          if (target.id !== 'open-b') return router.open(target, request, options)
          const signal = options.signal
          async function* events(): AsyncIterable<ChatEvent> {
            await new Promise((_, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }))
          }
          return { events: events(), backend: target.backends[0]!, provider: demo }
        },
      },
    }
    const controller = new AbortController()
    const progress: string[] = []
    await runFusion(deps, {
      principal, request: { models: ['open-a', 'open-b'], messages }, requestId: 'req-left', signal: controller.signal,
      onProgress: event => {
        progress.push(event.type)
        if (event.type === 'participant.finished') controller.abort()
      },
    }).catch(() => undefined)
    expect(progress).toEqual(['participant.started', 'participant.started', 'participant.finished'])
    expect(opened.sort()).toEqual(['open-a', 'open-b'])
  })

  test('a Confidential judge that fails after its synthesis streamed is charged, and its attestation is still reported', async () => {
    // The judge's stream: two deltas, then the backend fails mid-stream.
    deps.pipeline = {
      ...deps.pipeline,
      router: {
        async open(target, request, options) {
          if (target.modelId !== 'judge') return router.open(target, request, options)
          async function* events(): AsyncIterable<ChatEvent> {
            yield { type: 'response-start', id: 'r', model: 'm', createdAt: 0, inputTokens: 300 }
            yield { type: 'text-start', block: 0 }
            yield { type: 'text-delta', block: 0, delta: 'Both are ' }
            yield { type: 'text-delta', block: 0, delta: 'attested.' }
            yield { type: 'error', error: new UpstreamError('connection', 'reset', 'demo', 'demo') }
          }
          return { events: events(), backend: target.backends[0]!, provider: demo, attestation: attestationOf(target.id) }
        },
      },
    }
    const sent: string[] = []
    const result = await runFusion(deps, {
      principal, request: { models: ['tee-a:confidential', 'tee-b:confidential'], messages }, requestId: 'req-6', signal: new AbortController().signal,
      onSynthesisDelta: delta => (sent.push(delta), true),
    })
    expect(sent.join('')).toBe('Both are attested.')
    expect(result).toMatchObject({ status: 'partial', synthesis: '', synthesis_error_code: 'provider_error', synthesis_prompt_tokens: 300, synthesis_tokens: 5 })
    expect(result.judge_attestation).toEqual({
      model: 'judge:confidential', nonce: attestationOf('judge:confidential').nonce, signing_address: '0xsigner-judge:confidential', signing_algo: 'ecdsa',
      proof_format: 'dstack-tdx-nvgpu.addr-nonce.e2ee-nearai.v2',
    })
  })

  test('every participant refused by its adapter only at its call (no check beforehand): the run is refused with that 400, nothing charged', async () => {
    // An adapter's refusal comes after the part's admission: it still called no provider.
    deps.pipeline = {
      ...deps.pipeline,
      router: {
        async open(target) {
          throw new UpstreamError('bad-request', `${target.id} cannot carry this`, 'demo', 'demo', { phase: 'adapter', param: 'temperature' })
        },
      },
    }
    const before = (await t.deps.balance(principal.orgId)).prepaidNanos
    await expect(runFusion(deps, { principal, request: { models: ['open-a', 'open-b'], messages }, requestId: 'req-7', signal: new AbortController().signal }))
      .rejects.toMatchObject({ status: 400, code: 'invalid_request', message: 'open-a cannot carry this' })
    expect((await t.deps.balance(principal.orgId)).prepaidNanos).toBe(before)
    expect(t.deps.limits.concurrency.inUse(principal.orgId)).toBe(0)
  })

  test('Anonymous and Private participants: no attestation fields at all', async () => {
    const result = await runFusion(deps, { principal, request: { models: ['open-a', 'open-b'], messages }, requestId: 'req-2', signal: new AbortController().signal })
    expect(result.status).toBe('complete')
    expect(result.judge).toBe('judge')
    expect('judge_attestation' in result).toBe(false)
    for (const entry of result.models) expect('attestation' in entry).toBe(false)
  })

  test('Confidential with anything else, or a non-Confidential judge named for them: 400 before anything runs', async () => {
    const run = (models: string[], judge?: string) =>
      runFusion(deps, { principal, request: { models, messages, judge }, requestId: 'req-3', signal: new AbortController().signal })
    await expect(run(['tee-a:confidential', 'open-a'])).rejects.toMatchObject({ status: 400, param: 'models' })
    await expect(run(['tee-a:confidential', 'tee-b:confidential'], 'judge')).rejects.toMatchObject({ status: 400, param: 'judge' })
    expect(t.deps.limits.concurrency.inUse(principal.orgId)).toBe(0)
  })

  test('an organization without Fusion access is refused first, naming the plan', async () => {
    deps.planOf = async () => ({ planId: 'payg', fusion: false })
    await expect(runFusion(deps, { principal, request: { models: ['open-a', 'open-b'], messages }, requestId: 'req-4', signal: new AbortController().signal }))
      .rejects.toMatchObject({ status: 403, code: 'forbidden', message: expect.stringContaining('"payg"') })
    deps.planOf = async () => {
      throw new Error('database down')
    }
    await expect(runFusion(deps, { principal, request: { models: ['open-a', 'open-b'], messages }, requestId: 'req-5', signal: new AbortController().signal }))
      .rejects.toMatchObject({ status: 503, code: 'unavailable' })
  })
})
