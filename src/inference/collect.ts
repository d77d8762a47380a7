import type { ChatEvent, FinishDetail, FinishReason, Part, Usage } from './canonical'
import { ReplayedEvents } from '../providers/replay'
import { UpstreamError } from '../providers/types'

/**
 * One block of an answer, in the canonical part shapes, so a result replays as an assistant
 * message unchanged. Reasoning blocks keep their own signature and redacted flag: Anthropic
 * verifies each signed block when it comes back, in its original position.
 */
export type ResultBlock = Extract<Part, { type: 'text' | 'reasoning' | 'tool-call' }>

/** A whole (non-streamed) response, assembled from events; the finish's detail with it. */
export interface ChatResult extends FinishDetail {
  /** Every block in order of first appearance (the source of truth). */
  blocks: ResultBlock[]
  /** Views for formats that flatten: all text blocks joined, all visible (non-redacted) reasoning joined, the tool calls in order. */
  text: string
  reasoning: string
  toolCalls: Array<Extract<ResultBlock, { type: 'tool-call' }>>
  /** The part of `text` the upstream marked as a refusal (Chat Completions' `refusal` field). */
  refusal: string
  finishReason: FinishReason
  usage: Usage | undefined
  /** Set when the upstream failed after it had started answering. */
  error: UpstreamError | undefined
}

/**
 * Folds events into a ChatResult, observing each (the meter) on the way. An observer that returns
 * a promise (a Fusion stream's client reading slowly) holds the next read of a live stream until
 * it settles.
 */
export async function collect(events: AsyncIterable<ChatEvent>, observe: (event: ChatEvent) => void | Promise<void>): Promise<ChatResult> {
  const folder = new ResultFolder()
  if (events instanceof ReplayedEvents) {
    // Read whole already (a JSON answer): folded in one synchronous pass, without an iterator's
    // promise per event. The call's signal is checked between events, as replaying does.
    for (const event of events.events) {
      if (events.signal.aborted) break
      observe(event)
      if (folder.fold(event)) return folder.finished()
    }
  } else {
    for await (const event of events) {
      const paced = observe(event)
      if (paced !== undefined) await paced
      if (folder.fold(event)) return folder.finished()
    }
  }
  // Events that stop without a finish (the upstream cut, or the call was aborted) are not an answer.
  return folder.cut()
}

class ResultFolder {
  private readonly result: ChatResult = { blocks: [], text: '', reasoning: '', toolCalls: [], refusal: '', finishReason: 'other', usage: undefined, error: undefined }
  private readonly open = new Map<number, ResultBlock>()

  /** Adds one event; true once the result is complete (a finish or an error). */
  fold(event: ChatEvent): boolean {
    const result = this.result
    switch (event.type) {
      case 'text-start':
      case 'text-delta': {
        const text = this.block(event.block, 'text', () => ({ type: 'text', text: '' }))
        if (event.type === 'text-delta') {
          text.text += event.delta
          if (event.refusal) result.refusal += event.delta
        }
        return false
      }
      case 'reasoning-start':
      case 'reasoning-delta': {
        const reasoning = this.block(event.block, 'reasoning', () => ({ type: 'reasoning', text: '' }))
        if (event.type === 'reasoning-delta') reasoning.text += event.delta
        return false
      }
      case 'reasoning-end': {
        const reasoning = this.block(event.block, 'reasoning', () => ({ type: 'reasoning', text: '' }))
        if (event.signature) reasoning.signature = event.signature
        if (event.redacted) reasoning.redacted = true
        return false
      }
      case 'tool-call-start':
        this.block(event.block, 'tool-call', () => ({ type: 'tool-call', callId: event.callId, name: event.name, arguments: '' }))
        return false
      case 'tool-call-delta': {
        const call = this.open.get(event.block)
        if (call?.type === 'tool-call') call.arguments += event.argumentsDelta
        return false
      }
      case 'finish':
        result.finishReason = event.reason
        result.stopSequence = event.stopSequence
        result.contextWindowExceeded = event.contextWindowExceeded
        result.usage = event.usage
        return true
      case 'error':
        result.error = event.error
        result.finishReason = 'error'
        return true
      default:
        return false
    }
  }

  finished(): ChatResult {
    return withViews(this.result)
  }

  cut(): ChatResult {
    this.result.error = new UpstreamError('server', 'the upstream stream ended before it finished', 'unknown', 'unknown')
    this.result.finishReason = 'error'
    return withViews(this.result)
  }

  // A delta without its start (never sent by our providers) still lands in a block of its kind.
  private block<K extends ResultBlock['type']>(index: number, type: K, make: () => Extract<ResultBlock, { type: K }>): Extract<ResultBlock, { type: K }> {
    const existing = this.open.get(index)
    if (existing !== undefined && existing.type === type) return existing as Extract<ResultBlock, { type: K }>
    const created = make()
    this.open.set(index, created)
    this.result.blocks.push(created)
    return created
  }
}

function withViews(result: ChatResult): ChatResult {
  for (const block of result.blocks) {
    if (block.type === 'text') result.text += block.text
    else if (block.type === 'reasoning') result.reasoning += block.redacted ? '' : block.text
    else result.toolCalls.push(block)
  }
  return result
}
