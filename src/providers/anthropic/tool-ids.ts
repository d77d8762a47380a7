import type { AnthropicMessage } from './to-upstream'

const ANTHROPIC_TOOL_ID = /^[A-Za-z0-9_-]+$/

/**
 * Gives the tool_use and tool_result blocks of a request's turns ids Anthropic takes, in place:
 *
 * - Anthropic refuses the whole request when a tool_use id does not match ^[a-zA-Z0-9_-]+$, and
 *   other backends' ids need not (Kimi and DeepSeek write `functions.get_weather:0`): those are
 *   respelled (anthropicToolId).
 * - Anthropic refuses a request whose tool_use ids repeat ("tool_use ids must be unique"), and
 *   OpenAI takes one, since a tool message answers the assistant turn just before it (Kimi numbers
 *   its calls afresh in every turn: `functions.get_weather:0` again and again). A tool_use whose id
 *   an earlier block already took gets a fresh one, and the tool_results of the user turn that
 *   follows it, which answer it, get the same: the n-th result with that id answers the n-th call.
 */
export function assignToolIds(messages: readonly AnthropicMessage[]): void {
  const used = new Set<string>()
  // The ids the last assistant turn's calls were sent with, by the id their results carry.
  let answered = new Map<string, string[]>()
  for (const message of messages) {
    if (message.role === 'assistant') answered = new Map()
    const taken = new Map<string, number>()
    for (const block of message.content) {
      if (block.type === 'tool_use') {
        const id = anthropicToolId(block.id)
        block.id = used.has(id) ? freshId(id, used) : id
        used.add(block.id)
        const sent = answered.get(id)
        if (sent === undefined) answered.set(id, [block.id])
        else sent.push(block.id)
      } else if (block.type === 'tool_result') {
        const id = anthropicToolId(block.tool_use_id)
        const sent = answered.get(id)
        const count = taken.get(id) ?? 0
        taken.set(id, count + 1)
        // A result with no call before it is Anthropic's to refuse, as the client sent it.
        block.tool_use_id = sent === undefined ? id : sent[Math.min(count, sent.length - 1)]!
      }
    }
  }
}

/**
 * Respelled with `_` for each character the pattern refuses plus a hash of the original, so a
 * call and its result still pair and two ids never meet in one spelling.
 */
function anthropicToolId(id: string): string {
  if (ANTHROPIC_TOOL_ID.test(id)) return id
  return `${id.replace(/[^A-Za-z0-9_-]/g, '_')}_${Bun.hash(id).toString(36)}`
}

/** `id` with the first suffix `_2`, `_3`, … that no block took. */
function freshId(id: string, used: ReadonlySet<string>): string {
  for (let suffix = 2; ; suffix += 1) {
    const candidate = `${id}_${suffix}`
    if (!used.has(candidate)) return candidate
  }
}
