import { describe, expect, test } from 'bun:test'
import { chunk } from '../providers/openai-wire'
import type { FakeResponse } from '../support/fake-upstream'
import { poll } from '../support/poll'
import { oneModelGateway, type ServedGateway } from '../support/gateway'

// A stream that ends before its finish charges the output the client was sent (README, "Backend
// fallback"). The stream encoders hold some output back: a tool call that starts while the one
// before it is unfinished waits for it (a Chat Completions backend may interleave parallel
// calls), and a Messages tool block keeps a Chat Completions backend's arguments for its stop.
// A cut or a client that leaves drops what is held, but the meter had counted it on arrival: QA
// saw a stream whose second call (16,000 bytes of arguments) never reached the client charged as
// much as the whole answer. Now the held output is taken back from the count (Meter.withdraw).

const NAME = 'lookup'
/** Call A's arguments so far: not yet whole JSON, so call B waits behind it. */
const A_ARGS = '{"x":'
const B_ARGS = `{"x":"${'a'.repeat(15_994)}` // 16,000 bytes, never finished
const PARAMETERS = { type: 'object', properties: { x: { type: 'string' } } }
/** At 1 USD per million tokens, input and output: 1,000 nanos a token. */
const nanos = (tokens: number) => BigInt(tokens) * 1000n
/** The gateway's count of output it sent: UTF-8 bytes ÷ 4, rounded up. */
const counted = (text: string) => Math.ceil(Buffer.byteLength(text) / 4)

const startA = chunk({ role: 'assistant', content: null }) + chunk({ tool_calls: [{ index: 0, id: 'call_a', type: 'function', function: { name: NAME, arguments: '' } }] })
const argsA = chunk({ tool_calls: [{ index: 0, function: { arguments: A_ARGS } }] })
const callB = chunk({ tool_calls: [{ index: 1, id: 'call_b', type: 'function', function: { name: NAME, arguments: '' } }] }) + chunk({ tool_calls: [{ index: 1, function: { arguments: B_ARGS } }] })

/** What a client received of the tool calls: each call's name, and the argument text. */
interface Seen {
  names: string[]
  args: string
  failure?: unknown
}

type Client = (g: ServedGateway, seen: Seen, signal: AbortSignal) => Promise<void>

const messages = [{ role: 'user' as const, content: 'look it up' }]
const CLIENTS: Record<string, Client> = {
  chat: async (g, seen, signal) => {
    const stream = await g.openai.chat.completions.create({ model: 'm', stream: true, messages, tools: [{ type: 'function', function: { name: NAME, parameters: PARAMETERS } }] }, { signal })
    for await (const part of stream) {
      for (const call of part.choices[0]?.delta.tool_calls ?? []) {
        if (call.function?.name) seen.names.push(call.function.name)
        seen.args += call.function?.arguments ?? ''
      }
    }
  },
  responses: async (g, seen, signal) => {
    const stream = await g.openai.responses.create({ model: 'm', stream: true, input: 'look it up', tools: [{ type: 'function', name: NAME, parameters: PARAMETERS, strict: false }] }, { signal })
    for await (const event of stream) {
      if (event.type === 'response.output_item.added' && event.item.type === 'function_call') seen.names.push(event.item.name)
      else if (event.type === 'response.function_call_arguments.delta') seen.args += event.delta
      else if (event.type === 'response.failed' || event.type === 'error') throw event
    }
  },
  messages: async (g, seen, signal) => {
    const stream = g.anthropic.messages.stream({ model: 'm', max_tokens: 8000, messages, tools: [{ name: NAME, input_schema: PARAMETERS as never }] }, { signal })
    for await (const event of stream) {
      if (event.type === 'content_block_start' && event.content_block.type === 'tool_use') seen.names.push(event.content_block.name)
      else if (event.type === 'content_block_delta' && event.delta.type === 'input_json_delta') seen.args += event.delta.partial_json
    }
  },
}

/**
 * What the client has of call A once everything it will get has come: a Messages client gets the
 * block's start, its arguments being held for the stop (a Chat Completions backend's may be no
 * JSON object); the others get the arguments as they come.
 */
const received = (client: string) => (client === 'messages' ? '' : A_ARGS)

describe('a stream cut while the encoder holds output back is charged only what was sent', () => {
  const served = oneModelGateway('openai-compatible', 'context_length: 65536, max_output_tokens: 8000, capabilities: { tools: true }')

  const balance = async () => (await served.gateway.t.deps.balance(served.gateway.orgId)).prepaidNanos

  /** One call through `client` whose upstream answers `response` and resets; the charge and what the client saw. */
  async function cut(client: string, body: string): Promise<{ charged: bigint; seen: Seen }> {
    served.upstream.enqueue({ kind: 'sse', body, then: 'reset' } satisfies FakeResponse)
    const before = await balance()
    const seen: Seen = { names: [], args: '' }
    await CLIENTS[client]!(served.gateway, seen, new AbortController().signal).catch(failure => (seen.failure = failure))
    expect(seen.failure).toBeDefined()
    return { charged: before - (await balance()), seen }
  }

  /** The input the gateway charges for this client's request (no usage reported: its estimate), from a stream cut right after call A's name. */
  async function inputCharge(client: string): Promise<bigint> {
    const { charged, seen } = await cut(client, startA)
    expect(seen.names).toEqual([NAME])
    return charged - nanos(counted(NAME))
  }

  for (const client of Object.keys(CLIENTS)) {
    test(`${client}: the upstream cuts while call B waits behind call A`, async () => {
      const input = await inputCharge(client)
      const { charged, seen } = await cut(client, startA + argsA + callB)
      // The client never saw call B (nor, on Messages, A's held arguments).
      expect(seen).toMatchObject({ names: [NAME], args: received(client) })
      expect(charged).toBe(input + nanos(counted(NAME + received(client))))
    })

    test(`${client}: the client leaves while call B waits behind call A`, async () => {
      const input = await inputCharge(client)
      served.upstream.enqueue({ kind: 'sse', body: startA + argsA + callB, then: 'stall' })
      const before = await balance()
      const seen: Seen = { names: [], args: '' }
      const leave = new AbortController()
      const reading = CLIENTS[client]!(served.gateway, seen, leave.signal).catch(() => {})
      // Call B's 16,000 bytes come in the upstream's one write with A's: by the time the client
      // has call A, the gateway has read (and counted) B in the same network read.
      await poll('call A as the client gets it', 200, 10, () => (seen.names.length === 1 && seen.args === received(client) ? true : undefined))
      leave.abort()
      await reading
      const charged = await poll('the settlement', 200, 10, async () => {
        const after = await balance()
        return after !== before && (served.gateway.t.deps.lifecycle as { inFlight: number }).inFlight === 0 ? before - after : undefined
      })
      expect(seen).toMatchObject({ names: [NAME], args: received(client) })
      expect(charged).toBe(input + nanos(counted(NAME + received(client))))
    })
  }

  test('messages: the upstream cuts while a tool block holds its arguments for its stop', async () => {
    const input = await inputCharge('messages')
    const { charged, seen } = await cut('messages', startA + chunk({ tool_calls: [{ index: 0, function: { arguments: `{"x":"${'a'.repeat(400)}` } }] }))
    expect(seen).toMatchObject({ names: [NAME], args: '' })
    expect(charged).toBe(input + nanos(counted(NAME)))
  })
})
