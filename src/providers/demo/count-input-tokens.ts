import type { ChatRequest, Part } from '../../inference/canonical'

/** What the demo charges for one image, whatever its size (a flat, documented guess). */
export const DEMO_IMAGE_TOKENS = 64

/**
 * The demo's input token count: ceil(characters ÷ 4) per message over its text, reasoning,
 * tool calls (name + arguments) and tool results, plus DEMO_IMAGE_TOKENS per image and
 * ceil(bytes ÷ 4) per file part, plus ceil(characters ÷ 4) of the tool definitions as JSON.
 * Deterministic, so tests and billing examples can predict it exactly.
 */
export function countInputTokens(request: ChatRequest): number {
  let tokens = 0
  for (const message of request.messages) {
    let characters = 0
    for (const part of message.parts) {
      characters += partCharacters(part)
      if (part.type === 'image') tokens += DEMO_IMAGE_TOKENS
    }
    tokens += Math.ceil(characters / 4)
  }
  if (request.tools.length > 0) tokens += Math.ceil(JSON.stringify(request.tools).length / 4)
  return tokens
}

function partCharacters(part: Part): number {
  switch (part.type) {
    case 'text':
    case 'reasoning':
      return part.text.length
    case 'tool-call':
      return part.name.length + part.arguments.length
    case 'tool-result':
      return part.content.length
    case 'file':
      return part.data.length
    case 'image':
      return 0
  }
}
