import type { ChatRequest, FunctionTool, Message, Part } from '../../inference/canonical'
import { sampleArguments, sampleJson } from './sample-arguments'

/** The fixed opening of every plain demo answer. */
export const DEMO_PREAMBLE = 'Hello from the demo model.'

/** What the demo model will say, decided up front from the request alone (so it is deterministic). */
export interface DemoPlan {
  /** Present when reasoning was asked for and the route offers it. */
  readonly reasoning?: string
  /** The visible answer (absent when the turn only calls tools). */
  readonly text?: string
  readonly toolCalls: ReadonlyArray<{ readonly callId: string; readonly name: string; readonly arguments: string }>
}

/**
 * The demo's rules:
 * - after tool results (the last message carries them), it answers in text using them;
 * - with tools, unless `toolChoice` is `none`, it calls a tool when the choice forces one
 *   (`required` → the first tool, `{ name }` → that tool), or when the last user text names
 *   tools (every one named, in order of mention, or only the first when parallel calls are off),
 *   or says "call" (the first tool); the arguments fill the schema's required properties;
 * - otherwise it echoes the last user text after DEMO_PREAMBLE;
 * - a text answer asked for as JSON is JSON: a sample of a json_schema format (as tool arguments
 *   are), or `{"reply": <the text>}` for json_object, so the SDKs' parse helpers read it;
 * - with `request.reasoning` on a reasoning-capable route, it first reasons in one sentence.
 */
export function planReply(request: ChatRequest): DemoPlan {
  const last = request.messages.at(-1)
  const results = last?.parts.filter((part): part is Extract<Part, { type: 'tool-result' }> => part.type === 'tool-result') ?? []
  const forced = request.toolChoice === 'required' || typeof request.toolChoice === 'object'
  const userText = lastUserText(request.messages)
  const tools = results.length > 0 && !forced ? [] : chooseTools(request, userText)
  const toolCalls = tools.map((tool, index) => ({
    // Unique across the turns of one conversation, and the same for the same request.
    callId: `call_demo_${request.messages.length}_${index}`,
    name: tool.name,
    arguments: JSON.stringify(sampleArguments(tool.parameters)),
  }))

  let text: string | undefined
  let intent: string
  if (toolCalls.length > 0) {
    intent = `call ${toolCalls.map(call => call.name).join(' and ')}`
  } else if (results.length > 0) {
    text = results.map(result => describeResult(result, request.messages)).join(' ')
    intent = 'answer with the tool result'
  } else {
    const images = last?.role === 'user' ? last.parts.filter(part => part.type === 'image').length : 0
    const attached = images > 0 ? ` (with ${images} image${images === 1 ? '' : 's'})` : ''
    text = userText.trim() === '' ? `${DEMO_PREAMBLE} Send a message and I will repeat it back.` : `${DEMO_PREAMBLE} You said${attached}: ${userText.trim()}`
    intent = 'repeat the message back'
  }
  const format = request.responseFormat
  if (text !== undefined && format !== undefined && format.type !== 'text') {
    text = JSON.stringify(format.type === 'json_schema' ? sampleJson(format.schema) : { reply: text })
    intent = `${intent} as JSON`
  }
  const words = userText.split(/\s+/).filter(word => word !== '').length
  const reasoning = request.reasoning !== undefined && request.route.capabilities.reasoning ? `The user wrote ${words} word${words === 1 ? '' : 's'}. I will ${intent}.` : undefined
  return { ...(reasoning !== undefined ? { reasoning } : {}), ...(text !== undefined ? { text } : {}), toolCalls }
}

function chooseTools(request: ChatRequest, userText: string): FunctionTool[] {
  const { tools, toolChoice } = request
  if (tools.length === 0 || toolChoice === 'none') return []
  if (typeof toolChoice === 'object') return tools.filter(tool => tool.name === toolChoice.name).slice(0, 1)
  const mentioned = tools
    .map(tool => ({ tool, at: mentionIndex(userText, tool.name) }))
    .filter(entry => entry.at >= 0)
    .sort((a, b) => a.at - b.at)
    .map(entry => entry.tool)
  if (mentioned.length > 0) return request.parallelToolCalls === false ? mentioned.slice(0, 1) : mentioned
  if (toolChoice === 'required' || /\bcall\b/i.test(userText)) return tools.slice(0, 1)
  return []
}

/** Where `name` appears in `text` as a whole identifier (case-insensitive), or -1. */
function mentionIndex(text: string, name: string): number {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
  const match = new RegExp(`(^|[^A-Za-z0-9_-])${escaped}(?![A-Za-z0-9_-])`, 'i').exec(text)
  return match === null ? -1 : match.index + match[1]!.length
}

function lastUserText(messages: readonly Message[]): string {
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!
    if (message.role !== 'user') continue
    const text = message.parts.flatMap(part => (part.type === 'text' ? [part.text] : [])).join(' ')
    // A Messages-style user turn that only carries tool results is not the user's text.
    if (text !== '' || !message.parts.every(part => part.type === 'tool-result')) return text
  }
  return ''
}

function describeResult(result: Extract<Part, { type: 'tool-result' }>, messages: readonly Message[]): string {
  const call = messages.flatMap(message => message.parts).find(part => part.type === 'tool-call' && part.callId === result.callId)
  const name = call?.type === 'tool-call' ? call.name : 'requested'
  return result.isError ? `The ${name} tool reported an error: ${result.content}` : `The ${name} tool returned: ${result.content}`
}
