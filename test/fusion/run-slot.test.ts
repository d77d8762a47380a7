import { afterEach, describe, expect, test } from 'bun:test'
import { openAIWire } from '../providers/openai-wire'
import { json } from '../support/harness'
import { answer, buildFusionHarness, fusionEntries, USER_MESSAGES, type FusionHarness } from './support'

// A Fusion run takes one org inference slot for all its parts (participants and judge), as a
// chat takes one: with `limits.org_inference_concurrency: 1` (README: 1/N per instance) a lone
// run completes, and a second run while the first holds the slot is refused as a whole (429)
// before anything is reserved, called or billed (QA: each part took its own slot, so a lone
// two-model run always lost a participant to 429 and retrying never helped).

let h: FusionHarness
afterEach(async () => {
  await h.close()
})

const body = (models: string[], extra: Record<string, unknown> = {}) => ({ models, messages: USER_MESSAGES, ...extra })
const spent = async () => 10_000_000_000n - (await h.t.deps.balance(h.org.orgId)).prepaidNanos

describe('one inference slot per run', () => {
  test('org_inference_concurrency 1: a two-model run is complete, every part charged, the slot freed', async () => {
    h = await buildFusionHarness({ limits: '{ org_inference_concurrency: 1 }' })
    h.a.enqueue(answer('A.'))
    h.b.enqueue(answer('B.'))
    h.judge.enqueue(answer('AB.'))
    const result = await json(await h.fusion(body(['a', 'b'])))
    expect(result.status).toBe('complete')
    expect(result.models.map((entry: any) => entry.error_code)).toEqual([undefined, undefined])
    expect((await fusionEntries(h.t)).length).toBe(3)
    expect(h.t.deps.limits.concurrency.size).toBe(0)
  })

  test('org_inference_concurrency 2: a three-model run is complete (streamed too)', async () => {
    h = await buildFusionHarness({ limits: '{ org_inference_concurrency: 2 }' })
    for (const upstream of [h.a, h.b, h.c]) upstream.enqueue(answer('9.9.'), answer('9.9.'))
    h.judge.enqueue(answer('9.9.'), answer('9.9.'))
    expect((await json(await h.fusion(body(['a', 'b', 'c'])))).status).toBe('complete')
    const streamed = await h.fusion(body(['a', 'b', 'c'], { stream: true }))
    expect(streamed.status).toBe(200)
    expect(await streamed.text()).toContain('"status":"complete"')
    expect((await fusionEntries(h.t)).length).toBe(8)
    expect(h.t.deps.limits.concurrency.size).toBe(0)
  })

  test('a second run while the first holds the only slot: 429 rate_limited as a whole, nothing called or billed; the first completes', async () => {
    h = await buildFusionHarness({ limits: '{ org_inference_concurrency: 1 }' })
    let release!: () => void
    const held = new Promise<void>(resolve => (release = resolve))
    h.a.enqueue({ kind: 'sse', body: [held, openAIWire.stream({ text: 'A.', finish: 'stop', usage: { inputTokens: 100, outputTokens: 20 } })] })
    h.b.enqueue(answer('B.'))
    h.judge.enqueue(answer('AB.'))
    const first = h.fusion(body(['a', 'b']))
    await h.a.request(0)
    await h.b.request(0)
    expect(h.t.deps.limits.concurrency.inUse(h.org.orgId)).toBe(1)

    for (const stream of [false, true]) {
      const refused = await h.fusion(body(['b', 'c'], { stream }))
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).toBe('1')
      const error = (await json(refused)).error
      expect(error.code).toBe('rate_limited')
      expect(error.message).toContain('too many concurrent inference requests')
    }
    expect(h.b.requests.length + h.c.requests.length + h.judge.requests.length).toBe(1)
    expect(await spent()).toBe(0n)

    release()
    expect((await json(await first)).status).toBe('complete')
    expect((await fusionEntries(h.t)).length).toBe(3)
    expect(h.t.deps.limits.concurrency.size).toBe(0)
    // Nothing the refused runs could have reserved is still held.
    expect(h.t.deps.ledger.pools.get('prepaid', h.org.orgId, null, 0, h.t.clock.now()).held).toBe(0n)
  })
})
