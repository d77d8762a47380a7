import type { ApiError } from '../../../http/errors'
import type { ChatEvent, FinishReason, Usage } from '../../canonical'
import { isCutShort } from '../../tool-input'
import type { ResponseMeta, StreamEncoder } from '../types'
import { functionCallItem, itemId, messageItem, outputText, reasoningItem, refusalPart, responseObject, statusOf, truncatedItems, type Echo, type ResponseStatus } from './encode'

/** One output item of the response, opened by a canonical block. */
interface Item {
  readonly kind: 'message' | 'reasoning' | 'function_call'
  readonly index: number
  readonly id: string
  /** `"item_id":…,"output_index":…`, serialised once for the item's frames. */
  readonly where: string
  /** Text, reasoning text, or function arguments so far. */
  text: string
  open: boolean
  /** The status the item was closed with. */
  status?: ResponseStatus
  callId?: string
  name?: string
  /** Reasoning: whether the summary part was announced (only once the upstream gave text). */
  summary?: boolean
  /** Message: whether its content part was announced, and whether it is a refusal (told by its first delta). */
  part?: boolean
  refusal?: boolean
  signature?: string
  redacted?: boolean
}

/**
 * Whether an ended item's done events may go out before the finish. A call whose arguments are
 * cut short of whole JSON waits for it: if the answer was truncated, that call is the incomplete
 * item, wherever it stands (a backend may interleave parallel calls; truncatedItems).
 */
function closesNow(item: Item): boolean {
  return item.kind !== 'function_call' || !isCutShort(item.text)
}

/**
 * The Responses event stream as the official openai SDK's `responses.stream()` accumulates it:
 * response.created and response.in_progress; per canonical block one output item
 * (output_item.added … output_item.done) carrying its content events (a message's
 * content_part / output_text, a reasoning item's summary part / summary text, a function call's
 * arguments); then response.completed (response.incomplete when truncated) with the whole output
 * and usage, or response.failed. Every event is `event: <type>` plus JSON data with a
 * sequence_number counting from 0; item events carry item_id, output_index and content_index
 * (or summary_index) exactly where the API's types have them.
 */
export class ResponsesStreamEncoder implements StreamEncoder {
  private readonly items: Item[] = []
  private readonly byBlock = new Map<number, Item>()
  private sequence = 0
  /** The sequence number before finish(): a failed settlement replaces its frames with fail()'s. */
  private sequenceAtFinish: number | undefined
  /**
   * A message, reasoning item or function call its block ended, whose done events wait for the
   * next event: the finish may still make it `incomplete` (a truncated answer), and its
   * output_item.done must say what the final response says.
   */
  private ended: Item | undefined
  /**
   * The function call open until its tool-call-end, and the events of other blocks that came
   * meanwhile (in order): items stream one after the other, and a Chat Completions backend may
   * interleave the arguments of parallel calls (its deltas carry an index), ending them all only
   * at the finish. Had the call been closed when the next block started, its done events would
   * carry part of its arguments and more deltas would follow them. So the next items are
   * written once the call ends: for such a backend, at the finish.
   */
  private call: Item | undefined
  private waiting: ChatEvent[] | undefined
  /** Text blocks started whose first text has not come (no item yet). */
  private textToCome: Set<number> | undefined

  constructor(
    private readonly meta: ResponseMeta,
    private readonly echo: Echo,
  ) {}

  start(): string[] {
    const response = responseObject(this.meta, this.echo, { status: 'in_progress', output: [], usage: null })
    return [this.lifecycle('response.created', response), this.lifecycle('response.in_progress', response)]
  }

  push(event: ChatEvent): string[] {
    // The usage an upstream reported before its end is for the meter only (canonical.ts).
    if (event.type === 'usage') return []
    const call = this.call
    if (call !== undefined && 'block' in event && this.byBlock.get(event.block) !== call) {
      ;(this.waiting ??= []).push(event)
      return []
    }
    // A text block becomes a message item at its first text: an empty one (Claude's before a
    // tool_use) is no item, as the non-streamed response leaves it out (encodeResponse).
    switch (event.type) {
      case 'text-start':
        ;(this.textToCome ??= new Set()).add(event.block)
        return []
      case 'text-delta':
        if (this.textToCome?.has(event.block) !== true) break
        if (event.delta === '') return []
        this.textToCome.delete(event.block)
        return [...this.step({ type: 'text-start', block: event.block }), ...this.step(event)]
      case 'text-end':
        if (this.textToCome?.delete(event.block) === true) return []
    }
    return this.step(event)
  }

  /** One event, text blocks opened as items. */
  private step(event: ChatEvent): string[] {
    const ended = this.ended
    // A new block finishes the items still open before it is added (below), as the API streams
    // items one after the other (a provider may leave a text block open).
    const opens = event.type === 'text-start' || event.type === 'reasoning-start' || event.type === 'tool-call-start'
    if (ended === undefined && !opens) return this.release(this.frames(event))
    this.ended = undefined
    const frames = ended === undefined || !closesNow(ended) ? [] : this.close(ended, 'completed')
    // A call held back by closesNow is no longer among the trailing calls once an item of another
    // kind follows it, so a truncation cannot make it incomplete: it closes here, in its place.
    const afterCalls = event.type !== 'tool-call-start'
    if (opens) for (const item of this.items) if (item.open && item.kind !== 'reasoning' && (afterCalls || closesNow(item))) frames.push(...this.close(item, 'completed'))
    for (const frame of this.frames(event)) frames.push(frame)
    return this.release(frames)
  }

  /** Once the open call ended: `frames`, then those of the events that waited behind it. */
  private release(frames: string[]): string[] {
    const waiting = this.waiting
    if (waiting === undefined || this.call !== undefined) return frames
    this.waiting = undefined
    for (const event of waiting) for (const frame of this.push(event)) frames.push(frame)
    return frames
  }

  private frames(event: ChatEvent): string[] {
    switch (event.type) {
      case 'text-start': {
        const item = this.open(event.block, 'message', 'msg')
        // The content part is added with the first delta, which tells output_text from refusal.
        return [this.event('response.output_item.added', `"output_index":${item.index},"item":${JSON.stringify({ id: item.id, type: 'message', status: 'in_progress', content: [], role: 'assistant' })}`)]
      }
      case 'text-delta': {
        const item = this.byBlock.get(event.block)
        if (item === undefined || event.delta === '') return []
        const frames = item.part === true ? [] : [this.partAdded(item, event.refusal === true)]
        item.text += event.delta
        const delta = JSON.stringify(event.delta)
        frames.push(item.refusal ? this.event('response.refusal.delta', `${item.where},"content_index":0,"delta":${delta}`) : this.event('response.output_text.delta', `${item.where},"content_index":0,"delta":${delta},"logprobs":[]`))
        return frames
      }
      case 'reasoning-start': {
        const item = this.open(event.block, 'reasoning', 'rs')
        return [this.event('response.output_item.added', `"output_index":${item.index},"item":${JSON.stringify(this.itemObject(item, 'in_progress'))}`)]
      }
      case 'reasoning-delta': {
        const item = this.byBlock.get(event.block)
        if (item === undefined || event.delta === '') return []
        const frames: string[] = []
        if (item.summary !== true) {
          item.summary = true
          frames.push(this.event('response.reasoning_summary_part.added', `${item.where},"summary_index":0,"part":{"type":"summary_text","text":""}`))
        }
        item.text += event.delta
        frames.push(this.event('response.reasoning_summary_text.delta', `${item.where},"summary_index":0,"delta":${JSON.stringify(event.delta)}`))
        return frames
      }
      case 'reasoning-end': {
        const item = this.byBlock.get(event.block)
        if (item === undefined) return []
        item.signature = event.signature
        item.redacted = event.redacted
        // Closed by the next event, or by the finish: reasoning cut by max_output_tokens is incomplete.
        if (item.open) this.ended = item
        return []
      }
      case 'tool-call-start': {
        const item = this.open(event.block, 'function_call', 'fc')
        item.callId = event.callId
        item.name = event.name
        this.call = item
        return [this.event('response.output_item.added', `"output_index":${item.index},"item":${JSON.stringify(this.itemObject(item, 'in_progress'))}`)]
      }
      case 'tool-call-delta': {
        const item = this.byBlock.get(event.block)
        if (item === undefined || event.argumentsDelta === '') return []
        item.text += event.argumentsDelta
        return [this.event('response.function_call_arguments.delta', `${item.where},"delta":${JSON.stringify(event.argumentsDelta)}`)]
      }
      case 'text-end':
      case 'tool-call-end': {
        const item = this.byBlock.get(event.block)
        if (item !== undefined && item.open) this.ended = item
        if (item === this.call) this.call = undefined
        return []
      }
      default:
        return []
    }
  }

  finish(reason: FinishReason, usage: Usage): string[] {
    this.sequenceAtFinish = this.sequence
    const { status, incomplete } = statusOf(reason)
    // A call a provider left open ends here, and the events that waited behind it are written.
    const frames: string[] = []
    while (this.call !== undefined) {
      this.call = undefined
      this.release(frames)
    }
    // The items still open (the one ended last, calls held back by closesNow, any a provider left
    // open) close now: those a truncated answer leaves incomplete (truncatedItems) say so in their
    // output_item.done as in the response.
    this.ended = undefined
    const cut = status === 'incomplete' ? truncatedItems(this.items.map(item => (item.kind === 'function_call' ? item.text : undefined))) : undefined
    for (const item of this.items) if (item.open) frames.push(...this.close(item, cut?.has(item.index) === true ? 'incomplete' : 'completed'))
    const output = this.output()
    for (const index of cut ?? []) {
      const item = output[index] as { status?: string } | undefined
      if (item?.status !== undefined) item.status = 'incomplete'
    }
    const response = responseObject(this.meta, this.echo, { status, output, usage, incomplete })
    frames.push(this.lifecycle(status === 'completed' ? 'response.completed' : 'response.incomplete', response))
    return frames
  }

  /** The events waiting behind the open call: a stream that ends before the finish never writes them. */
  unsent(): ChatEvent[] {
    return this.waiting ?? []
  }

  /** An in-band failure: response.failed with the output so far (open items incomplete). */
  fail(error: ApiError): string[] {
    if (this.sequenceAtFinish !== undefined) this.sequence = this.sequenceAtFinish
    const response = responseObject(this.meta, this.echo, { status: 'failed', output: this.output(), usage: null, error })
    return [this.lifecycle('response.failed', response)]
  }

  private open(block: number, kind: Item['kind'], prefix: 'msg' | 'rs' | 'fc'): Item {
    const index = this.items.length
    const id = itemId(this.meta, prefix, index)
    const item: Item = { kind, index, id, where: `"item_id":${JSON.stringify(id)},"output_index":${index}`, text: '', open: true }
    this.items.push(item)
    this.byBlock.set(block, item)
    return item
  }

  private close(item: Item, status: ResponseStatus): string[] {
    if (!item.open) return []
    item.open = false
    item.status = status
    const frames: string[] = []
    const text = JSON.stringify(item.text)
    if (item.kind === 'message') {
      if (item.part !== true) frames.push(this.partAdded(item, false))
      if (item.refusal) frames.push(this.event('response.refusal.done', `${item.where},"content_index":0,"refusal":${text}`))
      else frames.push(this.event('response.output_text.done', `${item.where},"content_index":0,"text":${text},"logprobs":[]`))
      frames.push(this.event('response.content_part.done', `${item.where},"content_index":0,"part":${JSON.stringify(item.refusal ? refusalPart(item.text) : outputText(item.text))}`))
    } else if (item.kind === 'reasoning' && item.summary === true) {
      frames.push(this.event('response.reasoning_summary_text.done', `${item.where},"summary_index":0,"text":${text}`))
      frames.push(this.event('response.reasoning_summary_part.done', `${item.where},"summary_index":0,"part":{"type":"summary_text","text":${text}}`))
    } else if (item.kind === 'function_call') {
      frames.push(this.event('response.function_call_arguments.done', `${item.where},"arguments":${text}`))
    }
    frames.push(this.event('response.output_item.done', `"output_index":${item.index},"item":${JSON.stringify(this.itemObject(item, status))}`))
    return frames
  }

  /** A message's content part, announced once. */
  private partAdded(item: Item, refusal: boolean): string {
    item.part = true
    item.refusal = refusal
    return this.event('response.content_part.added', `${item.where},"content_index":0,"part":${JSON.stringify(refusal ? refusalPart('') : outputText(''))}`)
  }

  private itemObject(item: Item, status: ResponseStatus) {
    switch (item.kind) {
      case 'message':
        return messageItem(item.id, item.text, status, item.refusal === true)
      case 'reasoning':
        return reasoningItem(item.id, item.text, item.signature, item.redacted, status)
      case 'function_call':
        return functionCallItem(item.id, { callId: item.callId!, name: item.name!, arguments: item.text }, status)
    }
  }

  /** Every item as it stands: done items as they were closed, open ones incomplete. */
  private output(): unknown[] {
    return this.items.map(item => this.itemObject(item, item.status ?? 'incomplete'))
  }

  private event(type: string, fields: string): string {
    return `event: ${type}\ndata: {"type":"${type}","sequence_number":${this.sequence++},${fields}}\n\n`
  }

  private lifecycle(type: string, response: unknown): string {
    return this.event(type, `"response":${JSON.stringify(response)}`)
  }
}
