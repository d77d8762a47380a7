import { ApiError } from '../http/errors'
import type { ChatRequest } from './canonical'
import { outputCap, typicalInputTokens } from './meter'

/**
 * What the chosen model can do, checked before anything is reserved: tools, reasoning controls,
 * images and hosted tools need the matching capability, and the request must fit the context.
 */
export function checkPolicy(request: ChatRequest): void {
  const { capabilities, contextLength, id } = request.route
  if (request.tools.length > 0 && !capabilities.tools) throw new ApiError('invalid_request', `model ${id} does not support tools`, 'tools')
  if (request.reasoning && !capabilities.reasoning) {
    throw new ApiError('invalid_request', `model ${id} does not advertise reasoning controls`, 'reasoning_effort')
  }
  if (!capabilities.vision) {
    for (const message of request.messages) {
      const image = message.parts.find(part => part.type === 'image')
      if (image) throw new ApiError('invalid_request', `model ${id} does not accept images`, image.param ?? 'messages')
    }
  }
  // Hosted web tools need the model's catalog capability (spec §4.7); Encrypted chat never
  // takes them (spec §4.10: the gateway cannot add plaintext to a ciphertext conversation).
  if (request.hosted.webFetch || request.hosted.webSearch) {
    const tool = request.hosted.webFetch ? 'web_fetch' : 'web_search'
    if (request.route.level === 'encrypted') throw new ApiError('invalid_request', `hosted ${tool} is not available with Encrypted models`, 'tools')
    if (request.hosted.webFetch && !capabilities.supportsWebFetch) {
      throw new ApiError('invalid_request', `model ${id} does not support hosted web_fetch (its catalog entry lacks supports_web_fetch)`, 'tools')
    }
    if (request.hosted.webSearch && !capabilities.supportsWebSearch) {
      throw new ApiError('invalid_request', `model ${id} does not support hosted web_search (its catalog entry lacks supports_web_search)`, 'tools')
    }
  }
  const asked = request.sampling.maxOutputTokens
  if (asked !== undefined && asked > request.route.maxOutputTokens) {
    throw new ApiError('invalid_request', `max_tokens ${asked} exceeds model ${id}'s maximum output of ${request.route.maxOutputTokens} tokens`, 'max_tokens')
  }
  const input = typicalInputTokens(request)
  // Without an explicit max_tokens the answer may use whatever context is left.
  const output = request.sampling.maxOutputTokens === undefined ? 1 : outputCap(request, request.route)
  if (input + output > contextLength) {
    if (request.sampling.maxOutputTokens === undefined) {
      throw new ApiError('invalid_request', `the request (about ${input} input tokens) does not fit model ${id}'s context of ${contextLength} tokens with room for an answer; shorten the messages`, 'messages')
    }
    throw new ApiError(
      'invalid_request',
      `the request (about ${input} input tokens plus up to ${output} output tokens) does not fit model ${id}'s context of ${contextLength} tokens; shorten the messages or lower max_tokens`,
      'messages',
    )
  }
}
