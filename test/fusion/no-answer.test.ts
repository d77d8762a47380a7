import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import { parseCharges } from '../support/documents'
import { json } from '../support/harness'
import { chunk, DONE, frame } from '../providers/openai-wire'
import { answer, buildFusionHarness, chargeOf, fusionEntries, JUDGE_PRICE, PARTICIPANT_PRICE, USER_MESSAGES, type FusionHarness } from './support'

// A call that ends normally but with no answer text (an Anthropic `refusal` stop, which sends no
// content; an empty reply) is no answer (spec §3.2: complete = two participants and the
// synthesis succeeded). QA: such participants counted toward `complete`, and such a judge gave
// `complete` with an empty synthesis and no synthesis_error. Each is still billed for what it used.

let h: FusionHarness
beforeEach(async () => {
  h = await buildFusionHarness()
})
afterEach(async () => {
  await h.close()
})

/** Anthropic's refusal: stop_reason `refusal`, no content, the input it read billed. */
const REFUSAL = {
  kind: 'json' as const,
  body: { id: 'msg_refused', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: 'refusal', stop_sequence: null, usage: { input_tokens: 50, output_tokens: 0 } },
}
const REFUSED_USAGE = { inputTokens: 50, outputTokens: 0 }
const EMPTY_USAGE = { inputTokens: 100, outputTokens: 1 }
const body = (models: string[], extra: Record<string, unknown> = {}) => ({ models, messages: USER_MESSAGES, ...extra })

describe('participants without answer text', () => {
  test('a refusal and an empty answer fail, billed for what they used; the judge sees the one real answer: partial', async () => {
    h.a.enqueue(answer('A says 9.9.'))
    h.b.enqueue(answer('  ', EMPTY_USAGE))
    h.claude.enqueue(REFUSAL)
    h.judge.enqueue(answer('Checked: 9.9.'))
    const result = await json(await h.fusion(body(['a', 'b', 'claude'])))
    expect(result.status).toBe('partial')
    expect(result.models[0].error).toBeUndefined()
    expect(result.models[1]).toMatchObject({ finish_reason: 'stop', prompt_tokens: 100, tokens: 1, error_code: 'provider_error', error: 'b returned an empty answer' })
    expect(result.models[2]).toMatchObject({ output: '', finish_reason: 'content_filter', prompt_tokens: 50, tokens: 0, error_code: 'provider_error', error: 'claude refused to answer' })
    expect(result.synthesis).toBe('Checked: 9.9.')
    const candidates = h.judge.onlyRequest().body.messages.at(-1).content as string
    expect(candidates).toContain('Only one model answered')
    expect(candidates).not.toContain('empty answer')
    expect((await fusionEntries(h.t)).map(entry => entry.amount).sort()).toEqual(
      [
        chargeOf(PARTICIPANT_PRICE, { inputTokens: 100, outputTokens: 20 }),
        chargeOf(PARTICIPANT_PRICE, EMPTY_USAGE),
        chargeOf(JUDGE_PRICE, REFUSED_USAGE),
        chargeOf(JUDGE_PRICE, { inputTokens: 100, outputTokens: 20 }),
      ].sort(),
    )
  })

  test('every participant without answer text: failed, no judge; the progress stream says participant.failed', async () => {
    h.a.enqueue(answer('', EMPTY_USAGE))
    h.claude.enqueue(REFUSAL)
    const text = await (await h.fusion(body(['a', 'claude'], { stream: true }))).text()
    expect(text.match(/event: participant\.failed/g)?.length).toBe(2)
    expect(text).not.toContain('event: participant.finished')
    const result = JSON.parse(text.split('event: fusion.completion\ndata: ')[1]!.split('\n')[0]!)
    expect(result).toMatchObject({ status: 'failed', synthesis: '' })
    expect(h.judge.requests.length).toBe(0)
    expect((await fusionEntries(h.t)).length).toBe(2)
  })
})

// Regression QA: such parts are billed for what they used, and that made a `failed` run charge its
// attached file, which README says a failed run never does.
test('a failed run of parts without answer text charges nothing for its attached file', async () => {
  h.a.enqueue(answer('', EMPTY_USAGE))
  h.claude.enqueue(REFUSAL)
  const file = `data:text/plain;base64,${Buffer.from('Quarterly notes.').toString('base64')}`
  const messages = [{ role: 'user', content: [{ type: 'text', text: 'Summarise.' }, { type: 'file', file: { file_data: file, filename: 'notes.txt' } }] }]
  const result = await json(await h.fusion({ models: ['a', 'claude'], messages }))
  expect(result.status).toBe('failed')
  expect(await parseCharges(h.t, h.org.orgId)).toEqual([])
  expect((await fusionEntries(h.t)).length).toBe(2) // the two parts, for what they used
})

describe('a judge without answer text', () => {
  test('a refusing judge is a failed synthesis: partial, synthesis_error set, billed for its input (streamed too)', async () => {
    for (const stream of [false, true]) {
      h.a.enqueue(answer('A.'))
      h.b.enqueue(answer('B.'))
      h.claude.enqueue(REFUSAL)
      const response = await h.fusion(body(['a', 'b'], { judge: 'claude', stream }))
      const result = stream ? JSON.parse((await response.text()).split('event: fusion.completion\ndata: ')[1]!.split('\n')[0]!) : await json(response)
      expect(result).toMatchObject({
        status: 'partial', synthesis: '', synthesis_prompt_tokens: 50, synthesis_tokens: 0,
        synthesis_error: 'claude refused to answer', synthesis_error_code: 'provider_error',
      })
      // Only when the judge answered (regression QA: it came with a failed synthesis too).
      expect(result.synthesis_finish_reason).toBeUndefined()
      expect(result.models.map((entry: any) => entry.output)).toEqual(['A.', 'B.'])
    }
    expect((await fusionEntries(h.t)).length).toBe(6)
  })

  test('a Chat Completions judge streaming a refusal: no synthesis.delta carries it, and the synthesis failed', async () => {
    // Before, each `refusal` delta went out as synthesis.delta (the client read the refusal as
    // the synthesis), then fusion.completion said the synthesis had failed.
    const words = ["I'm sorry, ", 'I cannot ', 'compare these answers.']
    const refusal = (lead = '') =>
      ({
        kind: 'sse' as const,
        body: chunk({ role: 'assistant', content: lead, refusal: null }) + words.map(word => chunk({ refusal: word })).join('') + chunk({}, 'stop') +
          frame({ id: 'chatcmpl-test123', object: 'chat.completion.chunk', created: 1_700_000_000, model: 'upstream-judge', choices: [], usage: { prompt_tokens: 100, completion_tokens: 12, total_tokens: 112 } }) + DONE,
      })
    // A refusal alone; and one after a first word of content, which is no synthesis either.
    for (const lead of ['', 'Both']) {
      h.a.enqueue(answer('A.'))
      h.b.enqueue(answer('B.'))
      h.judge.enqueue(refusal(lead))
      const text = await (await h.fusion(body(['a', 'b'], { stream: true }))).text()
      const deltas = [...text.matchAll(/event: synthesis\.delta\ndata: (.*)\n/g)].map(match => JSON.parse(match[1]!).delta as string)
      expect(deltas.join('')).toBe(lead)
      expect(text).not.toContain('compare these answers')
      expect(text).toContain('event: synthesis.started')
      const result = JSON.parse(text.split('event: fusion.completion\ndata: ')[1]!.split('\n')[0]!)
      expect(result).toMatchObject({ status: 'partial', synthesis: '', synthesis_tokens: 12, synthesis_error: 'judge refused to answer', synthesis_error_code: 'provider_error' })
    }
  })

  test('an Anthropic judge stopped by its refusal after some text is a failed synthesis too (streamed or not)', async () => {
    // QA: "Both answers agree that", then stop_reason `refusal`, ended `complete` with the cut text
    // as the synthesis and synthesis_finish_reason content_filter.
    const event = (data: any) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`
    const cut = {
      kind: 'sse' as const,
      body:
        event({ type: 'message_start', message: { id: 'msg_cut', type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 50, output_tokens: 1 } } }) +
        event({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }) +
        event({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Both answers agree that' } }) +
        event({ type: 'content_block_stop', index: 0 }) +
        event({ type: 'message_delta', delta: { stop_reason: 'refusal', stop_sequence: null }, usage: { output_tokens: 7 } }) +
        event({ type: 'message_stop' }),
    }
    for (const stream of [false, true]) {
      h.a.enqueue(answer('A.'))
      h.b.enqueue(answer('B.'))
      h.claude.enqueue(cut)
      const response = await h.fusion(body(['a', 'b'], { judge: 'claude', stream }))
      const text = stream ? await response.text() : ''
      const result = stream ? JSON.parse(text.split('event: fusion.completion\ndata: ')[1]!.split('\n')[0]!) : await json(response)
      expect(result).toMatchObject({
        status: 'partial', synthesis: '', synthesis_prompt_tokens: 50, synthesis_tokens: 7,
        synthesis_error: 'claude refused to answer', synthesis_error_code: 'provider_error',
      })
      expect(result.synthesis_finish_reason).toBeUndefined()
      // As with a Chat Completions refusal after content, the text streamed before the stop stays sent.
      if (stream) expect([...text.matchAll(/event: synthesis\.delta\ndata: (.*)\n/g)].map(match => JSON.parse(match[1]!).delta).join('')).toBe('Both answers agree that')
    }
  })

  test('an empty synthesis is a failed one: partial', async () => {
    h.a.enqueue(answer('A.'))
    h.b.enqueue(answer('B.'))
    h.judge.enqueue(answer('', EMPTY_USAGE))
    const result = await json(await h.fusion(body(['a', 'b'])))
    expect(result).toMatchObject({ status: 'partial', synthesis: '', synthesis_prompt_tokens: 100, synthesis_tokens: 1, synthesis_error: 'judge returned an empty answer', synthesis_error_code: 'provider_error' })
  })

  test('a synthesis cut at its output limit is still one: complete, and synthesis_finish_reason says length', async () => {
    h.a.enqueue(answer('A.'))
    h.b.enqueue(answer('B.'))
    h.judge.enqueue(answer('Both say', { inputTokens: 400, outputTokens: 2 }, 'length'))
    const result = await json(await h.fusion(body(['a', 'b'], { max_tokens: 2 })))
    expect(result).toMatchObject({ status: 'complete', synthesis: 'Both say', synthesis_finish_reason: 'length' })
    expect(result.synthesis_error).toBeUndefined()
  })
})
