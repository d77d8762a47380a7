import type { ChatEvent, FinishReason, Part, Usage } from './canonical'
import { UpstreamError } from '../providers/types'

/**
 * One block of an answer, in the canonical part shapes, so a result replays as an assistant
 * message unchanged. Reasoning blocks keep their own signature and redacted flag: Anthropic
 * verifies each signed block when it comes back, in its original position.
 */
export type ResultBlock = Extract<Part, { type: 'text' | 'reasoning' | 'tool-call' }>

/** A whole (non-streamed) response, assembled from events. */
export interface ChatResult {
  /** Every block in order of first appearance (the source of truth). */
  blocks: ResultBlock[]
  /** Views for formats that flatten: all text blocks joined, all visible (non-redacted) reasoning joined, the tool calls in order. */
  text: string
  reasoning: string
  toolCalls: Array<Extract<ResultBlock, { type: 'tool-call' }>>
  finishReason: FinishReason
  /** The stop sequence that ended a `stop`, when the upstream said which. */
  stopSequence: string | undefined
  usage: Usage | undefined
  /** Set when the upstream failed after it had started answering. */
  error: UpstreamError | undefined
}

/** Folds events into a ChatResult, observing each (the meter) on the way. */
export async function collect(events: AsyncIterable<ChatEvent>, observe: (event: ChatEvent) => void): Promise<ChatResult> {
  const result: ChatResult = { blocks: [], text: '', reasoning: '', toolCalls: [], finishReason: 'other', stopSequence: undefined, usage: undefined, error: undefined }
  const open = new Map<number, ResultBlock>()
  // A delta without its start (never sent by our providers) still lands in a block of its kind.
  const block = <K extends ResultBlock['type']>(index: number, type: K, make: () => Extract<ResultBlock, { type: K }>): Extract<ResultBlock, { type: K }> => {
    const existing = open.get(index)
    if (existing !== undefined && existing.type === type) return existing as Extract<ResultBlock, { type: K }>
    const created = make()
    open.set(index, created)
    result.blocks.push(created)
    return created
  }
  for await (const event of events) {
    observe(event)
    switch (event.type) {
      case 'text-start':
      case 'text-delta': {
        const text = block(event.block, 'text', () => ({ type: 'text', text: '' }))
        if (event.type === 'text-delta') text.text += event.delta
        break
      }
      case 'reasoning-start':
      case 'reasoning-delta': {
        const reasoning = block(event.block, 'reasoning', () => ({ type: 'reasoning', text: '' }))
        if (event.type === 'reasoning-delta') reasoning.text += event.delta
        break
      }
      case 'reasoning-end': {
        const reasoning = block(event.block, 'reasoning', () => ({ type: 'reasoning', text: '' }))
        if (event.signature) reasoning.signature = event.signature
        if (event.redacted) reasoning.redacted = true
        break
      }
      case 'tool-call-start':
        block(event.block, 'tool-call', () => ({ type: 'tool-call', callId: event.callId, name: event.name, arguments: '' }))
        break
      case 'tool-call-delta': {
        const call = open.get(event.block)
        if (call?.type === 'tool-call') call.arguments += event.argumentsDelta
        break
      }
      case 'finish':
        result.finishReason = event.reason
        result.stopSequence = event.stopSequence
        result.usage = event.usage
        return withViews(result)
      case 'error':
        result.error = event.error
        result.finishReason = 'error'
        return withViews(result)
    }
  }
  // Events that stop without a finish (the upstream cut, or the call was aborted) are not an answer.
  result.error = new UpstreamError('server', 'the upstream stream ended before it finished', 'unknown', 'unknown')
  result.finishReason = 'error'
  return withViews(result)
}

function withViews(result: ChatResult): ChatResult {
  for (const block of result.blocks) {
    if (block.type === 'text') result.text += block.text
    else if (block.type === 'reasoning') result.reasoning += block.redacted ? '' : block.text
    else result.toolCalls.push(block)
  }
  return result
}
