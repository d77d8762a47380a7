import type { ChatEvent, FinishReason, Usage } from './canonical'
import { UpstreamError } from '../providers/types'

/** A whole (non-streamed) response, assembled from events. */
export interface ChatResult {
  text: string
  reasoning: string
  reasoningSignature: string | undefined
  toolCalls: Array<{ callId: string; name: string; arguments: string }>
  finishReason: FinishReason
  usage: Usage | undefined
  /** Set when the upstream failed after it had started answering. */
  error: UpstreamError | undefined
}

/** Folds events into a ChatResult, observing each (the meter) on the way. */
export async function collect(events: AsyncIterable<ChatEvent>, observe: (event: ChatEvent) => void): Promise<ChatResult> {
  const result: ChatResult = { text: '', reasoning: '', reasoningSignature: undefined, toolCalls: [], finishReason: 'other', usage: undefined, error: undefined }
  const calls = new Map<number, { callId: string; name: string; arguments: string }>()
  for await (const event of events) {
    observe(event)
    switch (event.type) {
      case 'text-delta':
        result.text += event.delta
        break
      case 'reasoning-delta':
        result.reasoning += event.delta
        break
      case 'reasoning-end':
        if (event.signature) result.reasoningSignature = event.signature
        break
      case 'tool-call-start': {
        const call = { callId: event.callId, name: event.name, arguments: '' }
        calls.set(event.block, call)
        result.toolCalls.push(call)
        break
      }
      case 'tool-call-delta': {
        const call = calls.get(event.block)
        if (call) call.arguments += event.argumentsDelta
        break
      }
      case 'finish':
        result.finishReason = event.reason
        result.usage = event.usage
        return result
      case 'error':
        result.error = event.error
        result.finishReason = 'error'
        return result
    }
  }
  // Events that stop without a finish (the upstream cut, or the call was aborted) are not an answer.
  result.error = new UpstreamError('server', 'the upstream stream ended before it finished', 'unknown', 'unknown')
  result.finishReason = 'error'
  return result
}
