import { afterEach, beforeEach, describe, expect, test } from 'bun:test'
import OpenAI from 'openai'
import { openAIClient } from '../support/gateway'
import { buildTestApp, createPlanOrg, type TestApp } from '../support/harness'

// The embedded default, end to end: a gateway built with no config at all answers the demo
// models through the official SDK over a real socket, and bills exactly the catalog price of
// the usage it reports (0.10 / 0.40 USD per Mtok, one ceil per charge).

const CREDIT = 5_000_000_000n // 5 USD prepaid
const MTOK = 1_000_000n
const INPUT_PER_MTOK = 100_000_000n // "0.10" USD in nanos
const OUTPUT_PER_MTOK = 400_000_000n // "0.40" USD in nanos

let t: TestApp
let client: OpenAI
let orgId: string
let charges: bigint[]

const ceilDiv = (a: bigint, b: bigint) => (a + b - 1n) / b

/** What the catalog price of `usage` is: cached input and reasoning output fall back to the input and output prices. */
function priceOf(usage: OpenAI.CompletionUsage | undefined): bigint {
  if (usage === undefined) throw new Error('the response carried no usage')
  const cached = BigInt(usage.prompt_tokens_details?.cached_tokens ?? 0)
  const reasoning = BigInt(usage.completion_tokens_details?.reasoning_tokens ?? 0)
  const input = BigInt(usage.prompt_tokens)
  const output = BigInt(usage.completion_tokens)
  return (
    ceilDiv((input - cached) * INPUT_PER_MTOK, MTOK) +
    ceilDiv(cached * INPUT_PER_MTOK, MTOK) +
    ceilDiv((output - reasoning) * OUTPUT_PER_MTOK, MTOK) +
    ceilDiv(reasoning * OUTPUT_PER_MTOK, MTOK)
  )
}

const charged = async () => CREDIT - (await t.deps.balance(orgId)).prepaidNanos

/** Asserts that the prepaid balance went down by exactly the sum of the charges recorded so far. */
async function expectChargedExactly() {
  expect(await charged()).toBe(charges.reduce((sum, charge) => sum + charge, 0n))
  expect(t.deps.limits.concurrency.inUse(orgId)).toBe(0)
}

beforeEach(async () => {
  // No env, no SVC_CONFIG: the embedded default (src/config/default.yaml).
  t = await buildTestApp()
  // A pay-as-you-go organization (no monthly allowance) so every charge reaches the prepaid balance.
  const org = await createPlanOrg(t, { name: 'payg', keyName: 'chat', credit: CREDIT })
  orgId = org.orgId
  charges = []
  client = openAIClient(t.listen(), org.key)
})

afterEach(async () => {
  await t.close()
})

const tools: OpenAI.ChatCompletionTool[] = [
  {
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'Current weather for a city',
      parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city', 'unit'] },
    },
  },
]

describe('embedded default config: the demo models through the openai SDK', () => {
  test('the catalog lists the demo models at 0.10 / 0.40 USD per Mtok', async () => {
    for (const id of ['demo-anonymous', 'demo-private', 'demo-alt']) {
      const route = t.deps.catalog.resolve(id)
      expect(route.price).toEqual({ inputPerMillion: INPUT_PER_MTOK, outputPerMillion: OUTPUT_PER_MTOK })
    }
    expect(t.deps.catalog.resolve('demo-anonymous').level).toBe('anonymous')
    expect(t.deps.catalog.resolve('demo-private').level).toBe('private')
    const models = await client.models.list()
    expect(models.data.map(model => model.id)).toEqual(['demo-anonymous', 'demo-private', 'demo-alt'])
  })

  for (const model of ['demo-anonymous', 'demo-private']) {
    test(`${model}, plain: the deterministic answer, its exact usage, its exact charge`, async () => {
      const completion = await client.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello there' }] })
      expect(completion.object).toBe('chat.completion')
      expect(completion.model).toBe(model)
      expect(completion.choices[0]!.message.content).toBe('Hello from the demo model. You said: hello there')
      expect(completion.choices[0]!.finish_reason).toBe('stop')
      // 11 characters → ceil(11 / 4) = 3 input tokens; 9 words → 9 output tokens.
      expect(completion.usage).toMatchObject({ prompt_tokens: 3, completion_tokens: 9, total_tokens: 12 })
      expect(priceOf(completion.usage)).toBe(3n * 100n + 9n * 400n)
      charges.push(priceOf(completion.usage))
      await expectChargedExactly()
    })

    test(`${model}, streamed with create({ stream: true }) and with .stream(): deltas, usage chunk, exact charges`, async () => {
      const stream = await client.chat.completions.create({
        model,
        messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'stream me a few words please' }],
        stream: true,
        stream_options: { include_usage: true },
      })
      let text = ''
      let deltas = 0
      let finish: string | null = null
      let usage: OpenAI.CompletionUsage | undefined
      for await (const chunk of stream) {
        expect(chunk.object).toBe('chat.completion.chunk')
        expect(chunk.model).toBe(model)
        const content = chunk.choices[0]?.delta.content
        if (content) {
          text += content
          deltas += 1
        }
        finish = chunk.choices[0]?.finish_reason ?? finish
        if (chunk.usage) usage = chunk.usage
      }
      expect(text).toBe('Hello from the demo model. You said: stream me a few words please')
      expect(deltas).toBe(13) // token by token: one word per delta
      expect(finish).toBe('stop')
      // 'Be brief.' (9 characters → 3) + 28 characters → 7: 10 input tokens; 13 words out.
      expect(usage).toMatchObject({ prompt_tokens: 10, completion_tokens: 13, total_tokens: 23 })
      // Settlement happens before the final frame: the balance is already down once [DONE] arrived.
      charges.push(priceOf(usage))
      await expectChargedExactly()

      const helper = client.chat.completions.stream({ model, messages: [{ role: 'user', content: 'again' }], stream_options: { include_usage: true } })
      const seen: string[] = []
      helper.on('content.delta', ({ delta }) => seen.push(delta))
      const final = await helper.finalChatCompletion()
      expect(final.choices[0]!.message.content).toBe('Hello from the demo model. You said: again')
      expect(seen.join('')).toBe(final.choices[0]!.message.content!)
      expect(final.usage).toMatchObject({ prompt_tokens: 2, completion_tokens: 8 })
      charges.push(priceOf(final.usage!))
      await expectChargedExactly()
    })
  }

  test('tool call round trip on the demo model, streamed and not, each call charged exactly', async () => {
    const question: OpenAI.ChatCompletionMessageParam = { role: 'user', content: 'What does get_weather say for Paris?' }
    const first = await client.chat.completions.create({ model: 'demo-anonymous', messages: [question], tools })
    charges.push(priceOf(first.usage))
    const message = first.choices[0]!.message
    expect(first.choices[0]!.finish_reason).toBe('tool_calls')
    expect(message.content).toBeNull()
    expect(message.tool_calls).toHaveLength(1)
    const call = message.tool_calls![0]!
    if (call.type !== 'function') throw new Error('expected a function tool call')
    expect(call.function.name).toBe('get_weather')
    const args = JSON.parse(call.function.arguments)
    expect(Object.keys(args).sort()).toEqual(['city', 'unit'])
    expect(['celsius', 'fahrenheit']).toContain(args.unit)

    // The same turn streamed through the SDK helper assembles the same call.
    const streamed = await client.chat.completions.stream({ model: 'demo-anonymous', messages: [question], tools, stream_options: { include_usage: true } }).finalChatCompletion()
    charges.push(priceOf(streamed.usage!))
    expect(streamed.choices[0]!.finish_reason).toBe('tool_calls')
    const streamedCall = streamed.choices[0]!.message.tool_calls![0]!
    expect(streamedCall.type === 'function' && [streamedCall.id, streamedCall.function.name, streamedCall.function.arguments]).toEqual([call.id, 'get_weather', call.function.arguments])

    // The tool's result goes back; the demo answers with it.
    const second = await client.chat.completions.create({
      model: 'demo-anonymous',
      messages: [question, message as OpenAI.ChatCompletionMessageParam, { role: 'tool', tool_call_id: call.id, content: '18 degrees and sunny' }],
      tools,
    })
    charges.push(priceOf(second.usage))
    expect(second.choices[0]!.finish_reason).toBe('stop')
    expect(second.choices[0]!.message.content).toBe('The get_weather tool returned: 18 degrees and sunny')
    await expectChargedExactly()

    // The SDK's own tool loop, plain and streamed: it calls the function and sends the result back.
    for (const stream of [false, true]) {
      const runner = client.chat.completions.runTools({
        model: 'demo-anonymous',
        stream,
        stream_options: stream ? { include_usage: true } : undefined,
        messages: [question],
        tools: [{ type: 'function', function: { name: 'get_weather', parameters: tools[0]!.type === 'function' ? tools[0]!.function.parameters! : {}, parse: JSON.parse, function: (args: { city: string }) => `12 degrees in ${args.city}` } }],
      } as never) as unknown as { finalContent(): Promise<string | null>; allChatCompletions(): OpenAI.ChatCompletion[] }
      expect(await runner.finalContent()).toMatch(/^The get_weather tool returned: 12 degrees in \S+$/)
      const completions = runner.allChatCompletions()
      expect(completions).toHaveLength(2)
      for (const completion of completions) charges.push(priceOf(completion.usage))
      await expectChargedExactly()
    }
  })

  test('reasoning_effort: reasoning_content first, reasoning tokens in usage, charged at the output price', async () => {
    const completion = await client.chat.completions.create({ model: 'demo-anonymous', messages: [{ role: 'user', content: 'think about this' }], reasoning_effort: 'low' })
    charges.push(priceOf(completion.usage))
    const message = completion.choices[0]!.message as OpenAI.ChatCompletionMessage & { reasoning_content?: string }
    expect(message.reasoning_content).toBe('The user wrote 3 words. I will repeat the message back.')
    expect(message.content).toBe('Hello from the demo model. You said: think about this')
    // 11 reasoning words + 10 answer words, all output tokens.
    expect(completion.usage).toMatchObject({ completion_tokens: 21, completion_tokens_details: { reasoning_tokens: 11 } })

    const stream = await client.chat.completions.create({
      model: 'demo-private',
      messages: [{ role: 'user', content: 'think about this' }],
      reasoning_effort: 'high',
      stream: true,
      stream_options: { include_usage: true },
    })
    let reasoning = ''
    let content = ''
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      const delta = chunk.choices[0]?.delta as { content?: string | null; reasoning_content?: string } | undefined
      if (delta?.reasoning_content) {
        expect(content).toBe('') // reasoning streams before the answer
        reasoning += delta.reasoning_content
      }
      content += delta?.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    expect(reasoning).toBe(message.reasoning_content!)
    expect(content).toBe(message.content!)
    expect(usage).toEqual(completion.usage!)
    charges.push(priceOf(usage))
    await expectChargedExactly()
  })

  test('Responses: reasoning cut by max_output_tokens is an incomplete reasoning item, streamed and not (QA repro)', async () => {
    const body = { model: 'demo-anonymous', input: 'think hard', max_output_tokens: 3, reasoning: { effort: 'high' as const } }
    const plain = await client.responses.create(body)
    const streamed = await client.responses.stream(body).finalResponse()
    for (const response of [plain, streamed]) {
      expect([response.status, response.output.map(item => [item.type, (item as OpenAI.Responses.ResponseReasoningItem).status])]).toEqual(['incomplete', [['reasoning', 'incomplete']]])
    }
    // Reasoning that ran to its end is completed.
    const whole = await client.responses.create({ ...body, max_output_tokens: 1000 })
    expect((whole.output[0] as OpenAI.Responses.ResponseReasoningItem).status).toBe('completed')
  })
})
