/**
 * A tool result sent as several text parts (Chat Completions content parts, Responses input_text
 * parts, Messages text blocks) as the one text a canonical tool result carries: the parts joined
 * by a newline, so the words at their edges stay apart and every client format reaches a backend
 * with the same text. An empty part says nothing, so it adds no line either.
 */
export function toolResultText(parts: readonly string[]): string {
  return parts.filter(part => part !== '').join('\n')
}
