// Same-format pass-through (ARCHITECTURE.md §11, bench/README.md "Same-format pass-through"):
// a Chat Completions client streaming from a Chat Completions upstream gets the upstream's
// chunks as `passthrough` events instead of canonical events re-encoded frame by frame.
//
// Each upstream chunk is classified:
// - plain: only the head (id, object, created, model, system_fingerprint, `usage: null`), one
//   choice 0 with no finish_reason, and a delta of role / content / reasoning_content / null
//   refusal / tool calls with ids (or continuing known ones). Its delta goes out as the JSON
//   text the chat-completions encoder would write for the same events, so the reply's bytes
//   are those of the re-encoding path (test/providers/openai-compatible-pass-through.test.ts).
// - anything else (an error chunk, `reasoning`, a tool call without id or name, a tool call that
//   starts while the one before it is unfinished (its text not yet whole JSON: the backend may
//   be interleaving their deltas, which the encoder undoes), a call whose id an earlier one has
//   (the translator makes one up), another call at a known index (namesAnotherCall), function_call,
//   a finish_reason, the usage chunk, `[DONE]`, extra fields such as OpenAI's service_tier or
//   obfuscation, a head that changed): the rest of the stream goes through ChunkTranslator,
//   which is told what already went out, so the terminal frames are held and settled as always.
//
// The common chunk (content only, same head as before) skips JSON.parse: the first such chunk
// is parsed and becomes a template (its text before and after the content string); later
// chunks that are the template around a valid JSON string literal are the same structure with
// other content. This holds because a bare `"` only ever delimits a JSON string: the template's
// text cannot match inside a string value.
//
// A stream read whole (a declared length) is scanned in place (`whole`): its template chunks are
// recognised in the text itself, without the SSE decoder or a copy of their lines.

import type { ChatEvent } from '../../inference/canonical'
import { SseDecoder, type SseEvent } from '../../http/sse'
import { isWholeJson } from '../../inference/tool-input'
import { parseStringLiteral, SPECIAL, SPECIAL_OR_WIDE } from '../../lib/json-literal'
import { ChunkTranslator, namesAnotherCall, type StreamContext } from './from-upstream-stream'

type Passthrough = Extract<ChatEvent, { type: 'passthrough'; format: 'chat-completions' }>

/** A tool call forwarded so far: `index` is the client's (order of first appearance), also used as its block. */
interface ForwardedTool {
  index: number
  callId: string
  name: string
  /** Its argument text so far, up to the last plain chunk (the translator takes it on at the hand-over). */
  text: string
}

/** What the client sees of one plain chunk, built before anything is committed. */
interface Planned {
  /** The stream's first chunk starts the response, as ChunkTranslator's does. */
  start: Extract<ChatEvent, { type: 'response-start' }> | undefined
  deltas: string[]
  textBytes: number
  reasoningBytes: number
  toolBytes: number
  started: Array<{ key: number; tool: ForwardedTool }>
}

const HEAD_KEYS = new Set(['id', 'object', 'created', 'model', 'system_fingerprint', 'choices', 'usage'])
const CHOICE_KEYS = new Set(['index', 'delta', 'logprobs', 'finish_reason'])
const DELTA_KEYS = new Set(['role', 'content', 'reasoning_content', 'refusal', 'tool_calls'])
const CONTENT_KEY = '"content":'

/**
 * The pass-through counterpart of ChunkTranslator (same `event` / `end` / `ended` shape, for
 * the provider's frame loop). Events are `passthrough` ones while chunks are plain, then the
 * translator's.
 */
export class PassThroughTranslator {
  private readonly translator: ChunkTranslator
  private handedOver = false
  private head: { id: unknown; created: unknown; model: unknown; fingerprint: unknown } | undefined
  /** The content chunk template: its text up to and including the opening quote of the content string, and from its closing quote. */
  private prefix: string | undefined
  private suffix = ''
  /** Forwarded tool calls by the upstream's `index` (as ChunkTranslator keys them). */
  private readonly tools = new Map<number, ForwardedTool>()
  /** The tool call forwarded last. */
  private lastTool: ForwardedTool | undefined
  /** The ids of the forwarded calls. */
  private readonly callIds = new Set<string>()
  private current: Passthrough | undefined

  constructor(context: StreamContext) {
    this.translator = new ChunkTranslator(context)
  }

  /** Whether the terminal event has been produced (only the translator produces one). */
  get ended(): boolean {
    return this.translator.ended
  }

  /** The usage reported so far (usage chunks always go through the translator). */
  get reportedUsage() {
    return this.translator.reportedUsage
  }

  event(event: SseEvent, out: ChatEvent[]): void {
    if (this.handedOver) return this.translator.event(event, out)
    const data = event.data
    const prefix = this.prefix
    if (prefix !== undefined && data.length > prefix.length + this.suffix.length && data.startsWith(prefix) && data.endsWith(this.suffix)) {
      if (this.literal(data.slice(prefix.length, data.length - this.suffix.length), out)) return
    }
    if (data === '[DONE]') return this.handOver().done(out)
    let chunk: unknown
    try {
      chunk = JSON.parse(data)
    } catch {
      return this.handOver().event(event, out)
    }
    const planned = this.plan(chunk)
    if (planned === undefined) return this.handOver().push(chunk, out)
    this.commit(planned, out)
    if (this.prefix === undefined) this.learn(chunk as Record<string, unknown>, data)
  }

  /**
   * A stream read whole, up to its terminal event (`end` still follows). Its frames are found
   * in the text itself: one that is `data: `, the template around a literal and a blank line is
   * read in place; another that is one `data: ` line (in a text without CR) becomes its event
   * directly; anything else goes through the SSE decoder, fed the text cut only after blank
   * lines (where an event is dispatched and the decoder's state is empty). No frame's line is
   * copied into a string of its own unless it must be parsed (bench/README.md, "An instant stream
   * read in place"). The client's bytes are the same either way.
   */
  whole(text: string, out: ChatEvent[]): void {
    const plainLines = !text.includes('\r')
    let decoder: SseDecoder | undefined
    const sse: SseEvent[] = []
    for (let at = 0; at < text.length && !this.ended; ) {
      const blank = text.indexOf('\n\n', at)
      const next = blank === -1 ? text.length : blank + 2
      if (blank !== -1 && !this.handedOver && this.templateFrame(text, at, blank, out)) {
        at = next
        continue
      }
      if (blank !== -1 && plainLines && text.startsWith('data: ', at) && text.indexOf('\n', at) === blank) {
        this.event({ event: undefined, data: text.slice(at + 6, blank) }, out)
        at = next
        continue
      }
      ;(decoder ??= new SseDecoder()).pushText(at === 0 && next === text.length ? text : text.slice(at, next), sse)
      for (const event of sse) {
        this.event(event, out)
        if (this.ended) return
      }
      sse.length = 0
      at = next
    }
  }

  /** Reads the frame `text[at, blank)` if it is `data: `, the template and a valid literal. */
  private templateFrame(text: string, at: number, blank: number, out: ChatEvent[]): boolean {
    const prefix = this.prefix
    if (prefix === undefined) return false
    const start = at + 6 + prefix.length
    const end = blank - this.suffix.length
    if (end <= start || !text.startsWith('data: ', at) || !text.startsWith(prefix, at + 6) || !text.startsWith(this.suffix, end)) return false
    return this.literal(text.slice(start, end), out)
  }

  /** Forwards a template chunk's content, if its literal is one valid JSON string literal's inside. */
  private literal(literal: string, out: ChatEvent[]): boolean {
    const wide = SPECIAL_OR_WIDE.test(literal)
    if (!wide || !SPECIAL.test(literal)) {
      this.text(`{"content":"${literal}"}`, wide ? Buffer.byteLength(literal) : literal.length, out)
      return true
    }
    const content = parseStringLiteral(literal)
    if (content === undefined) return false
    if (content !== '') this.text(`{"content":${JSON.stringify(content)}}`, Buffer.byteLength(content), out)
    return true
  }

  /** The byte stream ended: complete only as the translator would (a finish_reason seen, which never happens while plain). */
  end(out: ChatEvent[]): void {
    const translator = this.handedOver ? this.translator : this.handOver()
    translator.end(out)
  }

  /** From now on the translator owns the stream, knowing the tool calls already forwarded. */
  private handOver(): ChunkTranslator {
    this.handedOver = true
    this.current = undefined
    if (this.head !== undefined) {
      this.translator.resume([...this.tools].map(([key, tool]) => ({ key, block: tool.index, callId: tool.callId, name: tool.name, text: tool.text })))
    }
    return this.translator
  }

  /** Forwards a content delta (its JSON text) of `bytes` UTF-8 bytes. */
  private text(delta: string, bytes: number, out: ChatEvent[]): void {
    const event = this.open(out)
    event.deltas.push(delta)
    event.textBytes += bytes
  }

  /** The passthrough event of this batch of frames (one per network chunk, so one enqueue). */
  private open(out: ChatEvent[]): Passthrough {
    const current = this.current
    if (current !== undefined && out[out.length - 1] === current) return current
    const event: Passthrough = { type: 'passthrough', format: 'chat-completions', deltas: [], textBytes: 0, reasoningBytes: 0, toolBytes: 0 }
    out.push(event)
    this.current = event
    return event
  }

  private commit(planned: Planned, out: ChatEvent[]): void {
    // Even a first chunk with nothing to show (the role alone) yields its event: the provider's
    // stream() opens at the first event (first-event.ts), and must not wait for the next chunk.
    if (planned.start !== undefined) out.push(planned.start)
    for (const { key, tool } of planned.started) {
      this.tools.set(key, tool)
      this.callIds.add(tool.callId)
    }
    if (planned.started.length > 0) this.lastTool = planned.started.at(-1)!.tool
    if (planned.deltas.length === 0) return
    const event = this.open(out)
    for (const delta of planned.deltas) event.deltas.push(delta)
    event.textBytes += planned.textBytes
    event.reasoningBytes += planned.reasoningBytes
    event.toolBytes += planned.toolBytes
    if (planned.started.length > 0) (event.toolBlocks ??= []).push(...planned.started.map(started => started.tool.index))
  }

  /**
   * A parsed chunk's frames if it is plain (undefined otherwise), mirroring ChunkTranslator.delta
   * and the chat-completions encoder: reasoning, then content, then tool calls in array order;
   * a new tool call is a start frame with empty arguments, then its arguments if any.
   */
  private plan(chunk: unknown): Planned | undefined {
    if (!isRecord(chunk)) return undefined
    for (const key in chunk) if (!HEAD_KEYS.has(key)) return undefined
    const { id, created, model, system_fingerprint: fingerprint, usage, choices } = chunk
    if (chunk.object !== 'chat.completion.chunk' || typeof id !== 'string' || typeof created !== 'number' || typeof model !== 'string') return undefined
    if (usage !== undefined && usage !== null) return undefined
    if (fingerprint !== undefined && fingerprint !== null && typeof fingerprint !== 'string') return undefined
    const head = this.head
    if (head !== undefined && (head.id !== id || head.created !== created || head.model !== model || head.fingerprint !== fingerprint)) return undefined
    if (!Array.isArray(choices) || choices.length !== 1) return undefined
    const choice = choices[0]
    if (!isRecord(choice)) return undefined
    for (const key in choice) if (!CHOICE_KEYS.has(key)) return undefined
    if (choice.index !== 0 || (choice.logprobs !== undefined && choice.logprobs !== null) || (choice.finish_reason !== undefined && choice.finish_reason !== null)) return undefined
    const delta = choice.delta
    if (!isRecord(delta)) return undefined
    for (const key in delta) if (!DELTA_KEYS.has(key)) return undefined
    const { role, content, reasoning_content: reasoning, refusal, tool_calls: toolCalls } = delta
    if (role !== undefined && typeof role !== 'string') return undefined
    if (!stringOrNull(content) || !stringOrNull(reasoning) || (refusal !== undefined && refusal !== null)) return undefined
    // `created` is Unix seconds on this wire; canonical times are epoch milliseconds.
    const start = head === undefined ? ({ type: 'response-start', id, model, createdAt: created * 1000 } as const) : undefined
    const planned: Planned = { start, deltas: [], textBytes: 0, reasoningBytes: 0, toolBytes: 0, started: [] }
    if (typeof reasoning === 'string' && reasoning !== '') {
      planned.deltas.push(JSON.stringify({ reasoning_content: reasoning }))
      planned.reasoningBytes += Buffer.byteLength(reasoning)
    }
    if (typeof content === 'string' && content !== '') {
      planned.deltas.push(JSON.stringify({ content }))
      planned.textBytes += Buffer.byteLength(content)
    }
    if (toolCalls !== undefined && !this.planTools(toolCalls, planned)) return undefined
    if (head === undefined) this.head = { id, created, model, fingerprint }
    return planned
  }

  private planTools(toolCalls: unknown, planned: Planned): boolean {
    if (!Array.isArray(toolCalls)) return false
    const started = new Map<number, ForwardedTool>()
    let last = this.lastTool
    for (const [position, call] of toolCalls.entries()) {
      if (!isRecord(call) || !Number.isInteger(call.index)) return this.unplan(toolCalls, position)
      const fn = call.function
      if (fn !== undefined && !isRecord(fn)) return this.unplan(toolCalls, position)
      const args = fn?.arguments
      if (args !== undefined && typeof args !== 'string') return this.unplan(toolCalls, position)
      const key = call.index as number
      const name = fn?.name
      let tool = this.tools.get(key) ?? started.get(key)
      // Another call at a known index (Ollama numbers every call 0): the translator's to sort out.
      if (tool !== undefined && call.id !== undefined && call.id !== null && call.id !== '' && call.id !== tool.callId) return this.unplan(toolCalls, position)
      if (tool !== undefined && namesAnotherCall(tool, { id: typeof call.id === 'string' && call.id !== '' ? call.id : undefined, name: typeof name === 'string' && name !== '' ? name : undefined, arguments: args ?? '' })) return this.unplan(toolCalls, position)
      if (tool === undefined) {
        // A new call needs its id and name in its first chunk; otherwise the translator's rules
        // (a generated id, a start delayed until the name) apply.
        const callId = call.id
        if (typeof callId !== 'string' || callId === '' || typeof name !== 'string' || name === '' || (call.type !== undefined && call.type !== 'function')) return this.unplan(toolCalls, position)
        // An id another call has would leave a result two calls to answer: the translator makes one up.
        if (this.callIds.has(callId) || (started.size > 0 && [...started.values()].some(other => other.callId === callId))) return this.unplan(toolCalls, position)
        // Checked once per call, when the next one starts (OpenAI's calls are whole by then).
        if (last !== undefined && !isWholeJson(last.text)) return this.unplan(toolCalls, position)
        tool = { index: this.tools.size + started.size, callId, name, text: '' }
        last = tool
        started.set(key, tool)
        planned.started.push({ key, tool })
        planned.deltas.push(JSON.stringify({ tool_calls: [{ index: tool.index, id: callId, type: 'function', function: { name, arguments: '' } }] }))
        // The name is output the model wrote, counted as the meter counts a translated call's.
        planned.toolBytes += Buffer.byteLength(name)
      }
      if (args !== undefined && args !== '') {
        tool.text += args
        planned.deltas.push(JSON.stringify({ tool_calls: [{ index: tool.index, function: { arguments: args } }] }))
        planned.toolBytes += Buffer.byteLength(args)
      }
    }
    return true
  }

  /**
   * Takes back the argument text planTools added to forwarded calls for the calls before
   * `position`: the chunk is not plain, and the translator reads all of it after the hand-over.
   */
  private unplan(toolCalls: unknown[], position: number): false {
    for (let at = position - 1; at >= 0; at -= 1) {
      const call = toolCalls[at] as { index: number; function?: { arguments?: string } }
      const tool = this.tools.get(call.index)
      const args = call.function?.arguments
      if (tool !== undefined && args !== undefined) tool.text = tool.text.slice(0, tool.text.length - args.length)
    }
    return false
  }

  /** Makes the first chunk with only content (and the role) the template of the ones that follow it. */
  private learn(chunk: Record<string, unknown>, data: string): void {
    const delta = (chunk.choices as Array<{ delta: Record<string, unknown> }>)[0]!.delta
    const content = delta.content
    // Ollama repeats the role in every delta: it is part of the template (the translator ignores it).
    if (typeof content !== 'string' || content === '' || Object.keys(delta).some(key => key !== 'content' && key !== 'role')) return
    // A template from several `data:` lines could match a frame read in place (`whole`) whose
    // second line is not data at all.
    if (data.includes('\n')) return
    const marker = CONTENT_KEY + JSON.stringify(content)
    const at = data.indexOf(marker)
    if (at === -1 || data.indexOf(marker, at + 1) !== -1) return
    this.prefix = data.slice(0, at + CONTENT_KEY.length + 1)
    this.suffix = data.slice(at + marker.length - 1)
  }
}

function stringOrNull(value: unknown): boolean {
  return value === undefined || value === null || typeof value === 'string'
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
