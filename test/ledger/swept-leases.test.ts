import { afterEach, expect, test } from 'bun:test'
import { leaseReturn } from '../../src/billing/ledger-ops'
import { chunk, DONE, frame } from '../providers/openai-wire'
import { FakeUpstream } from '../support/fake-upstream'
import { paygConfig, upstreamProvider } from '../support/gateway'
import { buildConfiguredApp, type TestApp } from '../support/harness'
import { poll } from '../support/poll'
import { verifyClean } from './fixtures'

// An instance taken for dead (paused, starved or cut off past instance_stale_after_s) finds its
// leases returned by another instance, which may spend that money. Its calls in flight are cut at
// its next heartbeat, so what they charge against the vanished lease is what they had produced,
// not the rest of their output (QA: a process paused for 24 s finished a long stream after its
// lease was swept and spent elsewhere, and the organization ended 0.9 USD below zero).

let t: TestApp
let upstream: FakeUpstream
afterEach(async () => {
  await t?.close()
  await upstream?.close()
})

test('a stream whose lease another instance returned is cut at the next heartbeat, charged for what it produced', async () => {
  upstream = await FakeUpstream.start()
  let release!: () => void
  const held = new Promise<void>(resolve => (release = resolve))
  const head = chunk({ role: 'assistant', content: 'first part ' })
  const tail = chunk({ content: 'and a long rest' }, 'stop') + frame({ id: 'x', object: 'chat.completion.chunk', created: 0, model: 'm', choices: [], usage: { prompt_tokens: 10, completion_tokens: 1000, total_tokens: 1010 } }) + DONE
  upstream.enqueue({ kind: 'sse', body: [head, held, tail] })
  t = await buildConfiguredApp(
    paygConfig([upstreamProvider('up', 'openai-compatible', `${upstream.url}/v1`, 'UP_KEY')], ['  - { id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 2048 }']),
    { UP_KEY: 'sk-up' },
  )
  const org = await t.createOrg('acme', 10_000_000_000n)
  const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true } })
  expect(response.status).toBe(200)
  const reader = response.body!.getReader()
  let text = ''
  while (!text.includes('first part')) text += new TextDecoder().decode((await reader.read()).value)
  // Another instance's sweep returns this boot's lease (the guarded return it would run).
  const pool = t.deps.ledger.pools.all().find(each => each.held > 0n)!
  await t.deps.writer.submit({ kind: 'plain', statements: leaseReturn(pool.ref), interpret: () => undefined })
  await t.deps.sweeper.tick()
  for (let step = await reader.read(); !step.done; step = await reader.read()) text += new TextDecoder().decode(step.value)
  release()
  expect(text).toContain('lost its ledger leases')
  expect(text).not.toContain('a long rest')
  // Charged for the input and the output sent (the counted fallback), not the 1,000 tokens the upstream would have reported.
  const charged = await poll('the cut stream to settle', 200, 10, async () => {
    const rows = (await t.deps.database.client.execute("SELECT amount_nanos FROM ledger_entries WHERE kind = 'settle'")).rows
    return rows.length === 1 ? BigInt(rows[0]!.amount_nanos as number) : undefined
  })
  expect(charged).toBeLessThan(100_000n)
  expect(t.deps.lifecycle.inFlight).toBe(0)
  // The instance goes on: a new call leases afresh.
  upstream.enqueue({ kind: 'sse', body: chunk({ role: 'assistant', content: 'again' }, 'stop') + DONE })
  const again = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true } })
  expect(await again.text()).toContain('again')
  await verifyClean(t)
})

test('a lease swept and granted again before the heartbeat is found lost by the grant: the held stream is cut', async () => {
  // Before (regression QA): a call admitted after the sweep grew the pool, which put the lease row
  // back under its id, so the heartbeat found it and the held stream ran to its end.
  upstream = await FakeUpstream.start()
  let release!: () => void
  const held = new Promise<void>(resolve => (release = resolve))
  upstream.enqueue({ kind: 'sse', body: [chunk({ role: 'assistant', content: 'first part ' }), held, chunk({ content: 'and a long rest' }, 'stop') + DONE] })
  t = await buildConfiguredApp(
    paygConfig([upstreamProvider('up', 'openai-compatible', `${upstream.url}/v1`, 'UP_KEY')], ['  - { id: m, backends: [{ provider: up, model: m1 }], price: { input_per_mtok: "1", output_per_mtok: "2" }, context_length: 8192, max_output_tokens: 2048 }']),
    { UP_KEY: 'sk-up' },
  )
  const org = await t.createOrg('acme', 10_000_000_000n)
  const response = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true } })
  const reader = response.body!.getReader()
  let text = ''
  while (!text.includes('first part')) text += new TextDecoder().decode((await reader.read()).value)
  const pool = t.deps.ledger.pools.all().find(each => each.held > 0n)!
  await t.deps.writer.submit({ kind: 'plain', statements: leaseReturn(pool.ref), interpret: () => undefined })
  // The pool's free part is spent (as other calls would), so the next call grows it: the grant recreates the row.
  pool.leased = pool.held
  upstream.enqueue({ kind: 'sse', body: chunk({ role: 'assistant', content: 'second' }, 'stop') + DONE })
  const second = await t.request('POST', '/v1/chat/completions', { key: org.adminKey, body: { model: 'm', messages: [{ role: 'user', content: 'hi' }], stream: true } })
  expect(await second.text()).toContain('second')
  for (let step = await reader.read(); !step.done; step = await reader.read()) text += new TextDecoder().decode(step.value)
  release()
  expect(text).toContain('lost its ledger leases')
  expect(text).not.toContain('a long rest')
  await poll('both calls to settle', 200, 10, () => (t.deps.lifecycle.inFlight === 0 ? true : undefined))
  await verifyClean(t)
})

