// Helpers for provider tests: collect a provider's events, check them against the ChatEvent
// grammar (canonical.ts), summarize them into what a client would see, or take the error a call
// rejects with.

import type { ChatEvent, FinishReason, Usage } from '../../src/inference/canonical'
import { UpstreamError } from '../../src/providers/types'

/** Every event of a stream, in order. */
export async function collect(events: AsyncIterable<ChatEvent>): Promise<ChatEvent[]> {
  const all: ChatEvent[] = []
  for await (const event of events) all.push(event)
  return all
}

/** One tool call as assembled from its events. */
export interface CollectedToolCall {
  block: number
  callId: string
  name: string
  arguments: string
}

/** What the events add up to. */
export interface EventSummary {
  start: Extract<ChatEvent, { type: 'response-start' }> | undefined
  /** Block kinds in order of start. */
  blocks: Array<{ block: number; kind: 'text' | 'reasoning' | 'tool-call' }>
  text: string
  reasoning: string
  /** The signature of each reasoning block, in order. */
  reasoningSignatures: Array<string | undefined>
  toolCalls: CollectedToolCall[]
  finish: { reason: FinishReason; usage: Usage; stopSequence?: string } | undefined
  error: UpstreamError | undefined
}

export function summarize(events: readonly ChatEvent[]): EventSummary {
  const summary: EventSummary = { start: undefined, blocks: [], text: '', reasoning: '', reasoningSignatures: [], toolCalls: [], finish: undefined, error: undefined }
  const calls = new Map<number, CollectedToolCall>()
  for (const event of events) {
    switch (event.type) {
      case 'response-start':
        summary.start = event
        break
      case 'text-start':
        summary.blocks.push({ block: event.block, kind: 'text' })
        break
      case 'reasoning-start':
        summary.blocks.push({ block: event.block, kind: 'reasoning' })
        break
      case 'tool-call-start': {
        summary.blocks.push({ block: event.block, kind: 'tool-call' })
        const call = { block: event.block, callId: event.callId, name: event.name, arguments: '' }
        calls.set(event.block, call)
        summary.toolCalls.push(call)
        break
      }
      case 'text-delta':
        summary.text += event.delta
        break
      case 'reasoning-delta':
        summary.reasoning += event.delta
        break
      case 'reasoning-end':
        summary.reasoningSignatures.push(event.signature)
        break
      case 'tool-call-delta':
        calls.get(event.block)!.arguments += event.argumentsDelta
        break
      case 'finish':
        summary.finish = { reason: event.reason, usage: event.usage, ...(event.stopSequence !== undefined ? { stopSequence: event.stopSequence } : {}) }
        break
      case 'error':
        summary.error = event.error
        break
    }
  }
  return summary
}

const KIND_OF: Partial<Record<ChatEvent['type'], 'text' | 'reasoning' | 'tool-call'>> = {
  'text-start': 'text',
  'text-delta': 'text',
  'text-end': 'text',
  'reasoning-start': 'reasoning',
  'reasoning-delta': 'reasoning',
  'reasoning-end': 'reasoning',
  'tool-call-start': 'tool-call',
  'tool-call-delta': 'tool-call',
  'tool-call-end': 'tool-call',
}

/**
 * Throws, naming the first violation, unless `events` follow the ChatEvent grammar:
 * - exactly one `response-start`, first (a stream that is only an `error`, or an aborted stream
 *   with no events, has none);
 * - every block starts once, before its deltas and its end, with block numbers increasing in
 *   order of first appearance; deltas and the end match the start's kind; nothing after the end;
 * - exactly one terminal event (`finish` or `error`), last; at `finish` every block has ended
 *   (an `error` may cut blocks open). With `terminal: false` (a stream the caller aborted) there
 *   must be no terminal event at all.
 */
export function assertEventGrammar(events: readonly ChatEvent[], options: { terminal?: boolean } = {}): void {
  const fail = (index: number, why: string): never => {
    throw new Error(`event ${index} (${JSON.stringify(events[index] ?? null, replacer)}) breaks the event grammar: ${why}\nall events: ${JSON.stringify(events, replacer)}`)
  }
  const expectTerminal = options.terminal ?? true
  // A stream that fails before the upstream said anything may consist of its error alone; an
  // aborted one may be empty.
  const alone = (events.length === 1 && events[0]!.type === 'error') || (events.length === 0 && !expectTerminal)
  if (!alone && events[0]?.type !== 'response-start') fail(0, 'the first event must be response-start')
  const state = new Map<number, { kind: string; ended: boolean }>()
  let lastBlock = -1
  let terminal = -1
  events.forEach((event, index) => {
    if (terminal >= 0) fail(index, 'nothing may follow the terminal event')
    if (event.type === 'response-start') {
      if (index !== 0) fail(index, 'response-start appears more than once')
      return
    }
    if (event.type === 'finish' || event.type === 'error') {
      terminal = index
      if (event.type === 'finish') for (const [block, entry] of state) if (!entry.ended) fail(index, `block ${block} is still open at finish`)
      return
    }
    if (event.type === 'passthrough') return fail(index, 'passthrough events come only from calls that ask for them')
    if (event.type === 'usage') return
    const kind = KIND_OF[event.type]!
    const entry = state.get(event.block)
    if (event.type.endsWith('-start')) {
      if (entry !== undefined) fail(index, `block ${event.block} started twice`)
      if (event.block <= lastBlock) fail(index, `block ${event.block} does not increase (last was ${lastBlock})`)
      lastBlock = event.block
      state.set(event.block, { kind, ended: false })
      return
    }
    if (entry === undefined) fail(index, `block ${event.block} was never started`)
    if (entry!.kind !== kind) fail(index, `block ${event.block} is a ${entry!.kind} block`)
    if (entry!.ended) fail(index, `block ${event.block} already ended`)
    if (event.type.endsWith('-end')) entry!.ended = true
  })
  if (expectTerminal && terminal !== events.length - 1) fail(events.length, 'the stream must end with exactly one finish or error')
  if (!expectTerminal && terminal >= 0) fail(terminal, 'an aborted stream must end without a terminal event')
}

function replacer(_key: string, value: unknown): unknown {
  if (value instanceof Error) return { name: value.name, message: value.message, ...(value as object) }
  return value
}

/** The UpstreamError a promise rejects with; fails the test if it resolves or rejects otherwise. */
export async function rejection(promise: Promise<unknown>): Promise<UpstreamError> {
  try {
    await promise
  } catch (error) {
    if (error instanceof UpstreamError) return error
    throw new Error(`expected an UpstreamError, got ${String(error)}`)
  }
  throw new Error('expected the call to reject before any event, but it resolved')
}
